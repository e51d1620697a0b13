package bench

import (
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// changeVersionAttribute is the search attribute workflow.GetVersion
// upserts; Temporal Cloud does not bill its upserts.
const changeVersionAttribute = "TemporalChangeVersion"

// actions counts the Temporal Cloud actions one run's history shows, so that
// a design's bill can be read beside its history length. The rules are
// Temporal Cloud's published ones, "Temporal Cloud Actions"
// (https://docs.temporal.io/cloud/actions, source
// temporalio/documentation docs/evaluate/cloud/actions.mdx), read against the
// server's own estimate of them, the "action" metric of
// TelemetryInterceptor.emitActionMetric (go.temporal.io/server v1.32.1,
// common/rpc/interceptor/telemetry.go), which
// https://docs.temporal.io/cloud/migrate/estimate-actions names as the one
// that follows Cloud pricing. By history event:
//
//   - WorkflowExecutionStarted: 1 (a client start, an update-with-start's
//     start, each continue-as-new run: the docs bill the new run's start, not
//     the ContinuedAsNew event, so the caller reads every run). Not for a
//     child, whose two actions are its parent's (below).
//   - WorkflowExecutionSignaled: 1, from a client or a workflow. The docs
//     bill a signal from a workflow in the signalled history, so
//     SignalExternalWorkflowExecutionInitiated counts 0 here and reading
//     both sides does not count it twice. Signal-with-start is one action
//     in all whether or not it starts the run (the docs' prose and the
//     server's metric; the docs' table lists both events for a start): when
//     its signal was written with the start, the pair counts 1.
//   - WorkflowExecutionUpdateAccepted: 1 per update (update-with-start's
//     update too, on top of its start). Rejected updates are billed but
//     never written to history: not counted.
//   - ActivityTaskScheduled: 1; its ActivityTaskStarted adds attempt − 1
//     retries (intermediate attempts leave no event). An activity still
//     retrying when the history was read has no Started event yet: its
//     retries so far are missed.
//   - Markers: one action per workflow task that recorded any (the server
//     bills RecordMarker commands as one batch per task: local activities,
//     side effects, versions alike). A marker belongs to the task whose
//     WorkflowTaskCompleted precedes it. Local activity retries add
//     WorkflowTaskCompleted.metering_metadata.nonfirst_local_activity_execution_attempts.
//     Workflow task heartbeats (a local activity outliving the task
//     timeout) are billed but not visible as such: not counted; hookflow's
//     local attempts are shorter than its task timeout.
//   - TimerStarted: 1. UpsertWorkflowSearchAttributes: 1, unless it only
//     sets TemporalChangeVersion (exempt). WorkflowExecutionOptionsUpdated:
//     1. StartChildWorkflowExecutionInitiated: 2 (the intent and the start,
//     as the docs and the server count it). NexusOperationScheduled and
//     NexusOperationCancelRequested: 1.
//   - A reset: its WorkflowTaskFailed (cause ResetWorkflow) is 1; the
//     events before it, and the signals re-applied in the same write, are
//     copies of the base run's and were billed there.
//
// Not in history, so never counted: queries (the API's state query, the
// sweep's), activity heartbeats, schedules, rejected updates, de-duplicated
// starts. RequestCancelExternalWorkflowExecution and
// WorkflowExecutionCancelRequested are not in the docs' list: 0.
func actions(evs []*historypb.HistoryEvent) int {
	n := 0
	taskHasMarker := false
	var reset *historypb.HistoryEvent
	for i, e := range evs {
		if reset != nil && sameWrite(reset, e) {
			continue
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if e.GetWorkflowExecutionStartedEventAttributes().GetParentWorkflowExecution() == nil {
				n++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if i == 1 && sameWrite(evs[0], e) {
				continue // signal-with-start that started the run: counted with the start
			}
			n++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED,
			enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED,
			enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			n++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			n += max(int(e.GetActivityTaskStartedEventAttributes().GetAttempt())-1, 0)
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			n += 2
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, ok := fields[changeVersionAttribute]; !ok || len(fields) > 1 {
				n++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			taskHasMarker = false
			a := e.GetWorkflowTaskCompletedEventAttributes()
			n += int(a.GetMeteringMetadata().GetNonfirstLocalActivityExecutionAttempts())
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if !taskHasMarker {
				taskHasMarker = true
				n++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			if e.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
				n, reset = 1, e
			}
		}
	}
	return n
}

// sameWrite tells whether b was written in the same history transaction as
// a (b after a): the server numbers one write's events with consecutive task
// IDs (historybuilder's assignTaskIDs), and anything in between, another
// write's events or its transfer and timer tasks, takes IDs of its own.
func sameWrite(a, b *historypb.HistoryEvent) bool {
	d := b.GetEventId() - a.GetEventId()
	return d > 0 && b.GetTaskId()-a.GetTaskId() == d
}
