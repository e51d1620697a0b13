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

// runsOf lists every run of a workflow ID, continued-as-new ones included.
// When visibility cannot answer, only the latest run counts.
func runsOf(ctx context.Context, c client.Client, id string) []string {
	var runs []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, PageSize: 100, NextPageToken: token,
			Query: fmt.Sprintf("WorkflowId = '%s'", id),
		})
		if err != nil {
			return []string{""}
		}
		for _, ex := range resp.GetExecutions() {
			runs = append(runs, ex.GetExecution().GetRunId())
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	if len(runs) == 0 {
		return []string{""}
	}
	return runs
}

// sequencerHistory is every event of every run of a correlation's sequencer.
type sequencerHistory struct {
	events    []*historypb.HistoryEvent
	runs      int
	maxLength int
}

func loadSequencer(ctx context.Context, c client.Client, corr string) (sequencerHistory, error) {
	var sh sequencerHistory
	for _, run := range runsOf(ctx, c, contract.SequencerID(corr)) {
		evs, err := history(ctx, c, contract.SequencerID(corr), run)
		if err != nil {
			return sh, err
		}
		sh.events = append(sh.events, evs...)
		sh.runs++
		sh.maxLength = max(sh.maxLength, len(evs))
	}
	return sh, nil
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

// meanHistory is the mean history length of the sampled workflows and the
// by-type counts of the middle one.
func meanHistory(ctx context.Context, c client.Client, ids []string) (float64, map[string]int, error) {
	ids = sample(ids, 20)
	if len(ids) == 0 {
		return 0, nil, nil
	}
	total := 0
	var mid map[string]int
	for i, id := range ids {
		evs, err := history(ctx, c, id, "")
		if err != nil {
			return 0, nil, err
		}
		total += len(evs)
		if i == len(ids)/2 {
			mid = byType(evs)
		}
	}
	return float64(total) / float64(len(ids)), mid, nil
}

// step names of the idle timelines.
const (
	stepAccepted         = "api/start call returned (accepted)"
	stepStarted          = "workflow started"
	stepFirstTask        = "first workflow task started"
	stepArrived          = "sequencer: arrive update accepted"
	stepReleased         = "event: release signal recorded"
	stepScheduled        = "Deliver scheduled"
	stepActStarted       = "Deliver started (picked up by worker)"
	stepCommitted        = "receiver committed (applied_at)"
	stepActDone          = "Deliver completed"
	stepWorkflowDone     = "workflow completed"
	stepSequencerGotDone = "sequencer: finished update accepted"
)

var hookflowSteps = []string{stepAccepted, stepStarted, stepFirstTask, stepArrived, stepReleased,
	stepScheduled, stepActStarted, stepCommitted, stepActDone, stepWorkflowDone, stepSequencerGotDone}

var baselineSteps = []string{stepAccepted, stepStarted, stepFirstTask, stepScheduled, stepActStarted, stepCommitted,
	stepActDone, stepWorkflowDone}

// timeline is the median time, from the moment the producer sent the event,
// at which each step happened, over the idle samples. Every clock is this
// machine's: the bench's, Temporal's event times and Postgres' now().
func timeline(ctx context.Context, c client.Client, name string, samples []idleSample, seq *sequencerHistory, steps []string) (Timeline, error) {
	offsets := map[string][]float64{}
	add := func(step string, base, at time.Time) {
		if !at.IsZero() {
			offsets[step] = append(offsets[step], float64(at.Sub(base).Microseconds())/1000)
		}
	}
	for _, s := range samples {
		evs, err := history(ctx, c, s.id, "")
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
			quoted := []byte(`"` + s.id + `"`)
			for _, e := range seq.events {
				switch e.GetEventType() {
				case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
					a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest()
					if !payloadsContain(a.GetInput().GetArgs().GetPayloads(), quoted) {
						continue
					}
					switch a.GetInput().GetName() {
					case contract.UpdateArrive:
						first(stepArrived, e)
					case contract.UpdateFinished:
						first(stepSequencerGotDone, e)
					}
				}
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
