package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// hist builds a history from events, numbering them 1, 2, … and giving each
// its own write (task IDs 10 apart) unless it is marked with sameWriteAs.
type hist struct{ evs []*historypb.HistoryEvent }

func (h *hist) add(t enumspb.EventType, set func(*historypb.HistoryEvent)) *hist {
	id := int64(len(h.evs) + 1)
	e := &historypb.HistoryEvent{EventId: id, TaskId: 1000 + 10*id, EventType: t}
	if set != nil {
		set(e)
	}
	h.evs = append(h.evs, e)
	return h
}

// withPrevious writes the event in the same transaction as the one before.
func (h *hist) withPrevious() *hist {
	n := len(h.evs)
	h.evs[n-1].TaskId = h.evs[n-2].TaskId + 1
	return h
}

func (h *hist) task() *hist {
	return h.add(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil).
		add(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil).
		add(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil)
}

func (h *hist) marker() *hist {
	return h.add(enumspb.EVENT_TYPE_MARKER_RECORDED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: localActivityMarker}}
	})
}

func (h *hist) started() *hist {
	return h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
}

func (h *hist) signaled() *hist {
	return h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil)
}

func (h *hist) activity(attempt int32) *hist {
	return h.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, nil).
		add(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
				ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: attempt}}
		}).
		add(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, nil)
}

func (h *hist) upsert(keys ...string) *hist {
	return h.add(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, func(e *historypb.HistoryEvent) {
		fields := map[string]*commonpb.Payload{}
		for _, k := range keys {
			fields[k] = &commonpb.Payload{}
		}
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}
	})
}

func (h *hist) completed() *hist {
	return h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
}

func TestActions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    *hist
		want int
	}{
		// The bare baseline: start + one activity.
		{"baseline", new(hist).started().task().activity(1).task().completed(), 2},
		// The fast baseline: start + one local activity.
		{"baseline-fast", new(hist).started().task().marker().completed(), 2},
		// An activity's retries leave one Started event, with the last attempt.
		{"activity retried twice", new(hist).started().task().activity(3).task().completed(), 4},
		// Two local activities in one task are one action; in the next task, another.
		{"local activities by task", new(hist).started().task().marker().marker().upsert("DeliveryState").task().marker().completed(), 4},
		{"timer", new(hist).started().task().add(enumspb.EVENT_TYPE_TIMER_STARTED, nil).
			add(enumspb.EVENT_TYPE_TIMER_FIRED, nil).task().completed(), 2},
		// Signal-with-start that started the run: one action for the pair.
		{"signal-with-start", new(hist).started().signaled().withPrevious().task().completed(), 1},
		// Started (with a start delay), signalled later by another request: two.
		{"start then signal", new(hist).started().signaled().task().completed(), 2},
		{"signals", new(hist).started().task().signaled().signaled().task().completed(), 3},
		// Update-with-start: the start and the update.
		{"update-with-start", new(hist).started().task().
			add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, nil).
			add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, nil), 2},
		// The signaller's side of a signal is billed in the signalled history.
		{"signal external", new(hist).started().task().
			add(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, nil).
			add(enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED, nil).task().completed(), 1},
		{"child", new(hist).started().task().
			add(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, nil).
			add(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, nil), 3},
		// A child's own start is its parent's to count.
		{"child's history", new(hist).add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
				WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
					ParentWorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "parent"}}}
		}).task().completed(), 0},
		// GetVersion's own upsert is exempt; an upsert that also sets another key is not.
		{"change version", new(hist).started().task().upsert(changeVersionAttribute).upsert(changeVersionAttribute, "DeliveryState"), 2},
		// Continue-as-new is billed as the next run's start.
		{"continue-as-new", new(hist).started().task().add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, nil), 1},
		{"local activity retries", new(hist).started().task().marker().add(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil).
			add(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil).
			add(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
				e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
					WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
						MeteringMetadata: &commonpb.MeteringMetadata{NonfirstLocalActivityExecutionAttempts: 2}}}
			}).marker(), 5},
		// A reset run: what precedes the reset, and the signal it re-applied,
		// were billed on the base run.
		{"reset", new(hist).started().add(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil).
			add(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil).
			add(enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, func(e *historypb.HistoryEvent) {
				e.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
					WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
						Cause: enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW}}
			}).signaled().withPrevious().task().marker().completed(), 2},
	} {
		require.Equal(t, tc.want, actions(tc.h.evs), tc.name)
	}
	require.Zero(t, actions(nil))
}

// TestActionsRecordedHistories counts the recorded histories of
// workflows/testdata, worked out by hand from their events.
func TestActionsRecordedHistories(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]int{
		// started (eager), Deliver as a local activity (marker), the
		// DeliveryState upsert.
		"event_released_at_start": 3,
		// started with a start delay by the API, then released by its
		// predecessor's signal-with-start in another request: the start,
		// the signal, the marker, the upsert.
		"event_held_then_released": 4,
		// started again by its predecessor's signal-with-start: the start
		// and its signal are one action; the marker, the upsert.
		"event_restarted_at_its_release": 3,
		// start 1; local attempt (marker) 1; backoff timer 1; the regular
		// Deliver, which ran twice (attempt 2) 2; timer 1; the write-dead-
		// letter activity 1; upsert 1; skip signal 1; the skip activity 1;
		// upsert 1.
		"event_retried_deadletter_skip": 11,
		// the reset 1 (start and first task were the base run's, the skip
		// signal re-applied in the reset's write too); the task that ran
		// two local activities 1; upsert 1.
		"event_reset_after_skip": 3,
		// start (update-with-start) 1; four accepted updates (2 arrive, 2
		// finished) 4; the ledger load, a local activity 1; the idle timer 1.
		"sequencer_held_then_next": 7,
	} {
		f, err := os.Open(filepath.Join("..", "..", "workflows", "testdata", name+"_history.json"))
		require.NoError(t, err)
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		require.NoError(t, f.Close())
		require.NoError(t, err, name)
		require.Equal(t, want, actions(h.GetEvents()), name)
	}
}
