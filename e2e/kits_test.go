package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/conformance"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
)

// The receiver kits' example ledger receivers (kit/receiver/examples/ledger,
// kit/receiver-ts/examples/ledger.ts, kit/receiver-py/examples/ledger.py),
// one program in three languages: the same environment (DATABASE_URL,
// RECEIVER_SECRETS, PORT), the same tables, and the same two mutants, which
// take the dedup record or the cursor check out of the kit. The TypeScript
// kit is built by `make kits` (make test runs it first); Python runs from
// source with Debian's python3 and psycopg (scripts/deps.sh --browser).
const (
	kitDir     = "../kit"
	tsKitDir   = "../kit/receiver-ts"
	pyKitDir   = "../kit/receiver-py"
	systemPy   = "/usr/bin/python3"
	mutantNone = ""
)

// kitCommand is the command that runs kit's example receiver, as mutant
// ("", "no-dedup" or "no-cursor"). The Go kit's mutants are builds with a
// tag (kit/receiver/checks.go); the others read RECEIVER_MUTANT.
func kitCommand(t *testing.T, kit, mutant string) *exec.Cmd {
	t.Helper()
	switch kit {
	case "go":
		bin := filepath.Join(t.TempDir(), "ledger")
		args := []string{"build", "-o", bin}
		if mutant != mutantNone {
			args = append(args, "-tags", "receiver_mutant_"+strings.ReplaceAll(mutant, "-", "_"))
		}
		build := exec.Command("go", append(args, "./receiver/examples/ledger")...)
		build.Dir = kitDir
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build the Go kit's example receiver: %s", out)
		return exec.Command(bin)
	case "typescript":
		prog := filepath.Join(tsKitDir, "dist", "examples", "ledger.js")
		if _, err := os.Stat(prog); err != nil {
			t.Fatalf("%s is not built (run make kits, which make test runs): %v", prog, err)
		}
		cmd := exec.Command("node", prog)
		cmd.Env = append(os.Environ(), "RECEIVER_MUTANT="+mutant)
		return cmd
	case "python":
		cmd := exec.Command(systemPy, filepath.Join(pyKitDir, "examples", "ledger.py"))
		cmd.Env = append(os.Environ(), "RECEIVER_MUTANT="+mutant, "PYTHONPATH="+filepath.Join(pyKitDir, "src"), "PYTHONDONTWRITEBYTECODE=1")
		return cmd
	}
	t.Fatalf("unknown kit %s", kit)
	return nil
}

// startKitReceiver runs kit's example receiver (as mutant) as a process on
// a free port and the database at dsn, with secrets, and returns its
// webhook URL once it listens. It is killed when the test ends; what it
// wrote to stderr is logged.
func startKitReceiver(t *testing.T, kit, mutant, dsn string, secrets ...string) string {
	t.Helper()
	cmd := kitCommand(t, kit, mutant)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+dsn, "RECEIVER_SECRETS="+strings.Join(secrets, " "), "PORT=0")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if s := strings.TrimSpace(stderr.String()); s != "" {
			t.Logf("%s receiver's stderr:\n%s", kit, s)
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening on ")
		require.True(t, ok, "first line of the %s receiver: %q", kit, line)
		return url
	case <-exited:
		t.Fatalf("the %s receiver exited before it listened: %s", kit, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("the %s receiver did not listen within 2 minutes: %s", kit, stderr.String())
	}
	return ""
}

// TestKitsPassConformanceAndTheirMutantsFail runs `hookflow conformance`'s
// cases against the example receiver of each kit (Go, TypeScript, Python),
// each a process on a database of its own: every case passes. Then against
// each kit's two mutants, one without the dedup record and one without the
// cursor check: the run fails each, on the cases that show what is missing
// (a duplicate answered 409 instead of 200; an event ahead of its
// predecessor applied instead of parked). The database each intact kit
// migrated holds the Go kit's migrations, recorded as the Go kit records
// them.
func TestKitsPassConformanceAndTheirMutantsFail(t *testing.T) {
	t.Parallel()
	mustFail := map[string][]string{
		"no-dedup":  {"exact_duplicate", "concurrent_duplicates", "replayed_old_id", "lost_ack_then_retry"},
		"no-cursor": {"gap_then_fill", "previous_gap_then_fill"},
	}
	for _, kit := range []string{"go", "typescript", "python"} {
		for _, mutant := range []string{mutantNone, "no-dedup", "no-cursor"} {
			name := kit + "/intact"
			if mutant != mutantNone {
				name = kit + "/" + mutant
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				secret, err := webhook.NewSecret()
				require.NoError(t, err)
				dsn := testenv.NewDatabase(t)
				url := startKitReceiver(t, kit, mutant, dsn, secret)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				report, err := conformance.Run(ctx, conformance.Config{URL: url, Secrets: []string{secret}})
				require.NoError(t, err)
				var out strings.Builder
				require.NoError(t, report.Print(&out))
				t.Logf("hookflow conformance %s (%s):\n%s", url, name, out.String())
				if mutant == mutantNone {
					require.True(t, report.OK(), "the %s kit must pass every case", kit)
					// One schema for every kit: the Go kit finds its own
					// migrations recorded in the database this kit migrated.
					pool, err := pgxpool.New(ctx, dsn)
					require.NoError(t, err)
					defer pool.Close()
					require.NoError(t, receiver.CheckMigrations(ctx, pool))
					return
				}
				require.False(t, report.OK(), "the %s kit's %s mutant must fail the run", kit, mutant)
				failed := map[string]bool{}
				for _, res := range report.Results {
					failed[res.Name] = !res.Passed
				}
				for _, name := range mustFail[mutant] {
					require.True(t, failed[name], "the %s kit's %s mutant passed %s", kit, mutant, name)
				}
			})
		}
	}
}

// answerProxy stands between hookflow and a receiver process: it forwards
// every delivery and returns the answer, except that drop decides, per
// event and attempt, to cut the connection once the receiver has answered
// (its commit done): a crash between commit and answer, as the sender sees
// it. It records what the receiver answered to each attempt.
type answerProxy struct {
	srv  *httptest.Server
	drop func(seq int64, attempt int) bool

	mu      sync.Mutex
	answers map[string][]string // event id → the receiver's "status" per attempt
	sigs    map[string]int      // event id → signatures on its last attempt
}

func newAnswerProxy(t *testing.T, target string, drop func(seq int64, attempt int) bool) *answerProxy {
	p := &answerProxy{drop: drop, answers: map[string][]string{}, sigs: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ev contract.Envelope
		_ = json.Unmarshal(body, &ev)
		resp, answer, err := passOn(r, target, body)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		var st struct {
			Status any `json:"status"`
		}
		_ = json.Unmarshal(answer, &st)
		p.mu.Lock()
		p.answers[ev.ID] = append(p.answers[ev.ID], fmt.Sprint(st.Status))
		p.sigs[ev.ID] = len(strings.Fields(r.Header.Get(webhook.HeaderSignature)))
		attempt := len(p.answers[ev.ID])
		p.mu.Unlock()
		if p.drop(ev.Sequence, attempt) {
			hijackClose(w)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// passOn sends a delivery's body, with its headers, on to target (the
// receiver behind a proxy), and returns its answer: the receiver's work is
// done whatever becomes of the proxy's own request.
func passOn(r *http.Request, target string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp, answer, err
}

func (p *answerProxy) signatures(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sigs[id]
}

func (p *answerProxy) answersTo(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.answers[id]...)
}

// ledgerRows is a lane's example_ledger: its sequences in the order applied.
func ledgerRows(t *testing.T, pool *pgxpool.Pool, endpointID, corr string) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT sequence FROM example_ledger WHERE endpoint_id = $1 AND correlation_id = $2 ORDER BY position`, endpointID, corr)
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return seqs
}

// TestKitReceiversApplyHookflowDeliveriesOnceInOrder: hookflow delivers to
// the TypeScript and the Python kit's example receivers, each a process on
// its own database behind a proxy that loses answers. The endpoint takes
// order.* only, so of a correlation's 1-5 it gets 1, 3, 4 and 5 (a gap in
// the sequences: 3 names 1 as its previous). 3's first answer is lost after
// the commit: hookflow redelivers it and the kit answers already_processed.
// Every answer to 4 is lost although the kit applied it, so 4 is
// dead-lettered; an operator rotates the endpoint's secret and skips 4, and
// 5 comes signed with the new secret and the old (the receiver holds the
// old alone), naming 3 as previous and 4 as skipped: the kit, whose cursor
// stands at 4, applies it. The ledger
// holds 1, 3, 4, 5, each once, in order.
func TestKitReceiversApplyHookflowDeliveriesOnceInOrder(t *testing.T) {
	t.Parallel()
	for _, kit := range []string{"typescript", "python"} {
		t.Run(kit, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{window: 4 * time.Second})
			secret, err := webhook.NewSecret()
			require.NoError(t, err)
			dsn := testenv.NewDatabase(t)
			url := startKitReceiver(t, kit, mutantNone, dsn, secret)
			px := newAnswerProxy(t, url, func(seq int64, attempt int) bool { return seq == 3 && attempt == 1 || seq == 4 })
			ep := b.createEndpointWith(map[string]any{"url": px.srv.URL + "/webhook", "secret": secret, "event_types": []string{"order.*"}})

			corr := b.id("kit-" + kit)
			id := func(seq int) string { return fmt.Sprintf("%s-%d", corr, seq) }
			for i, typ := range []string{"order.created", "audit.noted", "order.paid", "order.shipped", "order.closed"} {
				b.publish(id(i+1), corr, int64(i+1), typ)
			}
			require.Equal(t, contract.StateDelivered, b.waitSettled(id(3)), "3 after its lost answer")
			require.Equal(t, contract.StateDeadLettered, b.waitSettled(id(4)), "4, every answer lost")
			// The secret is rotated before 5 goes: hookflow signs with the new
			// one and the old, and the receiver, which holds the old alone,
			// verifies the second signature.
			require.Equal(t, http.StatusOK, b.call(http.MethodPost, "/v1/endpoints/"+ep.ID+"/rotate-secret", nil, nil))
			require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id(4)+"/skip", map[string]any{"note": "answer lost"}, nil))
			require.Equal(t, contract.StateDelivered, b.waitSettled(id(5)), "5 after 4 was skipped")

			pool, err := pgxpool.New(context.Background(), dsn)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			require.Equal(t, []int64{1, 3, 4, 5}, ledgerRows(t, pool, ep.ID, corr), "each event meant for the endpoint applied once, in order")
			require.Equal(t, []string{"applied"}, px.answersTo(id(1)))
			require.Equal(t, []string{"applied", "already_processed"}, px.answersTo(id(3)), "3 redelivered after its lost answer")
			fours := px.answersTo(id(4))
			require.GreaterOrEqual(t, len(fours), 2)
			require.Equal(t, "applied", fours[0])
			for _, a := range fours[1:] {
				require.Equal(t, "already_processed", a)
			}
			require.Equal(t, []string{"applied"}, px.answersTo(id(5)), "5 (previous 3, skipped 4) applied on the cursor at 4")
			require.Equal(t, 2, px.signatures(id(5)), "5 signed with the rotated secret and the old one")
			require.Empty(t, px.answersTo(id(2)), "2 was never meant for the endpoint")
		})
	}
}

// waitSettled waits for event id to be delivered or dead-lettered, and
// returns which: a receiver that refuses a redelivery (409) gets the event
// dead-lettered, and the test says so at once instead of timing out.
func (b *bundle) waitSettled(id string) contract.State {
	b.t.Helper()
	var st contract.State
	waitFor(b.t, time.Minute, id+" delivered or dead-lettered", func() bool {
		st = b.eventState(id).State
		return st == contract.StateDelivered || st == contract.StateDeadLettered
	})
	return st
}

// lockedBuffer collects a process's output, which the test may read while
// the process still writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort is a port nothing listens on, for a program that takes PORT and
// prints nothing when it listens.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestTourReceiversPassConformance runs the few-line receivers the README's
// tour shows, kit/receiver-ts/examples/tour.ts and
// kit/receiver-py/examples/tour.py (a balance per correlation, kept by
// each kit), as processes on databases of their own, and runs the
// conformance cases against them: every case passes, and each balance is
// what the cases applied, once each.
func TestTourReceiversPassConformance(t *testing.T) {
	t.Parallel()
	for _, kit := range []string{"typescript", "python"} {
		t.Run(kit, func(t *testing.T) {
			t.Parallel()
			secret, err := webhook.NewSecret()
			require.NoError(t, err)
			dsn, port := testenv.NewDatabase(t), freePort(t)
			var cmd *exec.Cmd
			var src, fence string
			if kit == "typescript" {
				cmd = exec.Command("node", filepath.Join(tsKitDir, "dist", "examples", "tour.js"))
				src, fence = filepath.Join(tsKitDir, "examples", "tour.ts"), "```ts\n"
			} else {
				cmd = exec.Command(systemPy, filepath.Join(pyKitDir, "examples", "tour.py"))
				src, fence = filepath.Join(pyKitDir, "examples", "tour.py"), "```python\n"
			}
			// The README's receiver is this program, quoted whole.
			readme, err := os.ReadFile("../README.md")
			require.NoError(t, err)
			program, err := os.ReadFile(src)
			require.NoError(t, err)
			require.Contains(t, string(readme), fence+string(program)+"```", "the README quotes %s whole", src)
			cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "WEBHOOK_SECRET="+secret, "PORT="+port,
				"PYTHONPATH="+filepath.Join(pyKitDir, "src"), "PYTHONDONTWRITEBYTECODE=1")
			var stderr lockedBuffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			waitFor(t, time.Minute, "the "+kit+" tour receiver listening", func() bool {
				c, err := net.Dial("tcp", "127.0.0.1:"+port)
				if err == nil {
					_ = c.Close()
				}
				return err == nil
			})

			report, err := conformance.Run(context.Background(), conformance.Config{URL: "http://127.0.0.1:" + port + "/webhook", Secrets: []string{secret}, CorrelationPrefix: "tour"})
			require.NoError(t, err)
			var out strings.Builder
			require.NoError(t, report.Print(&out))
			require.True(t, report.OK(), "the %s tour receiver:\n%s\n%s", kit, out.String(), stderr.String())

			// Each case's correlation gains 1 per event applied in it (the
			// run's data is {"amount":1}): the sparse chain 1, 4, 9 is 3.
			pool, err := pgxpool.New(context.Background(), dsn)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			var sparse, dup int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT
				(SELECT amount FROM balances WHERE account LIKE 'tour-%-sparse-duplicate'),
				(SELECT amount FROM balances WHERE account LIKE 'tour-%-concurrent-duplicates')`).Scan(&sparse, &dup))
			require.Equal(t, 3, sparse, "1, 4 and 9 applied, their repeats not")
			require.Equal(t, 1, dup, "ten simultaneous copies applied once")
		})
	}
}
