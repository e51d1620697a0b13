package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// What operators do from the Temporal Web UI and the API, and what each
// must not break: no button may strand a correlation.

// correlationView is GET /v1/correlations/{id}.
type correlationView struct {
	NextSequence int64      `json:"next_sequence"`
	Missing      *int64     `json:"missing"`
	Lanes        []laneView `json:"lanes"`
	Source       string     `json:"source"`
}

// laneView is one lane of GET /v1/correlations/{id}.
type laneView struct {
	EndpointID string  `json:"endpoint_id"`
	Next       *int64  `json:"next"`
	Released   *int64  `json:"released"`
	Parked     []int64 `json:"parked"`
	Previous   int64   `json:"previous_sequence"`
	Skipped    []int64 `json:"skipped"`
	BlockedBy  *struct {
		Sequence int64  `json:"sequence"`
		EventID  string `json:"event_id"`
		State    string `json:"state"`
	} `json:"blocked_by"`
}

// only is the correlation's one lane, for tests whose events all go to one
// endpoint (zero before any event of it has arrived).
func (c correlationView) only(t *testing.T) laneView {
	t.Helper()
	require.LessOrEqual(t, len(c.Lanes), 1, "one endpoint, one lane")
	if len(c.Lanes) == 0 {
		return laneView{}
	}
	return c.Lanes[0]
}

// parked counts a sequencer's arrivals that wait in a lane, and released
// is the sequence released in its one lane (0 for none).
func parked(st contract.SequencerState) int {
	n := 0
	for _, l := range st.Lanes {
		n += len(l.Queued)
	}
	return n
}

func released(st contract.SequencerState) int64 {
	for _, l := range st.Lanes {
		if l.InFlight != 0 {
			return l.InFlight
		}
	}
	return 0
}

func (b *bundle) correlation(id string) correlationView {
	b.t.Helper()
	var c correlationView
	require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, "/v1/correlations/"+id, nil, &c))
	return c
}

// visible lists the executions the Web UI's filter shows for query.
func (b *bundle) visible(query string) []*workflowserviceExecution {
	b.t.Helper()
	resp, err := b.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	require.NoError(b.t, err)
	var out []*workflowserviceExecution
	for _, e := range resp.GetExecutions() {
		out = append(out, &workflowserviceExecution{ID: e.GetExecution().GetWorkflowId(), Type: e.GetType().GetName(), Status: e.GetStatus()})
	}
	return out
}

type workflowserviceExecution struct {
	ID     string
	Type   string
	Status enumspb.WorkflowExecutionStatus
}

// sequencerState asks the correlation's sequencer for its state, as the Web
// UI's Queries tab does.
func (b *bundle) sequencerState(corr string) contract.SequencerState {
	b.t.Helper()
	v, err := b.client.QueryWorkflow(context.Background(), contract.SequencerID(store.DefaultTenant, corr), "", contract.QueryState)
	require.NoError(b.t, err)
	var st contract.SequencerState
	require.NoError(b.t, v.Get(&st))
	return st
}

func (b *bundle) terminate(id string) {
	b.t.Helper()
	require.NoError(b.t, b.client.TerminateWorkflow(context.Background(), wf(id), "", "pressed Terminate in the Web UI"))
}

// resetToFirstTask presses Reset on the workflow's latest run, back to its
// first completed workflow task, once it has one: the ledger says an event
// is delivered from inside the task that delivers it, before the task
// completes.
func (b *bundle) resetToFirstTask(id string) { b.resetToTask(id, 1) }

// resetToTask presses Reset on the workflow's latest run, back to its n-th
// completed workflow task, once it has one: the new run has what the tasks
// before it did. What the Web UI's reset dialog lets the operator leave out
// of the new run (signals, updates received since) goes in exclude.
func (b *bundle) resetToTask(id string, n int, exclude ...enumspb.ResetReapplyExcludeType) {
	b.t.Helper()
	ctx := context.Background()
	var point int64
	waitFor(b.t, 30*time.Second, fmt.Sprintf("completed workflow task %d of %s", n, id), func() bool {
		seen := 0
		it := b.client.GetWorkflowHistory(ctx, wf(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() && point == 0 {
			ev, err := it.Next()
			require.NoError(b.t, err)
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				if seen++; seen == n {
					point = ev.GetEventId()
				}
			}
		}
		return point != 0
	})
	_, err := b.client.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: b.cfg.TemporalNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wf(id)},
		Reason: "pressed Reset in the Web UI", WorkflowTaskFinishEventId: point, RequestId: uuid.NewString(),
		ResetReapplyExcludeTypes: exclude,
	})
	require.NoError(b.t, err)
}

func (b *bundle) deadLetter(id string) store.DeadLetter {
	b.t.Helper()
	var dl store.DeadLetter
	require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters/"+id, nil, &dl))
	return dl
}

type eventWithRestarts struct {
	State    contract.State  `json:"state"`
	Attempts []store.Attempt `json:"attempts"`
	Restarts *struct {
		Count  int    `json:"count"`
		Reason string `json:"reason"`
	} `json:"restarts"`
}

func (b *bundle) eventDetail(id string) eventWithRestarts {
	b.t.Helper()
	var ev eventWithRestarts
	require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, "/v1/events/"+id, nil, &ev))
	return ev
}

// TestReadmeExample is the README's first example as a new user runs it:
// two endpoints take order.updated (the dev receiver's, subscribed to every
// type, and one subscribed to order.* whose receiver refuses it: 401);
// events 3 and 2 of a correlation are published once each, before 1, and
// each is routed to both. While they wait, the Web UI's filter by
// CorrelationId lists the correlation's sequencer and both events, waiting,
// and the sequencer's state query says why; GET /v1/correlations agrees,
// lane by lane. Then 1 arrives: the dev receiver gets 1, 2, 3 in that
// order, while the failing endpoint's lane waits on 1's dead letter with 2
// and 3 parked; the Web UI finds that dead-lettered delivery by endpoint;
// a skip naming the endpoint moves that lane on to 2, and only that lane.
func TestReadmeExample(t *testing.T) {
	t.Parallel()
	// The failing receiver's 401 is permanent, whatever the window; a
	// minute's HTTP timeout keeps a loaded machine from cutting the healthy
	// receiver's answers. Every wait below is for an outcome (visibility is
	// eventually consistent), with minutes to spare.
	b := setup(t, options{timeout: time.Minute})
	dev := b.subscribe()
	failing := b.subscribe("order.*")
	failing.rcv.fault = func(contract.Envelope, int) string { return "401" }
	corr := b.id("order-42")
	id := func(seq int64) string { return fmt.Sprintf("%s-%d", corr, seq) }
	for _, s := range []int64{3, 2} {
		ev := b.publish(id(s), corr, s, "order.updated")
		require.Equal(t, contract.StateWaiting, ev.State)
		require.ElementsMatch(t, []string{dev.ID, failing.ID}, ev.Endpoints())
	}

	q := fmt.Sprintf("CorrelationId = '%s'", corr)
	waitFor(t, 5*time.Minute, "the Web UI lists the sequencer and both waiting events", func() bool {
		byType := map[string]int{}
		for _, e := range b.visible(q) {
			byType[e.Type]++
		}
		waiting := b.visible(q + " AND WorkflowType = 'EventWorkflow' AND DeliveryState = 'waiting' AND ExecutionStatus = 'Running'")
		return byType[contract.SequencerWorkflow] == 1 && byType[contract.EventWorkflow] == 2 && len(waiting) == 2
	})
	lanes := []string{dev.ID, failing.ID}
	slices.Sort(lanes)
	waiting := []contract.QueuedEvent{{Sequence: 2, EventID: id(2)}, {Sequence: 3, EventID: id(3)}}
	want := contract.SequencerState{Next: 1, Frontier: 1, Arrived: []contract.SequenceRange{{From: 2, To: 3}},
		Lanes: []contract.LaneState{{Endpoint: lanes[0], Queued: waiting}, {Endpoint: lanes[1], Queued: waiting}}}
	var st contract.SequencerState
	waitFor(t, 5*time.Minute, "the sequencer's state query says why they wait", func() bool {
		st = b.sequencerState(corr)
		return assert.ObjectsAreEqual(want, st)
	})
	require.Equal(t, want, st)
	c := b.correlation(corr)
	require.Equal(t, "sequencer", c.Source)
	require.EqualValues(t, st.Next, c.NextSequence)
	require.NotNil(t, c.Missing)
	require.EqualValues(t, 1, *c.Missing, "1 has not arrived: it may be meant for anyone, so it holds every lane")
	require.Len(t, c.Lanes, 2)
	for _, lane := range c.Lanes {
		require.Equal(t, []int64{2, 3}, lane.Parked)
		require.Nil(t, lane.Released)
		require.Equal(t, "missing", lane.BlockedBy.State)
	}
	require.Zero(t, dev.rcv.requestsFor(id(2))+dev.rcv.requestsFor(id(3)), "nothing is sent before 1")

	b.publish(id(1), corr, 1, "order.updated")
	for s := int64(1); s <= 3; s++ {
		b.waitDelivery(id(s), dev.ID, contract.StateDelivered, 5*time.Minute)
	}
	require.Equal(t, []int64{1, 2, 3}, dev.rcv.appliedTo(corr))
	b.waitDelivery(id(1), failing.ID, contract.StateDeadLettered, 5*time.Minute)
	var lane laneView
	waitFor(t, 5*time.Minute, "the failing lane holds 2 and 3 behind 1's dead letter", func() bool {
		for _, l := range b.correlation(corr).Lanes {
			if l.EndpointID == failing.ID {
				lane = l
			}
		}
		return lane.Released != nil && *lane.Released == 1 && slices.Equal(lane.Parked, []int64{2, 3})
	})
	require.Equal(t, string(contract.StateDeadLettered), lane.BlockedBy.State)
	var page deadLetterPage
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters?endpoint_id="+failing.ID, nil, &page))
	require.Len(t, page.Items, 1)
	require.Equal(t, id(1), page.Items[0].EventID)
	waitFor(t, 5*time.Minute, "the Web UI finds the correlation's three events by endpoint", func() bool {
		return len(b.visible(q+fmt.Sprintf(" AND EndpointIds = '%s'", failing.ID))) == 3
	})
	waitFor(t, 5*time.Minute, "the Web UI finds the dead-lettered delivery by endpoint", func() bool {
		got := b.visible(fmt.Sprintf("DeadLetteredEndpointIds = '%s'", failing.ID))
		return len(got) == 1 && got[0].ID == wf(id(1))
	})

	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id(1)+"/skip",
		map[string]any{"endpoint_id": failing.ID, "note": "this receiver cannot verify the endpoint"}, nil))
	b.waitDelivery(id(2), failing.ID, contract.StateDeadLettered, 5*time.Minute)
	require.Empty(t, failing.rcv.appliedTo(corr))
	require.Equal(t, []int64{1, 2, 3}, dev.rcv.appliedTo(corr), "the healthy lane never waited")
	dev.rcv.requireClean(t)
}

// TestReplayByARawSignalFromTheWebUI: an operator replays a dead letter from
// the Web UI by sending the signal "replay" with no input, or with {}; the
// event is delivered and its dead letter row follows.
//
// The 400 is permanent, whatever the window: the window is the default 5
// minutes and the HTTP timeout a minute, so the replay's attempt, however
// slow a loaded machine makes it, is not cut or spent into a second dead
// letter; the waits are for outcomes, with minutes to spare.
func TestReplayByARawSignalFromTheWebUI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{timeout: time.Minute})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var healed atomic.Bool
	rcv.fault = func(contract.Envelope, int) string {
		if !healed.Load() {
			return "400"
		}
		return ""
	}
	none, empty := b.id("raw-none"), b.id("raw-empty")
	for _, corr := range []string{none, empty} {
		b.postEvent(corr+"-1", corr, 1, ep.ID, map[string]any{"amount": 1})
		b.waitState(corr+"-1", contract.StateDeadLettered, 5*time.Minute)
	}
	healed.Store(true)
	ctx := context.Background()
	require.NoError(t, b.client.SignalWorkflow(ctx, wf(none+"-1"), "", contract.SignalReplay, nil))
	require.NoError(t, b.client.SignalWorkflow(ctx, wf(empty+"-1"), "", contract.SignalReplay, map[string]any{}))
	for _, corr := range []string{none, empty} {
		b.waitState(corr+"-1", contract.StateDelivered, 5*time.Minute)
		waitFor(t, 5*time.Minute, "the dead letter row follows", func() bool {
			dl := b.deadLetter(corr + "-1")
			return dl.Status == store.DeadLetterReplayed && dl.ReplayCount == 1
		})
		require.Equal(t, activities.RawSignalBy, *b.deadLetter(corr + "-1").ReplayedBy, "a signal by hand names nobody: the row says so")
	}
}

// TestDoubleReplay: two replays of one dead letter at once (a double click,
// or a batch replay beside a single one) are one replay: one is answered
// 202, the other 409. When the replayed window fails too, the second click
// does not replay the new dead letter behind the operator's back: it waits.
func TestDoubleReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 3 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var healed atomic.Bool
	rcv.fault = func(contract.Envelope, int) string {
		if !healed.Load() {
			return "400"
		}
		return ""
	}
	corr := b.id("double")
	id := corr + "-1"
	b.postEvent(id, corr, 1, ep.ID, map[string]any{"amount": 1})
	b.postEvent(corr+"-2", corr, 2, ep.ID, map[string]any{"amount": 2})
	b.waitState(id, contract.StateDeadLettered, 30*time.Second)

	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				codes[i] = b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil)
			} else {
				codes[i] = b.call(http.MethodPost, "/v1/dead-letters/replay?correlation_id="+corr, nil, nil)
			}
		}()
	}
	wg.Wait()
	sort.Ints(codes)
	// The batch answers 202 with what it replayed; the single one 202 or 409.
	waitFor(t, 30*time.Second, "the replay fails again: dead letter 2", func() bool {
		return b.deadLetter(id).Generation == 2
	})
	dl := b.deadLetter(id)
	require.Equal(t, store.DeadLetterOpen, dl.Status)
	require.EqualValues(t, 1, dl.ReplayCount, "two requests, one replay (answers %v)", codes)
	require.Equal(t, 2, rcv.requestsFor(id), "one attempt per window")

	// Two single replays of dead letter 2 at once: one 202, one 409.
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil)
		}()
	}
	wg.Wait()
	sort.Ints(codes)
	require.Equal(t, []int{http.StatusAccepted, http.StatusConflict}, codes)
	waitFor(t, 30*time.Second, "dead letter 3", func() bool { return b.deadLetter(id).Generation == 3 })
	time.Sleep(3 * time.Second)
	dl = b.deadLetter(id)
	require.Equal(t, store.DeadLetterOpen, dl.Status, "the losing click's signal did not replay dead letter 3")
	require.EqualValues(t, 3, dl.Generation)
	require.Equal(t, 3, rcv.requestsFor(id))
	require.Equal(t, contract.StateWaiting, b.eventState(corr+"-2").State, "its successor is still held")

	healed.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	b.waitState(corr+"-2", contract.StateDelivered, 30*time.Second)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
}

// TestReplayAndSkipOfAnEndedWorkflow: "Terminate" pressed on a dead
// letter's workflow. A replay or skip through the API is not a 503 (no
// outage): its workflow is started again, waiting on the dead letter, and
// acts on it; GET /v1/events says it was restarted. A replay of an event
// whose workflow completed is a 409.
func TestReplayAndSkipOfAnEndedWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 3 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var healed atomic.Bool
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if !healed.Load() && ev.Sequence == 1 {
			return "400"
		}
		return ""
	}
	replayed, skipped := b.id("ended-replay"), b.id("ended-skip")
	for _, corr := range []string{replayed, skipped} {
		b.postEvent(corr+"-1", corr, 1, ep.ID, map[string]any{"amount": 1})
		b.postEvent(corr+"-2", corr, 2, ep.ID, map[string]any{"amount": 2})
		b.waitState(corr+"-1", contract.StateDeadLettered, 30*time.Second)
		b.terminate(corr + "-1")
	}
	healed.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+replayed+"-1/replay", nil, nil))
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+skipped+"-1/skip", map[string]any{"note": "gone"}, nil))
	b.waitState(replayed+"-2", contract.StateDelivered, 30*time.Second)
	b.waitState(skipped+"-2", contract.StateDelivered, 30*time.Second)
	require.Equal(t, contract.StateDelivered, b.eventState(replayed+"-1").State)
	require.Equal(t, contract.StateSkipped, b.eventState(skipped+"-1").State)
	for _, id := range []string{replayed + "-1", skipped + "-1"} {
		ev := b.eventDetail(id)
		require.NotNil(t, ev.Restarts, "%s says its workflow was started again", id)
		require.Contains(t, ev.Restarts.Reason, "ended while dead-lettered")
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[replayed])
	require.Equal(t, []int64{2}, applied[skipped])

	// A dead letter left open (an operator reopened it by hand) of an event
	// whose workflow completed: 409, not 503.
	_, err := b.store.Pool().Exec(context.Background(), "UPDATE dead_letters SET status = 'open' WHERE event_id = $1", replayed+"-1")
	require.NoError(t, err)
	var prob map[string]any
	require.Equal(t, http.StatusConflict, b.call(http.MethodPost, "/v1/dead-letters/"+replayed+"-1/replay", nil, &prob))
	require.Equal(t, "https://hookflow.dev/problems/event-finished", prob["type"])
}

// TestTerminateAndResetDoNotStrandACorrelation presses Terminate and Reset
// in the Web UI on every kind of workflow of live correlations, and checks
// that the API's sweep (in its scheduled loop) and the sequencer's ledger
// load bring each correlation to its end, in order, exactly once.
func TestTerminateAndResetDoNotStrandACorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t, options{repairAfter: 2 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var released atomic.Bool
	released.Store(false)
	// Sequence 1 of every correlation is refused with 503 until the test
	// lets go: released, delivering, its successors held.
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if ev.Sequence == 1 && !released.Load() {
			return "503"
		}
		return ""
	}
	delivering, held, seq, reset := b.id("t-delivering"), b.id("t-held"), b.id("t-sequencer"), b.id("t-reset")
	corrs := []string{delivering, held, seq, reset}
	for _, corr := range corrs {
		for s := int64(1); s <= 3; s++ {
			b.postEvent(fmt.Sprintf("%s-%d", corr, s), corr, s, ep.ID, map[string]any{"amount": s})
		}
	}
	for _, corr := range corrs {
		b.waitState(corr+"-1", contract.StateDelivering, 30*time.Second)
	}
	b.terminate(delivering + "-1")                              // the released event
	b.terminate(held + "-2")                                    // a held one
	b.terminate(contract.SequencerID(store.DefaultTenant, seq)) // a sequencer with parked events
	b.resetToFirstTask(contract.SequencerID(store.DefaultTenant, reset))
	released.Store(true)

	for _, corr := range corrs {
		for s := 1; s <= 3; s++ {
			b.waitState(fmt.Sprintf("%s-%d", corr, s), contract.StateDelivered, 90*time.Second)
		}
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	for _, corr := range corrs {
		require.Equal(t, []int64{1, 2, 3}, applied[corr], corr)
	}
	require.Contains(t, b.eventDetail(delivering+"-1").Restarts.Reason, "terminated")
	require.NotNil(t, b.eventDetail(held+"-2").Restarts)

	// Reset on a delivered event runs it again; the ledger knows it is
	// delivered, so nothing is sent again.
	before := rcv.requestsFor(delivering + "-3")
	b.resetToFirstTask(delivering + "-3")
	waitFor(t, 30*time.Second, "the reset run completes", func() bool {
		d, err := b.client.DescribeWorkflowExecution(context.Background(), wf(delivering+"-3"), "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
	require.Equal(t, before, rcv.requestsFor(delivering+"-3"))
	for _, corr := range corrs {
		waitFor(t, 30*time.Second, "the sequencer is through "+corr, func() bool { return b.sequencerState(corr).Next == 4 })
	}
}
