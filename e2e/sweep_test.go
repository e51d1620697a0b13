package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/intake"
)

// lockProbe is a client interceptor that, whenever the API announces an
// event to its sequencer, tries to lock that event's ledger row from
// another connection without waiting: a sweep that called Temporal from
// inside a transaction holding the row would make it fail.
type lockProbe struct {
	interceptor.ClientInterceptorBase
	mu    sync.Mutex
	probe func(ctx context.Context, id string) error
	seen  map[string]error
}

func (p *lockProbe) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &lockProbeOutbound{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, p: p}
}

type lockProbeOutbound struct {
	interceptor.ClientOutboundInterceptorBase
	p *lockProbe
}

func (o *lockProbeOutbound) UpdateWithStartWorkflow(ctx context.Context, in *interceptor.ClientUpdateWithStartWorkflowInput) (client.WorkflowUpdateHandle, error) {
	if in.UpdateOptions.UpdateName == contract.UpdateArrive && len(in.UpdateOptions.Args) == 1 {
		if a, ok := in.UpdateOptions.Args[0].(contract.Arrival); ok {
			o.p.mu.Lock()
			probe := o.p.probe
			o.p.mu.Unlock()
			if probe != nil {
				err := probe(ctx, a.EventID)
				o.p.mu.Lock()
				o.p.seen[a.EventID] = err
				o.p.mu.Unlock()
			}
		}
	}
	return o.Next.UpdateWithStartWorkflow(ctx, in)
}

// TestSweepStartsQueuedEventsWithNoRowLocked: an event stored while Temporal
// could not take it (queued) is started by the sweep in its scheduled loop,
// and no row of the ledger is locked while the sweep calls Temporal.
func TestSweepStartsQueuedEventsWithNoRowLocked(t *testing.T) {
	t.Parallel()
	probe := &lockProbe{seen: map[string]error{}}
	b := setup(t, options{interceptors: []interceptor.ClientInterceptor{probe}})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	probe.mu.Lock()
	probe.probe = func(ctx context.Context, id string) error {
		return pgx.BeginFunc(ctx, b.store.Pool(), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT 1 FROM events WHERE id = $1 FOR UPDATE NOWAIT", id)
			return err
		})
	}
	probe.mu.Unlock()

	// Queued: stored as the API stores it, its start left to the sweep.
	// The three become due together (swept_at stamped in one statement,
	// within the sweep's 2 s grace of their insert): a sweep that took the
	// first alone would start it, and its sequencer, loading the ledger,
	// would release the others with no arrival of theirs for the probe.
	ctx := context.Background()
	corr := b.id("queued")
	for s := int64(1); s <= 3; s++ {
		_, ok, err := b.store.EventInsertRouted(ctx, intake.Event{
			ID: fmt.Sprintf("%s-%d", corr, s), CorrelationID: corr, Sequence: s, EndpointID: ep.ID,
			Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1},
		}, []string{ep.ID}, nil)

		require.NoError(t, err)
		require.True(t, ok)
	}
	tag, err := b.store.Pool().Exec(ctx, "UPDATE events SET swept_at = now() WHERE correlation_id = $1 AND state = 'queued'", corr)
	require.NoError(t, err)
	require.EqualValues(t, 3, tag.RowsAffected(), "no sweep took an event within its grace")
	for s := 1; s <= 3; s++ {
		b.waitState(fmt.Sprintf("%s-%d", corr, s), contract.StateDelivered, 30*time.Second)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	for s := 1; s <= 3; s++ {
		id := fmt.Sprintf("%s-%d", corr, s)
		err, ok := probe.seen[id]
		require.True(t, ok, "the sweep announced %s", id)
		require.NoError(t, err, "%s was locked while the sweep called Temporal", id)
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2, 3}, applied[corr])
}

// workerEnv names the environment variable that makes this test binary a
// hookflow worker process (see TestMain): a worker a test can SIGKILL.
const workerEnv = "HOOKFLOW_E2E_WORKER"

// runWorkerProcess runs a worker from the HOOKFLOW_* environment until it
// is killed.
func runWorkerProcess() int {
	names := []string{"HOOKFLOW_DATABASE_URL", "HOOKFLOW_TEMPORAL_ADDRESS", "HOOKFLOW_TEMPORAL_NAMESPACE", "HOOKFLOW_TASK_QUEUE",
		"HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_DELIVERY_TIMEOUT"}
	cfg, _, err := config.Load("worker", "", names, nil, os.Getenv, nil, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.AllowPrivate = true // the test's receiver listens on loopback
	ctx := context.Background()
	logger := app.NewLogger(os.Stderr)
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := app.TemporalClient(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := app.StartWorker(cfg, st, c, logger); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("worker running")
	select {}
}

// startWorkerProcess starts this test binary as a worker process on the
// bundle's queue.
func (b *bundle) startWorkerProcess() *exec.Cmd {
	b.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=1",
		"HOOKFLOW_DATABASE_URL="+b.cfg.DatabaseURL, "HOOKFLOW_TEMPORAL_ADDRESS="+b.cfg.TemporalAddress,
		"HOOKFLOW_TEMPORAL_NAMESPACE="+b.cfg.TemporalNamespace, "HOOKFLOW_TASK_QUEUE="+b.cfg.TaskQueue,
		"HOOKFLOW_RECOVERY_WINDOW="+b.cfg.RecoveryWindow.String(), "HOOKFLOW_DELIVERY_TIMEOUT="+b.cfg.DeliveryTimeout.String())
	cmd.Stdout, cmd.Stderr = testenvWriter(b.t), testenvWriter(b.t)
	require.NoError(b.t, cmd.Start())
	b.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestWorkerKilledAfterTheReceiverCommitted: the worker process making an
// attempt is SIGKILLed after the receiver committed the event and before
// its answer came back. Another worker takes the event over: it sends the
// event again with the same identifiers, the receiver answers "already
// processed", and the event is applied once; its successor follows in
// order.
func TestWorkerKilledAfterTheReceiverCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	corr := b.id("killed")
	rcv.fault = func(ev contract.Envelope, n int) string {
		if ev.CorrelationID == corr && ev.Sequence == 1 && n == 1 {
			return "hold-after-commit"
		}
		return ""
	}
	first := b.startWorkerProcess()
	for s := int64(1); s <= 2; s++ {
		code, _ := b.postEvent(fmt.Sprintf("%s-%d", corr, s), corr, s, ep.ID, map[string]any{"amount": s})
		require.Equal(t, http.StatusAccepted, code)
	}
	select {
	case id := <-rcv.committed:
		require.Equal(t, corr+"-1", id)
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver never got the event")
	}
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	err := first.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the worker was killed: %v", err)
	close(rcv.release)

	b.startWorkerProcess()
	b.waitState(corr+"-2", contract.StateDelivered, 90*time.Second)
	require.Equal(t, contract.StateDelivered, b.eventState(corr+"-1").State)
	require.Equal(t, 2, rcv.requestsFor(corr+"-1"), "sent again by the next worker")
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr], "applied once, in order")
}

// testenvWriter writes a child process's output to the test log.
func testenvWriter(t *testing.T) *logWriter { return &logWriter{t: t} }

type logWriter struct{ t *testing.T }

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// breakSequencer puts, in place of corr's sequencer, a workflow on
// taskQueue of a type no worker has. On the sequencers' queue its every
// task fails, and an update sent to it is refused; on a queue nobody polls
// it never has a task, and an update sent to it waits for ever.
func (b *bundle) breakSequencer(corr, taskQueue string) {
	b.t.Helper()
	ctx := context.Background()
	id := contract.SequencerID(contract.DefaultTenant, corr)
	if _, err := b.client.DescribeWorkflowExecution(ctx, wf(id), ""); err == nil {
		b.terminate(id)
	}
	_, err := b.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, "BrokenSequencer")
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = b.client.TerminateWorkflow(context.Background(), wf(id), "", "test over") })
}

// TestSweepsGoOnPastASequencerThatNeverAnswers: two correlations' sequencers
// are broken: one refuses every update (its tasks keep failing), the other
// never answers one (no worker polls its queue). A queued event of the
// second and a head of the first whose workflow was terminated are the
// oldest rows of their sweeps; every call about them fails or runs into its
// deadline, and they go to the back of the line, while the queued events
// and the terminated heads of other correlations are started and repaired
// as usual.
func TestSweepsGoOnPastASequencerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{repairAfter: 2 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	ctx := context.Background()
	deadQueued, deadHead, queued, head := b.id("dead-queued"), b.id("dead-head"), b.id("queued"), b.id("head")
	var healed atomic.Bool
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if !healed.Load() {
			return "503"
		}
		return ""
	}

	// Two heads delivering, the older one's sequencer then broken; both
	// workflows terminated.
	for _, corr := range []string{deadHead, head} {
		code, _ := b.postEvent(corrID(corr, 1), corr, 1, ep.ID, map[string]any{"amount": 1})
		require.Equal(t, http.StatusAccepted, code)
		b.waitState(corrID(corr, 1), contract.StateDelivering, 30*time.Second)
	}
	b.breakSequencer(deadHead, contract.SequencerTaskQueue(b.cfg.TaskQueue))
	b.terminate(corrID(deadHead, 1))
	b.terminate(corrID(head, 1))

	// Queued events (Temporal could not take them), the broken
	// correlation's first.
	b.breakSequencer(deadQueued, b.cfg.TaskQueue+"-polled-by-nobody")
	for _, e := range []struct {
		corr string
		seq  int64
	}{{deadQueued, 1}, {queued, 1}, {queued, 2}} {
		_, ok, err := b.store.EventInsertRouted(ctx, intake.Event{
			ID: corrID(e.corr, e.seq), CorrelationID: e.corr, Sequence: e.seq, EndpointID: ep.ID,
			Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1},
		}, []string{ep.ID}, nil)

		require.NoError(t, err)
		require.True(t, ok)
	}
	healed.Store(true)

	b.waitState(corrID(queued, 2), contract.StateDelivered, 60*time.Second)
	b.waitState(corrID(head, 1), contract.StateDelivered, 60*time.Second)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[queued])
	require.Equal(t, []int64{1}, applied[head])
	require.Equal(t, contract.StateQueued, b.eventState(corrID(deadQueued, 1)).State, "its sequencer never answered")
}
