package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// requestCancellation presses Request Cancellation on the event's workflow,
// as the Web UI does, and waits until a workflow task of the run has taken
// the request (completed, or failed as a run that cannot take it does).
func (b *bundle) requestCancellation(id string) {
	b.t.Helper()
	ctx := context.Background()
	require.NoError(b.t, b.client.CancelWorkflow(ctx, wf(id), ""))
	waitFor(b.t, 30*time.Second, "a workflow task of "+id+" after its cancellation request", func() bool {
		requested := false
		it := b.client.GetWorkflowHistory(ctx, wf(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(b.t, err)
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
				requested = true
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				if requested {
					return true
				}
			}
		}
		return false
	})
}

// workflowStatus is the status of the event's workflow's latest run.
func (b *bundle) workflowStatus(id string) enumspb.WorkflowExecutionStatus {
	b.t.Helper()
	d, err := b.client.DescribeWorkflowExecution(context.Background(), wf(id), "")
	require.NoError(b.t, err)
	return d.GetWorkflowExecutionInfo().GetStatus()
}

// TestRequestCancellationStrandsNoLane presses Request Cancellation (through
// the Temporal client, as the Web UI does) on an event's workflow in each
// state a lane can be in, and checks that no lane is stranded:
//   - held: 2 arrives before 1 and is cancelled while it waits for its
//     release; then 1 and 3 are posted: the receiver applies 1, 2, 3;
//   - delivering: 1 is refused with 503 and cancelled between its retries;
//     the receiver heals: it applies 1, then 2;
//   - dead-lettered: 2 is refused for good (400), cancelled on its dead
//     letter, then replayed through the API: the receiver applies 1, 2, 3.
//
// Each cancelled run goes on and completes; none ends cancelled.
func TestRequestCancellationStrandsNoLane(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	held, delivering, dead := b.id("cancel-held"), b.id("cancel-delivering"), b.id("cancel-dead")
	var healed atomic.Bool
	rcv.fault = func(ev contract.Envelope, _ int) string {
		switch {
		case healed.Load():
			return ""
		case ev.CorrelationID == delivering && ev.Sequence == 1:
			return "503"
		case ev.CorrelationID == dead && ev.Sequence == 2:
			return "400"
		}
		return ""
	}
	id := func(corr string, seq int64) string { return fmt.Sprintf("%s-%d", corr, seq) }
	post := func(corr string, seq int64) {
		t.Helper()
		code, _ := b.postEvent(id(corr, seq), corr, seq, ep.ID, map[string]any{"amount": seq})
		require.Equal(t, http.StatusAccepted, code)
	}

	post(held, 2)
	post(delivering, 1)
	post(delivering, 2)
	for s := int64(1); s <= 3; s++ {
		post(dead, s)
	}
	b.waitState(id(delivering, 1), contract.StateDelivering, 30*time.Second)
	b.waitState(id(dead, 2), contract.StateDeadLettered, 30*time.Second)
	require.Equal(t, contract.StateWaiting, b.eventState(id(held, 2)).State)

	b.requestCancellation(id(held, 2))
	b.requestCancellation(id(delivering, 1))
	b.requestCancellation(id(dead, 2))

	post(held, 1)
	post(held, 3)
	healed.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id(dead, 2)+"/replay", nil, nil))

	want := map[string][]int64{held: {1, 2, 3}, delivering: {1, 2}, dead: {1, 2, 3}}
	for corr, seqs := range want {
		for _, s := range seqs {
			b.waitState(id(corr, s), contract.StateDelivered, 90*time.Second)
		}
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	for corr, seqs := range want {
		require.Equal(t, seqs, applied[corr], corr)
	}
	for _, cancelled := range []string{id(held, 2), id(delivering, 1), id(dead, 2)} {
		waitFor(t, 30*time.Second, cancelled+"'s workflow completes", func() bool {
			return b.workflowStatus(cancelled) == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
		})
	}
	for corr := range want {
		waitFor(t, 30*time.Second, "the sequencer is through "+corr, func() bool {
			return b.sequencerState(corr).Next == int64(len(want[corr])+1)
		})
	}
}

// resetToDeadLetterWrite presses Reset on the event's workflow back to the
// workflow task that scheduled its (first) dead letter write: the new run
// makes that write again, under its own run ID.
func (b *bundle) resetToDeadLetterWrite(id string) {
	b.t.Helper()
	tasks, n := 0, 0
	it := b.client.GetWorkflowHistory(context.Background(), wf(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && n == 0 {
		ev, err := it.Next()
		require.NoError(b.t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.ActivityWriteDeadLetter {
				n = tasks
			}
		}
	}
	require.NotZero(b.t, n, "%s wrote a dead letter", id)
	b.resetToTask(id, n)
}

// TestResetKeepsTheSkipTheAPIAccepted: 1 is dead-lettered and skipped
// through the API (202); before its workflow has carried the skip out (its
// Skip activity held back here), an operator presses Reset back to the
// workflow task that wrote the dead letter. The new run writes that dead
// letter again under its own run ID: it takes the ledger's dead letter and
// the skip claimed on it, so 1 ends skipped, its dead letter stays the one
// skipped (no second generation opened), and 2 is delivered.
func TestResetKeepsTheSkipTheAPIAccepted(t *testing.T) {
	t.Parallel()
	hold := &heldActivity{name: contract.ActivitySkip, started: make(chan struct{}), release: make(chan struct{})}
	hold.armed.Store(true)
	b := setup(t, options{window: 3 * time.Second, interceptors: []interceptor.ClientInterceptor{hold}})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	corr := b.id("reset-skip")
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if ev.Sequence == 1 {
			return "503"
		}
		return ""
	}
	id := corr + "-1"
	for s := int64(1); s <= 2; s++ {
		code, _ := b.postEvent(fmt.Sprintf("%s-%d", corr, s), corr, s, ep.ID, map[string]any{"amount": s})
		require.Equal(t, http.StatusAccepted, code)
	}
	b.waitState(id, contract.StateDeadLettered, 60*time.Second)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/skip", map[string]any{"note": "superseded"}, nil))
	select {
	case <-hold.started:
	case <-time.After(60 * time.Second):
		t.Fatal("the workflow did not take the skip")
	}
	// The skip held stays held: the reset ended its run, and letting it go
	// now would end the delivery skipped in the ledger before the new run
	// writes its dead letter again, which is not what is tested.
	t.Cleanup(func() { close(hold.release) })
	b.resetToDeadLetterWrite(id)

	b.waitState(corr+"-2", contract.StateDelivered, 60*time.Second)
	require.Equal(t, contract.StateSkipped, b.eventState(id).State)
	dl := b.deadLetter(id)
	require.EqualValues(t, 1, dl.Generation, "no second dead letter over the skipped one")
	require.Equal(t, store.DeadLetterSkipped, dl.Status)
	require.Equal(t, "superseded", *dl.SkipNote)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2}, applied[corr])
}
