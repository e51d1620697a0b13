package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/services/starter"
)

// Operator buttons pressed in combination: each test is a
// sequence an operator can press in the Web UI and the API, which once
// applied a skipped event, stranded a replay or recorded one action as
// another.

// setupRejecting starts hookflow with a receiver registered as an endpoint
// that rejects (400) the sequences listed until the returned flag is set.
func setupRejecting(t *testing.T, opts options, seqs ...int64) (*bundle, *ledgerReceiver, endpoint, *atomic.Bool) {
	t.Helper()
	b := setup(t, opts)
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	healed := &atomic.Bool{}
	rcv.fault = func(ev contract.Envelope, _ int) string {
		for _, s := range seqs {
			if ev.Sequence == s && !healed.Load() {
				return "400"
			}
		}
		return ""
	}
	return b, rcv, ep, healed
}

func (b *bundle) postSequence(corr, endpointID string, from, to int64) {
	b.t.Helper()
	for s := from; s <= to; s++ {
		code, _ := b.postEvent(fmt.Sprintf("%s-%d", corr, s), corr, s, endpointID, map[string]any{"amount": s})
		require.Equal(b.t, http.StatusAccepted, code)
	}
}

// deadLetteredHead posts events 1 to last of a new correlation (name) to
// the endpoint and waits for 1, which its receiver rejects, to be
// dead-lettered; it returns the correlation and 1's event id.
func (b *bundle) deadLetteredHead(name, endpointID string, last int64) (corr, id string) {
	b.t.Helper()
	corr = b.id(name)
	id = corr + "-1"
	b.postSequence(corr, endpointID, 1, last)
	b.waitState(id, contract.StateDeadLettered, 30*time.Second)
	return corr, id
}

// waitCompleted waits until the latest run of workflow id has completed.
func (b *bundle) waitCompleted(id string) {
	b.t.Helper()
	waitFor(b.t, 5*time.Minute, id+" completes", func() bool {
		d, err := b.client.DescribeWorkflowExecution(context.Background(), wf(id), "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
}

// waitWorkflowOnDeadLetter waits until the running workflow of event id
// (one lane) says it waits on dead letter gen.
func (b *bundle) waitWorkflowOnDeadLetter(id string, gen int32, what string) {
	b.t.Helper()
	waitFor(b.t, 30*time.Second, what, func() bool {
		v, err := b.client.QueryWorkflow(context.Background(), wf(id), "", contract.QueryState)
		if err != nil {
			return false
		}
		var es contract.EventStatus
		return v.Get(&es) == nil && es.State == contract.StateDeadLettered && es.Lanes[0].Generation == gen
	})
}

// TestReplayAfterTerminateKeepsTheSkippedSequences (a restart once dropped
// skipped_sequences): 1 is
// dead-lettered and skipped, so 2 is released naming 1 in
// skipped_sequences, and is dead-lettered too. Terminate is pressed on 2's
// workflow; the receiver heals; 2 is replayed. The restarted workflow must
// still tell the receiver that 1 was skipped, or the receiver sees a gap
// and parks 2 for ever.
func TestReplayAfterTerminateKeepsTheSkippedSequences(t *testing.T) {
	t.Parallel()
	b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second}, 1, 2)
	corr := b.id("skip-terminate")
	b.postSequence(corr, ep.ID, 1, 3)
	b.waitState(corr+"-1", contract.StateDeadLettered, 30*time.Second)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+corr+"-1/skip", map[string]any{"note": "bad data"}, nil))
	b.waitState(corr+"-2", contract.StateDeadLettered, 30*time.Second)
	b.terminate(corr + "-2")
	healed.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+corr+"-2/replay", nil, nil))

	b.waitState(corr+"-3", contract.StateDelivered, 30*time.Second)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2, 3}, applied[corr])
	require.Equal(t, store.DeadLetterReplayed, b.deadLetter(corr+"-2").Status)
}

// TestReleaseOfATerminatedDeadLetterWaitsForTheOperator (a restart once
// dropped skipped_sequences, here on the release path): Terminate is
// pressed on a dead-lettered head, and its sequencer is resynced (the
// repair sweep of another API process, or a Reset of the sequencer, does
// that) before anyone replays it. The release that passes on starts the
// workflow again, waiting on its dead letter: it is not delivered behind
// the operator's back.
func TestReleaseOfATerminatedDeadLetterWaitsForTheOperator(t *testing.T) {
	t.Parallel()
	b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second}, 1)
	corr, id := b.deadLetteredHead("release-terminated", ep.ID, 2)
	b.terminate(id)
	healed.Store(true)

	st, err := starter.New(starter.Config{TaskQueue: b.cfg.TaskQueue, RecoveryWindow: b.cfg.RecoveryWindow, DeliveryTimeout: b.cfg.DeliveryTimeout}, b.store, b.client, b.logger)
	require.NoError(t, err)
	require.NoError(t, st.Resync(context.Background(), store.DefaultTenant, corr))
	b.waitWorkflowOnDeadLetter(id, 1, "the released workflow runs, waiting on its dead letter")
	time.Sleep(2 * time.Second)
	require.Equal(t, 1, rcv.requestsFor(id), "nothing is sent before the operator replays")
	require.Equal(t, store.DeadLetterOpen, b.deadLetter(id).Status)
	require.Equal(t, contract.StateDeadLettered, b.eventState(id).State)

	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	b.waitState(corr+"-2", contract.StateDelivered, 30*time.Second)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
}

// TestResetOfASkippedEventSendsNothing (a Reset once sent a skipped
// event): 1 is dead-lettered and
// skipped, the receiver heals, and Reset is pressed on 1's workflow, back
// to its first workflow task (its delivery). The reset run finds the event
// skipped in the ledger and sends nothing.
func TestResetOfASkippedEventSendsNothing(t *testing.T) {
	t.Parallel()
	b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second}, 1)
	corr, id := b.deadLetteredHead("reset-skipped", ep.ID, 2)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/skip", nil, nil))
	b.waitState(corr+"-2", contract.StateDelivered, 30*time.Second)
	b.waitCompleted(id)
	healed.Store(true)

	b.resetToFirstTask(id)
	b.waitCompleted(id)
	require.Equal(t, 1, rcv.requestsFor(id), "the skipped event is not sent again")
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2}, applied[corr])
	require.Equal(t, contract.StateSkipped, b.eventState(id).State)
	require.Equal(t, store.DeadLetterSkipped, b.deadLetter(id).Status)
}

// signalHook is a Temporal client interceptor that hands every
// SignalWorkflow through the client it is installed on to hook, with the
// call that sends it on.
type signalHook struct {
	interceptor.ClientInterceptorBase
	hook func(in *interceptor.ClientSignalWorkflowInput, send func() error) error
}

func (h *signalHook) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &signalHookOutbound{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, h: h}
}

type signalHookOutbound struct {
	interceptor.ClientOutboundInterceptorBase
	h *signalHook
}

func (o *signalHookOutbound) SignalWorkflow(ctx context.Context, in *interceptor.ClientSignalWorkflowInput) error {
	return o.h.hook(in, func() error { return o.Next.SignalWorkflow(ctx, in) })
}

// slowSignal holds back the Temporal signals of one name that go through
// the client it is installed on (the API's), so that a signal sent by hand
// from the Web UI overtakes them.
type slowSignal struct {
	name  atomic.Value // string: the signal held back; "" none
	delay time.Duration
}

func (s *slowSignal) hook() *signalHook {
	return &signalHook{hook: func(in *interceptor.ClientSignalWorkflowInput, send func() error) error {
		if name, _ := s.name.Load().(string); name != "" && in.SignalName == name {
			time.Sleep(s.delay)
		}
		return send()
	}}
}

// TestAWebUISignalRacingAnAPICallActsOnce (an API replay and a raw skip
// once both acted): the API claims an
// operator's action on a dead letter and signals the workflow, while an
// operator sends the other action by hand from the Web UI ({} input), which
// reaches the workflow first. One action takes effect, the API's (its claim
// came first), and the dead letter row agrees with how the event ended.
func TestAWebUISignalRacingAnAPICallActsOnce(t *testing.T) {
	t.Parallel()
	slow := &slowSignal{delay: 3 * time.Second}
	b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second, interceptors: []interceptor.ClientInterceptor{slow.hook()}}, 1)
	for _, c := range []struct {
		name, api, ui string
		want          contract.State
		row           string
	}{
		{"api-replay-ui-skip", "replay", contract.SignalSkip, contract.StateDelivered, store.DeadLetterReplayed},
		{"api-skip-ui-replay", "skip", contract.SignalReplay, contract.StateSkipped, store.DeadLetterSkipped},
	} {
		healed.Store(false)
		corr := b.id(c.name)
		id := corr + "-1"
		b.postSequence(corr, ep.ID, 1, 2)
		b.waitState(id, contract.StateDeadLettered, 30*time.Second)
		healed.Store(true)

		slow.name.Store(c.api)
		answered := make(chan int, 1)
		go func() { answered <- b.call(http.MethodPost, "/v1/dead-letters/"+id+"/"+c.api, nil, nil) }()
		waitFor(t, 10*time.Second, "the API claims the dead letter", func() bool { return b.deadLetter(id).Status == c.row })
		// The Web UI's signal goes through an unslowed name.
		require.NoError(t, b.client.SignalWorkflow(context.Background(), wf(id), "", c.ui, map[string]any{}))
		require.Equal(t, http.StatusAccepted, <-answered, c.name)
		slow.name.Store("")

		b.waitState(corr+"-2", contract.StateDelivered, 30*time.Second)
		require.Equal(t, c.want, b.eventState(id).State, c.name)
		require.Equal(t, c.row, b.deadLetter(id).Status, c.name)
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[b.id("api-replay-ui-skip")])
	require.Equal(t, []int64{2}, applied[b.id("api-skip-ui-replay")])
}

// TestResetOfADeadLetterWaitsForItsOperator (found by the operator model,
// seed 17): Reset is pressed on a dead-lettered event's workflow, back to
// its first task (its delivery), after the receiver healed and while the
// operator skips it. The reset run sends nothing before a replay: it waits
// on the dead letter again, and the skip acts.
func TestResetOfADeadLetterWaitsForItsOperator(t *testing.T) {
	t.Parallel()
	b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second}, 1)
	corr, id := b.deadLetteredHead("reset-dead-letter", ep.ID, 2)
	healed.Store(true)

	b.resetToFirstTask(id)
	b.waitWorkflowOnDeadLetter(id, 1, "the reset run waits on dead letter 1")
	require.Equal(t, 1, rcv.requestsFor(id), "the reset run sends nothing before a replay")
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/skip", map[string]any{"note": "bad data"}, nil))
	b.waitState(corr+"-2", contract.StateDelivered, 30*time.Second)
	require.Equal(t, contract.StateSkipped, b.eventState(id).State)
	require.Equal(t, store.DeadLetterSkipped, b.deadLetter(id).Status)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2}, applied[corr])
}

// TestResetToAnEarlierDeadLetterTakesTheLedgersGeneration (found by the
// operator model, seed 1064): 1 is dead-lettered, replayed and
// dead-lettered again (generation 2); Reset takes its workflow back to when
// it waited on dead letter 1, and the API's replay of 1 is reapplied. The
// ledger decides: the stale replay takes no effect, the workflow waits on
// dead letter 2, and the operator's skip of 2 acts.
func TestResetToAnEarlierDeadLetterTakesTheLedgersGeneration(t *testing.T) {
	t.Parallel()
	b, rcv, ep, _ := setupRejecting(t, options{window: 3 * time.Second}, 1)
	corr, id := b.deadLetteredHead("reset-generation", ep.ID, 2)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	waitFor(t, 30*time.Second, "dead letter 2", func() bool {
		d := b.deadLetter(id)
		return d.Generation == 2 && d.Status == store.DeadLetterOpen
	})

	b.resetToTask(id, 2) // waiting on dead letter 1; the replay's signal is reapplied
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/skip", nil, nil))
	b.waitState(corr+"-2", contract.StateDelivered, 30*time.Second)
	require.Equal(t, contract.StateSkipped, b.eventState(id).State)
	d := b.deadLetter(id)
	require.Equal(t, store.DeadLetterSkipped, d.Status)
	require.EqualValues(t, 2, d.Generation)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2}, applied[corr])
	require.Equal(t, 2, rcv.requestsFor(id), "the stale replay sent nothing")
}

// TestALostClaimOfAStaleWorkflowIsCarriedOut (found by the operator model,
// seed 73): a skip of dead letter 2 was claimed but its signal never
// reached the workflow, which a Reset (signals left out) took back to
// waiting on dead letter 1. The repair sweep sends the claimed skip again,
// and the stale workflow takes it: the operator was answered 202, so the
// skip happens, once, without a second click.
func TestALostClaimOfAStaleWorkflowIsCarriedOut(t *testing.T) {
	t.Parallel()
	b, rcv, ep, _ := setupRejecting(t, options{window: 3 * time.Second, repairAfter: 2 * time.Second}, 1)
	corr, id := b.deadLetteredHead("stale-claim", ep.ID, 2)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	waitFor(t, 30*time.Second, "dead letter 2", func() bool {
		d := b.deadLetter(id)
		return d.Generation == 2 && d.Status == store.DeadLetterOpen
	})
	b.resetToTask(id, 2, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE)
	ok, err := b.store.DeadLetterMarkSkipped(context.Background(), id, ep.ID, 2, "lost-signal", "bad data")
	require.NoError(t, err)
	require.True(t, ok, "a skip claimed as the API claims one, its signal lost")

	b.waitState(corr+"-2", contract.StateDelivered, 60*time.Second)
	require.Equal(t, contract.StateSkipped, b.eventState(id).State)
	d := b.deadLetter(id)
	require.Equal(t, store.DeadLetterSkipped, d.Status)
	require.EqualValues(t, 2, d.Generation)
	require.Equal(t, "lost-signal", *d.SkippedBy, "the claim stands as it was made")
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2}, applied[corr])
}

// TestAClaimWhoseWorkflowEndedIsCarriedOut (found by the operator model,
// seeds 1002 and 1131): an operator's replay is claimed and answered 202,
// and Terminate is pressed on the event's workflow before it acts. The
// workflow started again (by the repair sweep, or by a release when its
// sequencer resyncs) carries the claimed replay out: the operator does not
// have to click again, and the row keeps who replayed it. (Undoing the
// claim instead raced the next claim of the same row: a release that
// compared a stale run ID reopened a replay its running workflow had just
// carried out, and the row said open for a delivered event.)
func TestAClaimWhoseWorkflowEndedIsCarriedOut(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"sweep", "release"} {
		t.Run(path, func(t *testing.T) {
			b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second, repairAfter: 2 * time.Second}, 1)
			corr, id := b.deadLetteredHead("claim-ended-"+path, ep.ID, 2)
			b.terminate(id)
			healed.Store(true)
			ok, err := b.store.DeadLetterMarkReplayed(context.Background(), id, ep.ID, 1, "ops-alice")
			require.NoError(t, err)
			require.True(t, ok, "a replay claimed as the API claims one, its workflow gone")
			if path == "release" {
				st, err := starter.New(starter.Config{TaskQueue: b.cfg.TaskQueue, RecoveryWindow: b.cfg.RecoveryWindow, DeliveryTimeout: b.cfg.DeliveryTimeout}, b.store, b.client, b.logger)
				require.NoError(t, err)
				require.NoError(t, st.Resync(context.Background(), store.DefaultTenant, corr))
			}

			b.waitState(corr+"-2", contract.StateDelivered, 60*time.Second)
			require.Equal(t, contract.StateDelivered, b.eventState(id).State)
			d := b.deadLetter(id)
			require.Equal(t, store.DeadLetterReplayed, d.Status)
			require.EqualValues(t, 1, d.Generation)
			require.Equal(t, "ops-alice", *d.ReplayedBy)
			require.EqualValues(t, 1, d.ReplayCount)
			applied, violations := rcv.snapshot()
			require.Empty(t, violations)
			require.Equal(t, []int64{1, 2}, applied[corr])
			require.Equal(t, 2, rcv.requestsFor(id), "one rejected attempt, one replay")
		})
	}
}

// TestAReplayResetAwayIsSentAgain (found by the operator model, seed
// 1143): 1 is dead-lettered and replayed; while the replay's attempts are
// retried (the ledger has the delivery delivering), Reset is pressed on the
// workflow back to when it waited on the dead letter, signals left out.
// The ledger says delivering, the row replayed, the workflow waits on dead
// letter 1 for a replay that was carried out and wiped: the repair sweep
// sends the claimed replay again, and the correlation goes on.
func TestAReplayResetAwayIsSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: time.Minute, repairAfter: 2 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var mode atomic.Value
	mode.Store("400")
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if ev.Sequence == 1 {
			return mode.Load().(string)
		}
		return ""
	}
	corr, id := b.deadLetteredHead("replay-reset-away", ep.ID, 2)
	mode.Store("503")
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	waitFor(t, 30*time.Second, "the replay's attempts are retried", func() bool {
		return rcv.requestsFor(id) >= 2 && b.eventState(id).State == contract.StateDelivering
	})
	b.resetToTask(id, 2, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE)
	b.waitWorkflowOnDeadLetter(id, 1, "the reset run waits on dead letter 1")
	mode.Store("")

	b.waitState(corr+"-2", contract.StateDelivered, 60*time.Second)
	require.Equal(t, contract.StateDelivered, b.eventState(id).State)
	d := b.deadLetter(id)
	require.Equal(t, store.DeadLetterReplayed, d.Status)
	require.EqualValues(t, 1, d.Generation)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
}

// TestAResetToBeforeAReleaseIsReleasedIntoItsDeadLetter (found by the
// operator model, seed 1557): 2 goes to two endpoints; its lane to the
// healthy one is released when it arrives, its lane to the failing one later
// (by signal, once 1's dead letter there is skipped), and 2 is dead-lettered
// there. Reset takes 2's workflow back to its first task, signals left out:
// that lane waits for a release again, which its sequencer has made and
// will not repeat by itself, while the ledger has the delivery dead-lettered.
// The operator's replay (answered 202) must still be carried out: the
// repair sweep releases the lane again, and it finds the replay claimed.
func TestAResetToBeforeAReleaseIsReleasedIntoItsDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 3 * time.Second, repairAfter: 2 * time.Second})
	healthy := b.subscribe("order.*")
	failing := b.subscribe("order.*")
	var healed atomic.Bool
	failing.rcv.fault = func(ev contract.Envelope, _ int) string {
		if ev.Sequence <= 2 && !healed.Load() {
			return "400"
		}
		return ""
	}
	corr := b.id("reset-before-release")
	id := corr + "-2"
	b.publish(corr+"-1", corr, 1, "order.updated")
	b.waitDelivery(corr+"-1", failing.ID, contract.StateDeadLettered, 30*time.Second)
	b.publish(id, corr, 2, "order.updated")
	b.waitDelivery(id, healthy.ID, contract.StateDelivered, 30*time.Second)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+corr+"-1/skip", map[string]any{"endpoint_id": failing.ID}, nil))
	b.waitDelivery(id, failing.ID, contract.StateDeadLettered, 30*time.Second)

	b.resetToTask(id, 1, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE)
	waitFor(t, 30*time.Second, "the reset run's lane waits for its release", func() bool {
		v, err := b.client.QueryWorkflow(context.Background(), wf(id), "", contract.QueryState)
		if err != nil {
			return false
		}
		var es contract.EventStatus
		if v.Get(&es) != nil {
			return false
		}
		l, ok := es.Lane(failing.ID)
		return ok && l.State == contract.StateWaiting
	})
	healed.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", map[string]any{"endpoint_id": failing.ID}, nil))

	b.waitDelivery(id, failing.ID, contract.StateDelivered, 60*time.Second)
	b.publish(corr+"-3", corr, 3, "order.updated")
	b.waitDelivery(corr+"-3", failing.ID, contract.StateDelivered, 30*time.Second)
	b.waitDelivery(corr+"-3", healthy.ID, contract.StateDelivered, 30*time.Second)
	d, ok := b.fanned(id).delivery(failing.ID)
	require.True(t, ok)
	require.Equal(t, store.DeadLetterReplayed, d.DeadLetter.Status)
	require.Equal(t, []int64{2, 3}, failing.rcv.appliedTo(corr))
	require.Equal(t, []int64{1, 2, 3}, healthy.rcv.appliedTo(corr))
	require.Equal(t, 2, failing.rcv.requestsFor(id), "one rejected attempt, one replay")
	failing.rcv.requireClean(t)
	healthy.rcv.requireClean(t)
}

// heldActivity holds back, on the workers of the client it is installed on,
// the first run of one activity type once armed: it reports the run on
// started and waits for release to be closed. With afterRun it holds the
// run once it has run, before its result goes back: a local activity then
// keeps its workflow task open, so the updates sent meanwhile wait for the
// next task, together.
type heldActivity struct {
	interceptor.ClientInterceptorBase
	interceptor.WorkerInterceptorBase
	name     string
	afterRun bool
	armed    atomic.Bool
	started  chan struct{}
	release  chan struct{}
	holdOnce sync.Once
}

func (h *heldActivity) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &heldActivityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, h: h}
}

type heldActivityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	h *heldActivity
}

func (a *heldActivityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if !a.h.afterRun {
		if err := a.hold(ctx); err != nil {
			return nil, err
		}
		return a.Next.ExecuteActivity(ctx, in)
	}
	res, err := a.Next.ExecuteActivity(ctx, in)
	if herr := a.hold(ctx); herr != nil {
		return nil, herr
	}
	return res, err
}

// hold waits for release on the first run of the armed activity type.
func (a *heldActivityInbound) hold(ctx context.Context) error {
	if activity.GetInfo(ctx).ActivityType.Name != a.h.name || !a.h.armed.Load() {
		return nil
	}
	held := false
	a.h.holdOnce.Do(func() { held = true })
	if !held {
		return nil
	}
	close(a.h.started)
	select {
	case <-a.h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestADisablingsDeadLetterWrittenAfterEnablingIsDelivered: an attempt
// finds its endpoint disabled, and the operator enables it again before the
// delivery's dead letter is written (its write held back here). The
// enabling's replay of the disabling's dead letters finds none; the dead
// letter, written while the endpoint is enabled, is claimed for replay in
// its own transaction, and the repair sweep carries the claim out: the
// event is delivered, and its lane goes on, without an operator.
func TestADisablingsDeadLetterWrittenAfterEnablingIsDelivered(t *testing.T) {
	t.Parallel()
	hold := &heldActivity{name: contract.ActivityWriteDeadLetter, started: make(chan struct{}), release: make(chan struct{})}
	b := setup(t, options{window: time.Minute, repairAfter: 2 * time.Second, interceptors: []interceptor.ClientInterceptor{hold}})
	rcv := newLedgerReceiver(t)
	var o outage
	o.down.Store(true)
	rcv.fault = o.fault
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	corr := b.id("enabled-before-dead-letter")
	id := corr + "-1"
	b.postSequence(corr, ep.ID, 1, 2)
	waitFor(t, 30*time.Second, "1 retried", func() bool { return rcv.requestsFor(id) >= 2 })

	hold.armed.Store(true)
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"disabled": true}, nil))
	select {
	case <-hold.started:
	case <-time.After(60 * time.Second):
		t.Fatal("no dead letter was written for the disabled endpoint")
	}
	o.down.Store(false)
	var enabled struct {
		Resumed int `json:"resumed_dead_letters"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"disabled": false}, &enabled))
	require.Zero(t, enabled.Resumed, "the dead letter is not written yet")
	close(hold.release)

	b.waitState(corr+"-2", contract.StateDelivered, 60*time.Second)
	require.Equal(t, contract.StateDelivered, b.eventState(id).State)
	d := b.deadLetter(id)
	require.Contains(t, d.Reason, contract.EndpointDisabledPrefix)
	require.Equal(t, store.DeadLetterReplayed, d.Status)
	require.Equal(t, contract.EndpointEnabledBy, *d.ReplayedBy)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
}
