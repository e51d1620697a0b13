package e2e

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/contract"
)

// TestSweepReleasesAHeadThatLostItsRelease: the next event of a correlation
// is delivering (the ledger says so), and then an operator's buttons leave
// its workflow running but waiting for a release that nobody will send:
//
//   - the sequencer is reset to its first task (it forgets it released 2),
//     then 2's workflow is terminated: the sweep starts it again, the
//     sequencer parks its arrival, and it starts held, its first task put
//     off for HeldStartDelay;
//   - an event whose workflow had started waiting before its release came
//     is reset to that first task without its signals: it waits for the
//     release again.
//
// The API's sweep finds both (the ledger says delivering, the workflow
// waits) and has the sequencer release them again; each is delivered once,
// in order, long before the start delay would have ended.
func TestSweepReleasesAHeadThatLostItsRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, options{repairAfter: 2 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	seqReset, evReset := b.id("lost-seq"), b.id("lost-ev")
	var healed, firstHealed atomic.Bool
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if (ev.Sequence == 2 && !healed.Load()) || (ev.CorrelationID == seqReset && ev.Sequence == 1 && !firstHealed.Load()) {
			return "503"
		}
		return ""
	}
	ctx := context.Background()

	// The sequencer's reset, then the head's Terminate. Each of the
	// sequencer's steps is a task of its own: 1 released on its arrival,
	// 2 parked, 1 finished and 2 released.
	code, _ := b.postEvent(corrID(seqReset, 1), seqReset, 1, ep.ID, map[string]any{"amount": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(corrID(seqReset, 1), contract.StateDelivering, 30*time.Second)
	code, _ = b.postEvent(corrID(seqReset, 2), seqReset, 2, ep.ID, map[string]any{"amount": 2})
	require.Equal(t, http.StatusAccepted, code)
	waitFor(t, 30*time.Second, "2 parked", func() bool { return parked(b.sequencerState(seqReset)) == 1 })
	firstHealed.Store(true)
	b.waitState(corrID(seqReset, 1), contract.StateDelivered, 30*time.Second)
	b.waitState(corrID(seqReset, 2), contract.StateDelivering, 30*time.Second)
	// Back to its second task (the first ran the ledger's load and released
	// 1): left out of the new run, the updates since (arrive 2, finished 1)
	// are lost, and it has 1 released again and nothing parked.
	b.resetToTask(contract.SequencerID(contract.DefaultTenant, seqReset), 2, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE)
	waitFor(t, 30*time.Second, "the reset sequencer is back after its first task", func() bool {
		st := b.sequencerState(seqReset)
		return st.Next == 1 && released(st) == 1 && parked(st) == 0
	})
	b.terminate(corrID(seqReset, 2))

	// An event that waited in its own first task (its start delay ran out
	// before 1 was there: started here without one), released, then reset
	// to before its release without its signals.
	second := corrID(evReset, 2)
	code, _ = b.postEvent(second, evReset, 2, ep.ID, map[string]any{"amount": 2})
	require.Equal(t, http.StatusAccepted, code)
	strt, err := app.NewStarter(b.cfg, b.store, b.client, b.logger)
	require.NoError(t, err)
	ev, err := b.store.EventGet(ctx, second)
	require.NoError(t, err)
	b.terminate(second)
	_, err = b.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wf(second), TaskQueue: b.cfg.TaskQueue}, contract.EventWorkflow, strt.Input(ev))
	require.NoError(t, err)
	waitFor(t, 30*time.Second, second+" waits in its first task", func() bool {
		v, err := b.client.QueryWorkflow(ctx, wf(second), "", contract.QueryState)
		var st contract.EventStatus
		return err == nil && v.Get(&st) == nil && st.State == contract.StateWaiting
	})
	code, _ = b.postEvent(corrID(evReset, 1), evReset, 1, ep.ID, map[string]any{"amount": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(second, contract.StateDelivering, 30*time.Second)
	b.resetToTask(second, 1, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL)

	healed.Store(true)
	for _, corr := range []string{seqReset, evReset} {
		b.waitState(corrID(corr, 2), contract.StateDelivered, 60*time.Second)
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	for _, corr := range []string{seqReset, evReset} {
		require.Equal(t, []int64{1, 2}, applied[corr], corr)
		waitFor(t, 30*time.Second, "the sequencer is through "+corr, func() bool { return b.sequencerState(corr).Next == 3 })
	}
}
