package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// tsClient is the TypeScript client's package, built by `make ts-client`
// (scripts/node.sh: npm ci, then tsc), which make test runs first.
const tsClient = "../clients/typescript"

// runNode runs the built TypeScript program rel (under tsClient's dist/)
// with env, and returns what it printed; a failure fails the test with its
// output.
func runNode(t *testing.T, rel string, env ...string) string {
	t.Helper()
	prog := filepath.Join(tsClient, "dist", rel)
	if _, err := os.Stat(prog); err != nil {
		t.Fatalf("%s is not built (run make ts-client, which make test runs): %v", prog, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", prog)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "node %s\nstdout: %s\nstderr: %s", rel, out.String(), errOut.String())
	return strings.TrimSpace(out.String())
}

// TestTypeScriptClientPublishesReadsReplaysAndSkips runs the TypeScript
// client's stack test (clients/typescript/test/stack.ts) against the real
// API, with a key of the scopes a producer and an operator hold: it
// publishes two events to a receiver that refuses them, reads them back
// dead-lettered, replays one and skips the other once the receiver heals,
// and gets a second replay and an invalid id back as typed problems. What it
// did is then read back here, from the API and the receiver.
func TestTypeScriptClientPublishesReadsReplaysAndSkips(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 4 * time.Second})
	rcv := newFlakyReceiver(t)
	heal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rcv.healed.Store(true)
	}))
	t.Cleanup(heal.Close)
	ep := b.createEndpoint(rcv.srv.URL)
	key := b.createKey("ts-client", "events:write", "events:read", "dead-letters:write")

	out := runNode(t, "test/stack.js", "HOOKFLOW_URL="+b.apiURL, "HOOKFLOW_API_KEY="+key,
		"HOOKFLOW_ENDPOINT_ID="+ep.ID, "HOOKFLOW_PREFIX="+b.prefix, "HOOKFLOW_HEAL_URL="+heal.URL)
	require.JSONEq(t, `{"delivered":"`+b.prefix+`-replayed","skipped":"`+b.prefix+`-skipped",`+
		`"conflict":"https://hookflow.dev/problems/not-dead-lettered","invalid":"https://hookflow.dev/problems/invalid-field"}`, out)

	require.EqualValues(t, "delivered", b.eventState(b.prefix+"-replayed").State)
	require.EqualValues(t, "skipped", b.eventState(b.prefix+"-skipped").State)
	require.Equal(t, []string{b.prefix + "-replayed"}, rcv.acceptedIDs(), "the replayed event reached the receiver once, the skipped one never")
	var page struct {
		Items []struct {
			EventID   string `json:"event_id"`
			Status    string `json:"status"`
			SkippedBy string `json:"skipped_by"`
			SkipNote  string `json:"skip_note"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters?status=all&endpoint_id="+ep.ID, nil, &page))
	require.Len(t, page.Items, 2)
	for _, d := range page.Items {
		switch d.EventID {
		case b.prefix + "-replayed":
			require.Equal(t, "replayed", d.Status)
		case b.prefix + "-skipped":
			require.Equal(t, "skipped", d.Status)
			require.Equal(t, "ts-client", d.SkippedBy)
			require.Equal(t, "refunded by hand", d.SkipNote)
		default:
			t.Fatalf("dead letter of %s, which the program did not send", d.EventID)
		}
	}
}

// TestTypeScriptReadmeProgramPublishes runs the README's ten-line
// TypeScript program (clients/typescript/examples/publish.ts, which the
// README quotes whole) against the real API: it publishes one event.
func TestTypeScriptReadmeProgramPublishes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(tsClient, "examples", "publish.ts"))
	require.NoError(t, err)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```ts\n"+string(src)+"```", "the README quotes examples/publish.ts whole")
	require.LessOrEqual(t, strings.Count(string(src), "\n"), 10, "the README's program is ten lines")

	b := setup(t, options{})
	rcv := newFlakyReceiver(t)
	rcv.healed.Store(true)
	b.createEndpointWith(map[string]any{"url": rcv.srv.URL, "event_types": []string{"order.*"}})
	key := b.createKey("producer", "events:write")

	out := runNode(t, "examples/publish.js", "HOOKFLOW_URL="+b.apiURL, "HOOKFLOW_API_KEY="+key)
	require.Regexp(t, `^order-42-paid (queued|waiting|delivered)$`, out)
	waitFor(t, 30*time.Second, "order-42-paid delivered", func() bool { return b.eventState("order-42-paid").State == contract.StateDelivered })
	require.Equal(t, []string{"order-42-paid"}, rcv.acceptedIDs())
}
