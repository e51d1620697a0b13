package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// pyClient is the Python client's package (clients/python), run from
// source with Debian's python3 and httpx (scripts/deps.sh --browser).
const pyClient = "../clients/python"

// runPython runs the Python program rel (under pyClient) with env and
// returns what it printed; a failure fails the test with its output.
func runPython(t *testing.T, rel string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPy, filepath.Join(pyClient, rel))
	cmd.Env = append(os.Environ(), append(env, "PYTHONPATH="+filepath.Join(pyClient, "src"), "PYTHONDONTWRITEBYTECODE=1")...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "python3 %s\nstdout: %s\nstderr: %s", rel, out.String(), errOut.String())
	return strings.TrimSpace(out.String())
}

// TestPythonClientPublishesAndReadsBack runs the Python client, generated
// from openapi.json, against the real API with a producer's key: it
// publishes an event, reads it back delivered, finds it listed by its
// correlation, is answered the event's state when it sends it again, and
// gets an invalid event (sequence 0) back as a typed problem (400,
// invalid-field, naming the field). Then the README's Python
// program (clients/python/examples/publish.py) publishes its event, in a
// correlation of its own: the TypeScript client's README program, run by
// another test on the same Temporal server, uses order-42, and a
// sequencer's workflow ID is namespace-wide.
func TestPythonClientPublishesAndReadsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	rcv := newFlakyReceiver(t)
	rcv.healed.Store(true)
	b.createEndpointWith(map[string]any{"url": rcv.srv.URL, "event_types": []string{"order.*"}})
	key := b.createKey("py-client", "events:write", "events:read")

	out := runPython(t, "tests/stack.py", "HOOKFLOW_URL="+b.apiURL, "HOOKFLOW_API_KEY="+key, "HOOKFLOW_PREFIX="+b.prefix)
	id := b.prefix + "-py-1"
	require.JSONEq(t, `{"accepted":"`+id+`","state":"delivered","type":"order.paid","listed":["`+id+`"],"again":"delivered",`+
		`"invalid":{"status":400,"type":"https://hookflow.dev/problems/invalid-field","field":"sequence"}}`, out)
	require.EqualValues(t, contract.StateDelivered, b.eventState(id).State)

	// The README's Python program is this one, quoted whole.
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	program, err := os.ReadFile("../clients/python/examples/publish.py")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```python\n"+string(program)+"```", "the README quotes examples/publish.py whole")
	out = runPython(t, "examples/publish.py", "HOOKFLOW_URL="+b.apiURL, "HOOKFLOW_API_KEY="+key)
	require.Regexp(t, `^order-57-paid (queued|waiting|delivered)$`, out)
	waitFor(t, 30*time.Second, "order-57-paid delivered", func() bool { return b.eventState("order-57-paid").State == contract.StateDelivered })
	require.Equal(t, []string{id, "order-57-paid"}, rcv.acceptedIDs())
}
