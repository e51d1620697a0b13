package bench

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/internal/contract"
)

// history returns every event of one run ("" = the latest).
func history(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

func byType(evs []*historypb.HistoryEvent) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.GetEventType().String()]++
	}
	return m
}

// runsOf lists every run of a workflow ID that visibility knows,
// continued-as-new ones included.
func runsOf(ctx context.Context, c client.Client, id string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var runs []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, PageSize: 100, NextPageToken: token,
			Query: fmt.Sprintf("WorkflowId = '%s'", id),
		})
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", id, err)
		}
		runs = append(runs, resp.GetExecutions()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return runs, nil
		}
	}
}

// sequencerHistory sums up every run of a correlation's sequencer.
type sequencerHistory struct {
	runs           int
	continuedAsNew int
	maxLength      int
	total          int
	// actions are Temporal Cloud's, over every run (see actions).
	actions int
	byType  map[string]int
	// updates are its update-accepted events, which the idle timelines
	// read; kept only when asked for.
	updates []*historypb.HistoryEvent
	// missed counts runs that visibility did not list but the chain of
	// continue-as-new led to (each run's start names the run before it, its
	// continue-as-new the run after it).
	missed int
}

// loadSequencer reads every run of the sequencer of a tenant's
// correlation: those that visibility lists, the latest, and any run the
// continue-as-new chain of those leads to.
func loadSequencer(ctx context.Context, c client.Client, tenant, corr string, keepUpdates bool) (sequencerHistory, error) {
	id := contract.SequencerID(tenant, corr)
	sh := sequencerHistory{byType: map[string]int{}}
	listed, err := runsOf(ctx, c, id)
	if err != nil {
		return sh, err
	}
	seen := map[string]bool{}
	var queue []string
	for _, ex := range listed {
		if rid := ex.GetExecution().GetRunId(); !seen[rid] {
			seen[rid] = true
			queue = append(queue, rid)
		}
	}
	follow := func(rid string) {
		if rid != "" && !seen[rid] {
			seen[rid] = true
			queue = append(queue, rid)
			sh.missed++
		}
	}
	if d, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil {
		follow(d.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	}
	for len(queue) > 0 {
		run := queue[0]
		queue = queue[1:]
		evs, err := history(ctx, c, id, run)
		if err != nil {
			return sh, err
		}
		sh.runs++
		sh.total += len(evs)
		sh.actions += actions(evs)
		sh.maxLength = max(sh.maxLength, len(evs))
		for _, e := range evs {
			sh.byType[e.GetEventType().String()]++
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				follow(e.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId())
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				sh.continuedAsNew++
				follow(e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId())
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				if keepUpdates {
					sh.updates = append(sh.updates, e)
				}
			}
		}
	}
	return sh, nil
}

// runLengths sums up a sequencer's runs as read cheaply (visibility, and
// a describe of each run not known to be closed) so that a soak can look
// after every burst.
type runLengths struct {
	runs, continuedAsNew, longest, total int
}

// closedRun is a run that no longer changes: its length, and whether it
// ended by continuing as new.
type closedRun struct {
	length         int
	continuedAsNew bool
}

// sequencerRunLengths reads runLengths of the sequencer of a tenant's
// correlation; closed caches the closed runs between calls.
func sequencerRunLengths(ctx context.Context, c client.Client, tenant, corr string, closed map[string]closedRun) (runLengths, error) {
	id := contract.SequencerID(tenant, corr)
	var rl runLengths
	listed, err := runsOf(ctx, c, id)
	if err != nil {
		return rl, err
	}
	for _, ex := range listed {
		rid := ex.GetExecution().GetRunId()
		run, ok := closed[rid]
		if !ok {
			d, err := c.DescribeWorkflowExecution(ctx, id, rid)
			if err != nil {
				return rl, fmt.Errorf("describe %s run %s: %w", id, rid, err)
			}
			info := d.GetWorkflowExecutionInfo()
			run = closedRun{length: int(info.GetHistoryLength()), continuedAsNew: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW}
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				closed[rid] = run
			}
		}
		if run.continuedAsNew {
			rl.continuedAsNew++
		}
		rl.runs++
		rl.total += run.length
		rl.longest = max(rl.longest, run.length)
	}
	return rl, nil
}

// sample picks up to n IDs spread evenly over ids.
func sample(ids []string, n int) []string {
	if len(ids) <= n {
		return ids
	}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ids[i*len(ids)/n])
	}
	return out
}

// workflowTotals sums up the histories of a set of workflows (the latest
// run of each).
type workflowTotals struct {
	workflows int
	events    int
	actions   int
	// mid is the by-type count of the middle one, the profile's example.
	mid map[string]int
}

// readWorkflows reads the history of every workflow of ids (workflow IDs).
func readWorkflows(ctx context.Context, c client.Client, ids []string) (workflowTotals, error) {
	var t workflowTotals
	for i, id := range ids {
		evs, err := history(ctx, c, id, "")
		if err != nil {
			return t, err
		}
		t.workflows++
		t.events += len(evs)
		t.actions += actions(evs)
		if i == len(ids)/2 {
			t.mid = byType(evs)
		}
	}
	return t, nil
}

// meanHistory is the mean history length of up to 20 workflows sampled from
// ids and the by-type counts of the middle one.
func meanHistory(ctx context.Context, c client.Client, ids []string) (float64, map[string]int, error) {
	t, err := readWorkflows(ctx, c, sample(ids, 20))
	if err != nil || t.workflows == 0 {
		return 0, nil, err
	}
	return float64(t.events) / float64(t.workflows), t.mid, nil
}

// localActivityMarker names the marker a local activity's result is
// recorded in (the SDK's constant is internal).
const localActivityMarker = "LocalActivity"

// step names of the idle timelines.
const (
	stepAccepted         = "api/start call returned (accepted)"
	stepStarted          = "workflow started"
	stepFirstTask        = "first workflow task started"
	stepArrived          = "sequencer: arrive update accepted"
	stepReleased         = "event: release signal recorded"
	stepLocalDeliver     = "Deliver local activity recorded (marker)"
	stepScheduled        = "Deliver scheduled"
	stepActStarted       = "Deliver started (picked up by worker)"
	stepCommitted        = "receiver committed (applied_at)"
	stepActDone          = "Deliver completed"
	stepWorkflowDone     = "workflow completed"
	stepSequencerGotDone = "sequencer: finished update accepted"
)

// hookflow's first attempt is a local activity; a retry is a regular one.
var hookflowSteps = []string{stepAccepted, stepStarted, stepFirstTask, stepArrived, stepReleased,
	stepLocalDeliver, stepScheduled, stepActStarted, stepCommitted, stepActDone, stepWorkflowDone, stepSequencerGotDone}

var baselineSteps = []string{stepAccepted, stepStarted, stepFirstTask, stepScheduled, stepActStarted, stepCommitted,
	stepActDone, stepWorkflowDone}

var baselineFastSteps = []string{stepAccepted, stepStarted, stepFirstTask, stepLocalDeliver, stepCommitted, stepWorkflowDone}

// timeline is the median time, from the moment the producer sent the event,
// at which each step happened, over the idle samples. Every clock is this
// machine's: the bench's, Temporal's event times and Postgres' now().
func timeline(ctx context.Context, c client.Client, name string, samples []idleSample, wf func(string) string, seq *sequencerHistory, steps []string) (Timeline, error) {
	offsets := map[string][]float64{}
	add := func(step string, base, at time.Time) {
		if !at.IsZero() {
			offsets[step] = append(offsets[step], float64(at.Sub(base).Microseconds())/1000)
		}
	}
	for _, s := range samples {
		evs, err := history(ctx, c, wf(s.id), "")
		if err != nil {
			return Timeline{}, err
		}
		add(stepAccepted, s.sent, s.accepted)
		add(stepCommitted, s.sent, s.applied)
		seen := map[string]bool{}
		first := func(step string, e *historypb.HistoryEvent) {
			if !seen[step] {
				seen[step] = true
				add(step, s.sent, e.GetEventTime().AsTime())
			}
		}
		for _, e := range evs {
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				first(stepStarted, e)
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				first(stepFirstTask, e)
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == contract.SignalRelease {
					first(stepReleased, e)
				}
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				// The marker is written when the task that ran the local
				// activity completes, so it comes after the activity's work.
				if e.GetMarkerRecordedEventAttributes().GetMarkerName() == localActivityMarker {
					first(stepLocalDeliver, e)
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				first(stepScheduled, e)
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				first(stepActStarted, e)
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				first(stepActDone, e)
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
				first(stepWorkflowDone, e)
			}
		}
		if seq != nil {
			// The runs are not read in time order, and a repeated arrival
			// (a retried request, the sweep) is accepted again: the earliest
			// of each counts.
			quoted := []byte(`"` + s.id + `"`)
			earliest := map[string]time.Time{}
			for _, e := range seq.updates {
				a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest()
				if !payloadsContain(a.GetInput().GetArgs().GetPayloads(), quoted) {
					continue
				}
				step := ""
				switch a.GetInput().GetName() {
				case contract.UpdateArrive:
					step = stepArrived
				case contract.UpdateFinished:
					step = stepSequencerGotDone
				default:
					continue
				}
				if at := e.GetEventTime().AsTime(); earliest[step].IsZero() || at.Before(earliest[step]) {
					earliest[step] = at
				}
			}
			for _, step := range []string{stepArrived, stepSequencerGotDone} {
				add(step, s.sent, earliest[step])
			}
		}
	}
	tl := Timeline{Scenario: name, Events: len(samples)}
	for _, st := range steps {
		if v := offsets[st]; len(v) > 0 {
			tl.Steps = append(tl.Steps, Step{Name: st, MedianMS: median(v)})
		}
	}
	sort.SliceStable(tl.Steps, func(i, j int) bool { return tl.Steps[i].MedianMS < tl.Steps[j].MedianMS })
	return tl, nil
}

func payloadsContain(ps []*commonpb.Payload, needle []byte) bool {
	for _, p := range ps {
		if bytes.Contains(p.GetData(), needle) {
			return true
		}
	}
	return false
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
