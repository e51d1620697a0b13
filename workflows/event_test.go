package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// releaseAfter is when the tests' sequencer releases a held event's lanes.
const releaseAfter = 10 * time.Second

// attempt is one call of the Deliver mock.
type attempt struct {
	at     time.Time
	number int32
	input  contract.DeliverInput
}

// handOver is one time a delivery told its sequencer it was finished (the
// delivering attempt, the skip, or the Finish that repeats a failed one).
type handOver struct {
	at   time.Time
	done contract.Done
}

// deadLetter is one call of the WriteDeadLetter mock.
type deadLetter struct {
	at    time.Time
	input contract.DeadLetterInput
}

// upsert is one search attribute upsert: the DeliveryState it set (empty:
// left alone) and the DeadLetteredEndpointIds it set or unset.
type upsert struct {
	State     contract.State
	Dead      []string
	DeadUnset bool
}

// historyCount is what the test environment saw of the workflow's
// commands and the events sent to it. The environment keeps no history, so
// events() derives the history's length from them as a server records it.
type historyCount struct {
	markers, activities, timers, upserts, signals int
}

// events is the history's length: started and completed, a workflow task
// (scheduled, started, completed) for the start and for every activity
// result, timer and signal that wakes the workflow (an upper bound: a
// server batches what comes together), a marker per local activity
// (its retries included), scheduled, started and completed per activity
// (its retries are the server's and record nothing), started and fired per
// timer, one per upsert and per signal.
func (c historyCount) events() int {
	wakeups := c.activities + c.timers + c.signals
	return 2 + 3*(1+wakeups) + c.markers + 3*c.activities + 2*c.timers + c.upserts + c.signals
}

// eventHarness runs one EventWorkflow against mocked activities. Its lanes
// are held and released together by one signal releaseAfter after start,
// unless they are released at start (releasedAtStart, or Released set in
// the input), start dead-lettered, or the test releases them itself
// (manualRelease).
type eventHarness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	in    workflows.EventInput
	start time.Time
	// released is when each lane's release came; main loop only.
	released map[string]time.Time
	// release is what each lane's release carries (default: Previous =
	// the sequence before the event's).
	release map[string]contract.LaneRelease
	// releasedAtStart gives every lane its release in the input, as the
	// API does when the sequencer answered the arrival with it.
	releasedAtStart bool
	manualRelease   bool

	attempts    recorder[attempt]
	deadLetters recorder[deadLetter]
	handOvers   recorder[handOver]
	replays     recorder[contract.ReplayedInput]
	// replayClaim answers Replayed (default: the claim holds).
	replayClaim func(contract.ReplayedInput) contract.OperatorResult
	upserts     recorder[upsert]

	mu         sync.Mutex
	count      historyCount
	activities map[string]bool
}

func newEventHarness(t *testing.T, in workflows.EventInput) *eventHarness {
	t.Helper()
	h := &eventHarness{t: t, env: newEnv(t), in: in, released: map[string]time.Time{}, release: map[string]contract.LaneRelease{},
		activities: map[string]bool{}}
	h.start = h.env.Now()
	env := h.env
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		var u upsert
		if s, ok := sa.GetKeyword(contract.DeliveryStateKey); ok {
			u.State = contract.State(s)
		}
		if dead, ok := sa.GetKeywordList(contract.DeadLetteredEndpointIDsKey); ok {
			u.Dead = dead
		} else if strings.Contains(fmt.Sprint(sa), contract.DeadLetteredEndpointIDsKey.GetName()) {
			// The accessors hide a key being unset; only its printed form
			// still holds it.
			u.DeadUnset = true
		}
		h.upserts.add(u)
		h.counted(func(c *historyCount) { c.upserts++ })
	}).Maybe()
	env.SetOnLocalActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) {
		h.counted(func(c *historyCount) { c.markers++ })
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		h.counted(func(c *historyCount) {
			if !h.activities[info.ActivityID] { // a retry is the same activity
				h.activities[info.ActivityID] = true
				c.activities++
			}
		})
	})
	env.SetOnTimerScheduledListener(func(string, time.Duration) { h.counted(func(c *historyCount) { c.timers++ }) })
	env.OnActivity(act.Replayed, mock.Anything, mock.Anything).Return(func(_ context.Context, r contract.ReplayedInput) (contract.OperatorResult, error) {
		h.replays.add(r)
		if h.replayClaim != nil {
			return h.replayClaim(r), nil
		}
		return contract.OperatorResult{}, nil
	}).Maybe()
	h.at(releaseAfter, func() {
		if h.manualRelease {
			return
		}
		rel := contract.Release{Sequence: h.in.Event.Sequence}
		for _, l := range h.in.Lanes {
			if l.Released == nil && l.DeadLetter == nil {
				rel.Lanes = append(rel.Lanes, h.releaseOf(l.Endpoint))
			}
		}
		if len(rel.Lanes) == 0 {
			return
		}
		require.Equal(t, contract.StateWaiting, h.state().State, "an unreleased event waits")
		require.Zero(t, h.attempts.len(), "no delivery before release")
		h.releaseLanes(rel)
	})
	return h
}

func (h *eventHarness) counted(f func(*historyCount)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.count)
}

// history is the history's length the run would have on a server.
func (h *eventHarness) history() int { return h.counts().events() }

func (h *eventHarness) counts() historyCount {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

func (h *eventHarness) releaseOf(ep string) contract.LaneRelease {
	if r, ok := h.release[ep]; ok {
		return r
	}
	return contract.LaneRelease{Endpoint: ep, Previous: h.in.Event.Sequence - 1}
}

// releaseLanes sends the release signal, as a sequencer's hand-off does.
func (h *eventHarness) releaseLanes(rel contract.Release) {
	for _, l := range rel.Lanes {
		h.released[l.Endpoint] = h.env.Now()
	}
	h.signal(contract.SignalRelease, rel)
}

// signal sends a signal to the workflow.
func (h *eventHarness) signal(name string, arg any) {
	h.counted(func(c *historyCount) { c.signals++ })
	h.env.SignalWorkflow(name, arg)
}

// at runs fn on the test's main loop d after the workflow starts.
func (h *eventHarness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

// onDeliver mocks Deliver; answer gets the attempt's endpoint, its 1-based
// index among that endpoint's attempts (replays included) and the activity
// attempt number. A delivered attempt hands its delivery over, as Deliver
// does.
func (h *eventHarness) onDeliverTo(answer func(ep string, n int, attempt int32) (contract.DeliverResult, error)) {
	var mu sync.Mutex
	per := map[string]int{}
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) (contract.DeliverResult, error) {
			number := activity.GetInfo(ctx).Attempt + in.AttemptOffset // as Deliver counts
			h.attempts.add(attempt{at: h.env.Now(), number: number, input: in})
			mu.Lock()
			per[in.EndpointID]++
			n := per[in.EndpointID]
			mu.Unlock()
			res, err := answer(in.EndpointID, n, number)
			if err == nil && !res.HandOffPending && !res.Skipped && res.DeadLettered == 0 && res.Throttled == 0 && res.CircuitOpen == 0 {
				h.handOvers.add(handOver{at: h.env.Now(), done: done(in.Sequence, in.EndpointID, false)})
			}
			return res, err
		})
}

// onDeliver mocks Deliver with one answer for every endpoint.
func (h *eventHarness) onDeliver(answer func(n int, attempt int32) (contract.DeliverResult, error)) {
	h.onDeliverTo(func(_ string, n int, number int32) (contract.DeliverResult, error) { return answer(n, number) })
}

// rejecting mocks Deliver: the first `times` attempts to each of eps (all
// of them when times is 0) are rejected for good, every other attempt is
// delivered.
func (h *eventHarness) rejecting(times int, eps ...string) {
	h.onDeliverTo(func(ep string, n int, number int32) (contract.DeliverResult, error) {
		if slices.Contains(eps, ep) && (times == 0 || n <= times) {
			return contract.DeliverResult{}, rejected("receiver answered 400")
		}
		return delivered(n, number)
	})
}

// onDeadLetter mocks WriteDeadLetter; answer gets the call's 1-based index.
// Every successful write is the next generation of its delivery's dead
// letter.
func (h *eventHarness) onDeadLetter(answer func(n int) error) {
	var mu sync.Mutex
	written := map[string]int32{}
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
			if err := answer(h.deadLetters.add(deadLetter{at: h.env.Now(), input: in})); err != nil {
				return contract.DeadLetterResult{}, err
			}
			mu.Lock()
			defer mu.Unlock()
			written[in.Event.EndpointID]++
			return contract.DeadLetterResult{Generation: written[in.Event.EndpointID]}, nil
		})
}

// expectSkip mocks Skip, expecting it once for generation gen of ep's dead
// letter. Skip hands the delivery over as skipped.
func (h *eventHarness) expectSkip(ep string, gen int32, by, note string) {
	h.env.OnActivity(act.Skip, mock.Anything, contract.SkipInput{
		EventID: h.in.Event.EventID, EndpointID: ep, CorrelationID: correlation, Sequence: h.in.Event.Sequence, Generation: gen, By: by, Note: note,
	}).Return(func(context.Context, contract.SkipInput) (contract.OperatorResult, error) {
		h.handOvers.add(handOver{at: h.env.Now(), done: done(h.in.Event.Sequence, ep, true)})
		return contract.OperatorResult{}, nil
	}).Once()
}

// onFinish mocks Finish (a hand-over the workflow repeats); answer gets the
// call's 1-based index, and a nil answer records the hand-over.
func (h *eventHarness) onFinish(answer func(n int) error) {
	var mu sync.Mutex
	calls := 0
	h.env.OnActivity(act.Finish, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.FinishInput) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if err := answer(n); err != nil {
			return err
		}
		h.handOvers.add(handOver{at: h.env.Now(), done: contract.Done{Sequence: in.Sequence, EventID: in.EventID, Lanes: in.Lanes}})
		return nil
	})
}

func done(seq int64, ep string, skipped bool) contract.Done {
	return contract.Done{Sequence: seq, EventID: eventID(seq), Lanes: []contract.LaneDone{{Endpoint: ep, Skipped: skipped}}}
}

func (h *eventHarness) state() contract.EventStatus {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(contract.QueryState)
	require.NoError(h.t, err)
	var s contract.EventStatus
	require.NoError(h.t, v.Get(&s))
	return s
}

func (h *eventHarness) lane(ep string) contract.LaneStatus {
	h.t.Helper()
	l, ok := h.state().Lane(ep)
	require.True(h.t, ok, "no lane %s", ep)
	return l
}

// run executes the workflow to its end and returns its result.
func (h *eventHarness) run() workflows.EventResult {
	h.t.Helper()
	for i, l := range h.in.Lanes {
		if h.releasedAtStart && l.Released == nil {
			r := h.releaseOf(l.Endpoint)
			h.in.Lanes[i].Released = &r
		}
		if h.in.Lanes[i].Released != nil {
			h.release[l.Endpoint] = *h.in.Lanes[i].Released
			if l.DeadLetter == nil {
				h.released[l.Endpoint] = h.start
			}
		}
	}
	h.env.ExecuteWorkflow(contract.EventWorkflow, h.in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var res workflows.EventResult
	require.NoError(h.t, h.env.GetWorkflowResult(&res))

	// Every attempt carried the event's identifiers, its lane's endpoint,
	// and the lane's position its release carried.
	for _, a := range h.attempts.all() {
		require.Equal(h.t, h.in.Event.EventID, a.input.EventID)
		require.Equal(h.t, h.in.Event.CorrelationID, a.input.CorrelationID)
		require.Equal(h.t, h.in.Event.Sequence, a.input.Sequence)
		require.Empty(h.t, a.input.Data, "no attempt carries the payload: Deliver reads it from the ledger")
		rel := h.releaseOf(a.input.EndpointID)
		require.Equal(h.t, rel.Previous, a.input.Previous, "the envelope's previous_sequence is the lane's")
		require.Equal(h.t, rel.Skipped, a.input.Skipped, "the envelope tells the receiver what was skipped in its lane")
	}
	// The sequencer hears once how each delivery finished.
	byLane := map[string][]contract.Done{}
	for _, ho := range h.handOvers.all() {
		require.Len(h.t, ho.done.Lanes, 1)
		byLane[ho.done.Lanes[0].Endpoint] = append(byLane[ho.done.Lanes[0].Endpoint], ho.done)
	}
	for _, l := range res.Lanes {
		if hs := byLane[l.Endpoint]; len(hs) > 0 {
			require.Len(h.t, hs, 1, "lane %s", l.Endpoint)
			require.Equal(h.t, done(h.in.Event.Sequence, l.Endpoint, l.State == contract.StateSkipped), hs[0])
		}
	}
	h.t.Logf("history: %d events (%+v)", h.history(), h.counts())
	return res
}

func (h *eventHarness) attemptTimes(ep string) []time.Time {
	var ts []time.Time
	for _, a := range h.attemptsTo(ep) {
		ts = append(ts, a.at)
	}
	return ts
}

func (h *eventHarness) attemptsTo(ep string) []attempt {
	var out []attempt
	for _, a := range h.attempts.all() {
		if a.input.EndpointID == ep {
			out = append(out, a)
		}
	}
	return out
}

// states are the DeliveryState upserts in order.
func (h *eventHarness) states() []contract.State {
	var out []contract.State
	for _, u := range h.upserts.all() {
		if u.State != "" {
			out = append(out, u.State)
		}
	}
	return out
}

func retryable(msg string) error {
	return temporal.NewApplicationError(msg, contract.ErrTypeRetryable)
}

func rejected(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, contract.ErrTypePermanent, nil)
}

func delivered(_ int, number int32) (contract.DeliverResult, error) {
	return contract.DeliverResult{StatusCode: 200, Attempt: number}, nil
}

// oneLane is the result of a single-lane event to ep_1.
func oneLane(state contract.State, attempts int32) workflows.EventResult {
	return workflows.EventResult{State: state, Lanes: []workflows.LaneResult{{Endpoint: "ep_1", State: state, Attempts: attempts}}}
}

func TestEventWorkflowWaitsForTheReleaseSignal(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.release["ep_1"] = contract.LaneRelease{Endpoint: "ep_1", Previous: 0, Skipped: []int64{1, 2}}
	h.onDeliver(delivered)
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 1), res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	requireAbout(t, 0, attempts[0].at.Sub(h.released["ep_1"]), "delivery starts at release")
	require.Len(t, h.handOvers.all(), 1, "the sequencer is told the delivery is done")
	// A first attempt that succeeds records only the final state.
	require.Equal(t, []contract.State{contract.StateDelivered}, h.states())
	require.Equal(t, contract.EventStatus{State: contract.StateDelivered, Lanes: []contract.LaneStatus{{Endpoint: "ep_1", State: contract.StateDelivered}}}, h.state())
}

func TestEventWorkflowReleasedAtStartDeliversAtOnce(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.releasedAtStart = true
	h.release["ep_1"] = contract.LaneRelease{Endpoint: "ep_1", Previous: 1, Skipped: []int64{2}}
	h.onDeliver(delivered)

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 1), res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	requireAbout(t, 0, attempts[0].at.Sub(h.start), "a delivery released in the sequencer's answer delivers at once")
	require.Equal(t, []contract.State{contract.StateDelivered}, h.states())
	// Started, one workflow task, the attempt's marker, the final upsert,
	// completed: what the recorded event_released_at_start had.
	require.Equal(t, 7, h.history())
}

func TestEventWorkflowRetriesThroughWindowThenDeadLettersUntilSkipped(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(7))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("receiver answered 503")
	})
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_1", 1, "alice", "receiver rebuilt from snapshot")

	// An hour later the delivery is still dead-lettered, its successors
	// still held; then an operator skips it.
	h.at(time.Hour, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{{
			Endpoint: "ep_1", State: contract.StateDeadLettered, Generation: 1, Reason: h.deadLetters.all()[0].input.Reason,
		}}}, h.state())
		require.Zero(t, h.handOvers.len(), "a dead-lettered delivery must keep its lane's successors held")
		h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "alice", Note: "receiver rebuilt from snapshot"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	attempts := h.attempts.all()
	require.Len(t, attempts, 5, "attempts at 0, 1, 5, 21, 85 s; the next (341 s) is past the window")
	want := []time.Duration{0, time.Second, 5 * time.Second, 21 * time.Second, 85 * time.Second}
	got := offsets(attempts[0].at, h.attemptTimes("ep_1"))
	for i := range want {
		requireAbout(t, want[i], got[i], "attempt %d at %v, want %v", i+1, got[i], want[i])
		require.EqualValues(t, i+1, attempts[i].number)
	}
	requireAbout(t, 0, attempts[0].at.Sub(h.released["ep_1"]), "the window starts at release")

	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	requireAbout(t, 5*time.Minute, dls[0].at.Sub(h.released["ep_1"]), "dead-lettered when the window ends, not at the last attempt")
	require.Equal(t, h.in.Event.EventID, dls[0].input.Event.EventID)
	require.Equal(t, "ep_1", dls[0].input.Event.EndpointID)
	require.Equal(t, h.in.Event.Sequence, dls[0].input.Event.Sequence)
	// The reason says the window ran out and carries the last answer.
	require.Contains(t, dls[0].input.Reason, "recovery window spent")
	require.Contains(t, dls[0].input.Reason, "503")
	require.NotContains(t, dls[0].input.Reason, "permanent")

	hs := h.handOvers.all()
	require.Len(t, hs, 1)
	requireAbout(t, time.Hour, hs[0].at.Sub(h.start), "the sequencer hears of the delivery only once it is skipped")
	require.Equal(t, []contract.State{contract.StateDelivering, contract.StateDeadLettered, contract.StateSkipped}, h.states())
	require.Equal(t, []upsert{
		{State: contract.StateDelivering},
		{State: contract.StateDeadLettered, Dead: []string{"ep_1"}},
		{State: contract.StateSkipped, DeadUnset: true},
	}, h.upserts.all())
}

func TestEventWorkflowDeadLettersPermanentFailureAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"4xx rejection", rejected("receiver answered 400: bad signature"), "permanent rejection"},
		{"410 gone", temporal.NewNonRetryableApplicationError("receiver answered 410", contract.ErrTypeEndpointGone, nil), "endpoint gone"},
		{"endpoint disabled", temporal.NewNonRetryableApplicationError("endpoint ep_1 is disabled", contract.ErrTypeEndpointDisabled, nil), "endpoint disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, eventInput(2))
			h.onDeliver(func(int, int32) (contract.DeliverResult, error) { return contract.DeliverResult{}, tc.err })
			h.onDeadLetter(func(int) error { return nil })
			h.expectSkip("ep_1", 1, "bob", "")
			h.at(time.Hour, func() {
				s := h.state()
				require.Equal(t, contract.StateDeadLettered, s.State)
				require.Contains(t, h.lane("ep_1").Reason, tc.reason)
				h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "bob"})
			})

			res := h.run()

			require.Equal(t, contract.StateSkipped, res.State)
			require.Len(t, h.attempts.all(), 1, "a permanent failure is not retried")
			dls := h.deadLetters.all()
			require.Len(t, dls, 1)
			require.Less(t, dls[0].at.Sub(h.released["ep_1"]), 2*time.Second, "dead-lettered at once, not at the window's end")
			require.Contains(t, dls[0].input.Reason, tc.reason)
			require.Len(t, h.handOvers.all(), 1)
			require.Equal(t, []contract.State{contract.StateDeadLettered, contract.StateSkipped}, h.states(),
				"a first attempt rejected at once never showed delivering")
		})
	}
}

func TestEventWorkflowHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(4))
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n == 1 {
			return contract.DeliverResult{}, temporal.NewApplicationErrorWithOptions("receiver answered 429",
				contract.ErrTypeRetryAfter, temporal.ApplicationErrorOptions{NextRetryDelay: 30 * time.Second})
		}
		return contract.DeliverResult{StatusCode: 200, Attempt: number}, nil
	})

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 2), res)
	ts := h.attemptTimes("ep_1")
	require.Len(t, ts, 2)
	requireAbout(t, 30*time.Second, ts[1].Sub(ts[0]), "the second attempt waits as the receiver asked")
	require.Len(t, h.handOvers.all(), 1)
}

func TestEventWorkflowRetryAfterPastWindowDeadLettersAtWindowEnd(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(4))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, temporal.NewApplicationErrorWithOptions("receiver answered 503",
			contract.ErrTypeRetryAfter, temporal.ApplicationErrorOptions{NextRetryDelay: 10 * time.Minute})
	})
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_1", 1, "carol", "")
	h.at(time.Hour, func() { h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "carol"}) })

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Len(t, h.attempts.all(), 1, "the asked-for delay falls past the window")
	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	requireAbout(t, 5*time.Minute, dls[0].at.Sub(h.released["ep_1"]), "the delivery still owns its whole window")
}

func TestEventWorkflowReplayStartsAFreshWindow(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(5))
	h.release["ep_1"] = contract.LaneRelease{Endpoint: "ep_1", Previous: 3, Skipped: []int64{4}}
	// The first window fails throughout (5 attempts); after the replay the
	// receiver recovers on the fifth attempt, 85 s into the fresh window:
	// only a window counted from the replay still allows that attempt.
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n < 10 {
			return contract.DeliverResult{}, retryable("receiver answered 500")
		}
		return contract.DeliverResult{StatusCode: 204, Attempt: number}, nil
	})
	h.onDeadLetter(func(int) error { return nil })
	h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(contract.OperatorResult{}, nil).Never()

	var replayedAt time.Time
	h.at(20*time.Minute, func() {
		l := h.lane("ep_1")
		require.Equal(t, contract.StateDeadLettered, l.State)
		require.NotEmpty(t, l.Reason)
		require.Zero(t, h.handOvers.len())
		replayedAt = h.env.Now()
		h.signal(contract.SignalReplay, contract.Replay{Generation: 1, By: "dave"})
	})

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 5), res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 10)
	require.Len(t, h.deadLetters.all(), 1)
	require.True(t, attempts[4].at.Before(replayedAt))
	for i, a := range attempts {
		require.Equal(t, i == 5, a.input.Probe, "attempt %d: only the replay's first attempt probes an open circuit at once", i+1)
	}
	want := []time.Duration{0, time.Second, 5 * time.Second, 21 * time.Second, 85 * time.Second}
	got := offsets(replayedAt, h.attemptTimes("ep_1")[5:])
	for i := range want {
		requireAbout(t, want[i], got[i], "replayed attempt %d at %v after the replay, want %v", i+1, got[i], want[i])
		require.EqualValues(t, i+1, attempts[5+i].number, "the retry policy starts over")
	}
	hs := h.handOvers.all()
	require.Len(t, hs, 1)
	require.True(t, hs[0].at.After(replayedAt))
	require.Equal(t, []contract.ReplayedInput{{EventID: h.in.Event.EventID, EndpointID: "ep_1", Generation: 1, By: "dave"}}, h.replays.all(),
		"the dead letter of that generation is marked replayed")
	require.Equal(t, contract.LaneStatus{Endpoint: "ep_1", State: contract.StateDelivered}, h.lane("ep_1"), "the old reason is cleared")
	require.Equal(t, []contract.State{contract.StateDelivering, contract.StateDeadLettered, contract.StateDelivering, contract.StateDelivered}, h.states())
}

// TestEventWorkflowIgnoresAReplayOfAnEarlierDeadLetter is the double click:
// two replays of dead letter 1 reach the workflow; the first starts a fresh
// window, which fails too (dead letter 2). The second must not replay dead
// letter 2: it waits for its operator, who replays it later.
func TestEventWorkflowIgnoresAReplayOfAnEarlierDeadLetter(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(5))
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n <= 2 {
			return contract.DeliverResult{}, rejected("receiver answered 400")
		}
		return contract.DeliverResult{StatusCode: 200, Attempt: number}, nil
	})
	h.onDeadLetter(func(int) error { return nil })
	h.at(time.Minute, func() {
		require.Equal(t, int32(1), h.lane("ep_1").Generation)
		h.signal(contract.SignalReplay, contract.Replay{Generation: 1, By: "click-1"})
		h.signal(contract.SignalReplay, contract.Replay{Generation: 1, By: "click-2"})
	})
	h.at(time.Hour, func() {
		l := h.lane("ep_1")
		require.Equal(t, contract.StateDeadLettered, l.State, "the second click did not replay dead letter 2")
		require.Equal(t, int32(2), l.Generation)
		require.Len(t, h.attempts.all(), 2)
		// A raw replay from the Web UI (no input) replays the one it waits on.
		h.signal(contract.SignalReplay, nil)
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.deadLetters.all(), 2)
	require.Equal(t, []contract.ReplayedInput{
		{EventID: h.in.Event.EventID, EndpointID: "ep_1", Generation: 1, By: "click-1"},
		{EventID: h.in.Event.EventID, EndpointID: "ep_1", Generation: 2},
	}, h.replays.all())
}

// TestEventWorkflowIgnoresAReplayPressedWhileDelivering: a raw replay sent
// while the delivery was still running is not held over to act on the dead
// letter that follows.
func TestEventWorkflowIgnoresAReplayPressedWhileDelivering(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(2))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("receiver answered 503")
	})
	h.onDeadLetter(func(int) error { return nil })
	h.at(releaseAfter+2*time.Minute, func() {
		require.Equal(t, contract.StateDelivering, h.state().State)
		h.signal(contract.SignalReplay, contract.Replay{})
		h.signal(contract.SignalSkip, contract.Skip{By: "early"})
	})
	h.expectSkip("ep_1", 1, "later", "")
	h.at(time.Hour, func() {
		require.Equal(t, contract.StateDeadLettered, h.state().State)
		require.Len(t, h.attempts.all(), 5, "no second window was started")
		h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "later"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Empty(t, h.replays.all())
}

// TestEventWorkflowStartedAgainWhileDeadLettered: the workflow of a dead
// letter, started again after an operator terminated it, waits on that dead
// letter, ignores an older one's replay, and delivers on its replay.
func TestEventWorkflowStartedAgainWhileDeadLettered(t *testing.T) {
	t.Parallel()
	in := eventInput(4)
	in.Lanes[0].DeadLetter = &workflows.DeadLetter{Generation: 3, Reason: "permanent rejection: receiver answered 400"}
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 3}
	h := newEventHarness(t, in)
	h.onDeliver(delivered)
	h.at(time.Minute, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{{
			Endpoint: "ep_1", State: contract.StateDeadLettered, Generation: 3, Reason: in.Lanes[0].DeadLetter.Reason,
		}}}, h.state())
		h.signal(contract.SignalReplay, contract.Replay{Generation: 2})
	})
	h.at(2*time.Minute, func() {
		require.Zero(t, h.attempts.len(), "a replay of dead letter 2 does not replay dead letter 3")
		h.signal(contract.SignalReplay, contract.Replay{Generation: 3, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attempts.all(), 1)
	require.Equal(t, []contract.ReplayedInput{{EventID: in.Event.EventID, EndpointID: "ep_1", Generation: 3, By: "erin"}}, h.replays.all())
	// It started dead-lettered (the starter set that): the replay is the
	// first change.
	require.Equal(t, []upsert{
		{State: contract.StateDelivering, DeadUnset: true},
		{State: contract.StateDelivered},
	}, h.upserts.all())
}

func TestEventWorkflowRetriesDeadLetterWrite(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(6))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, rejected("receiver answered 422")
	})
	// Postgres is down for the first two writes.
	h.onDeadLetter(func(n int) error {
		if n <= 2 {
			return errors.New("insert dead letter: dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	})
	h.expectSkip("ep_1", 1, "erin", "")
	h.at(time.Hour, func() {
		require.False(t, h.env.IsWorkflowCompleted(), "the delivery waits for an operator")
		require.Equal(t, contract.StateDeadLettered, h.state().State)
		require.Zero(t, h.handOvers.len())
		h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	dls := h.deadLetters.all()
	require.Len(t, dls, 3, "the write is retried until Postgres answers")
	for _, dl := range dls {
		require.Equal(t, dls[0].input, dl.input, "every retry writes the same dead letter")
	}
	requireAbout(t, 3*time.Second, dls[2].at.Sub(dls[0].at), "ledger retries back off 1 s, 2 s")
}

func TestEventWorkflowRepeatsAFailedHandOver(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.releasedAtStart = true
	h.onDeliver(func(_ int, number int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{StatusCode: 200, Attempt: number, HandOffPending: true}, nil
	})
	tries := 0
	h.onFinish(func(n int) error {
		tries = n
		if n < 3 {
			return errors.New("finished update to sequencer of order-42: rpc error: code = Unavailable")
		}
		return nil
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Equal(t, 3, tries, "the hand-over is repeated until the sequencer has it")
	require.Len(t, h.attempts.all(), 1, "and the event is not sent again for it")
	require.Len(t, h.handOvers.all(), 1)
}

// TestEventWorkflowFindsItDeliveredWhenTheWindowEnds: the delivering attempt
// recorded the delivery but its result never came back (Temporal was
// restarting) and the window ran out. The ledger has the delivery as
// delivered: no dead letter, the lane ends delivered, and hands over to the
// sequencer, which the lost attempt may not have done.
func TestEventWorkflowFindsItDeliveredWhenTheWindowEnds(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.releasedAtStart = true
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("deliver: context deadline exceeded")
	})
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{Finished: contract.StateDelivered}, nil).Once()
	h.onFinish(func(int) error { return nil })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.handOvers.all(), 1)
	states := h.states()
	require.Equal(t, contract.StateDelivered, states[len(states)-1])
}

// TestEventWorkflowStartedAgainOnItsDeadLetterOwesTheSkipped (a restart
// once dropped skipped_sequences): the workflow of a dead letter started again from the ledger
// carries its lane's release, with the sequences skipped before it, and
// its replay's delivery still names them.
func TestEventWorkflowStartedAgainOnItsDeadLetterOwesTheSkipped(t *testing.T) {
	t.Parallel()
	in := eventInput(2)
	in.Lanes[0].DeadLetter = &workflows.DeadLetter{Generation: 1, Reason: "permanent rejection: receiver answered 400"}
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Skipped: []int64{1}}
	h := newEventHarness(t, in)
	h.onDeliver(delivered)
	h.at(time.Minute, func() { h.signal(contract.SignalReplay, contract.Replay{Generation: 1, By: "erin"}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	require.Equal(t, []int64{1}, attempts[0].input.Skipped)
}

// TestEventWorkflowOfASkippedEventSendsNothing (a Reset once sent a skipped event): a
// Reset runs the delivery of an event an operator skipped again; Deliver
// finds it skipped in the ledger and sends nothing, and the lane ends
// skipped, with no dead letter.
func TestEventWorkflowOfASkippedEventSendsNothing(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(5))
	h.releasedAtStart = true
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(contract.DeliverResult{Skipped: true, Attempt: 1}, nil).Once()
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()
	h.onFinish(func(int) error { return nil })

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Len(t, h.handOvers.all(), 1, "the sequencer hears it is skipped (again: harmless)")
}

// TestEventWorkflowLostClaimWaitsForTheWinner (an API replay and a raw skip once both acted): a skip
// sent by hand from the Web UI reaches the workflow while the API holds a
// replay's claim on the dead letter. The skip takes no effect; the replay
// the API signals then does.
func TestEventWorkflowLostClaimWaitsForTheWinner(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(7))
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n == 1 {
			return contract.DeliverResult{}, rejected("receiver answered 400")
		}
		return delivered(n, number)
	})
	h.onDeadLetter(func(int) error { return nil })
	var skips int
	h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(func(context.Context, contract.SkipInput) (contract.OperatorResult, error) {
		skips++
		return contract.OperatorResult{Lost: "replayed"}, nil
	}).Once()
	h.at(time.Minute, func() { h.signal(contract.SignalSkip, map[string]any{}) })
	h.at(2*time.Minute, func() {
		require.Equal(t, 1, skips)
		require.Equal(t, contract.StateDeadLettered, h.state().State, "the lost skip changed nothing")
		h.signal(contract.SignalReplay, contract.Replay{Generation: 1, By: "api-key"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attempts.all(), 2)
	require.Equal(t, []contract.ReplayedInput{{EventID: h.in.Event.EventID, EndpointID: "ep_1", Generation: 1, By: "api-key"}}, h.replays.all())
}

// TestEventWorkflowNamesTheWindowEachDeadLetterEnds (a retried dead-letter
// write once bumped the generation past an operator's claim): every write
// of one window's dead letter, retries included, names the same window,
// and the replayed window's another.
func TestEventWorkflowNamesTheWindowEachDeadLetterEnds(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(8))
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n <= 2 {
			return contract.DeliverResult{}, rejected("receiver answered 400")
		}
		return delivered(n, number)
	})
	h.onDeadLetter(func(n int) error {
		if n == 1 {
			return errors.New("the result of a committed write was lost")
		}
		return nil
	})
	h.at(time.Minute, func() { h.signal(contract.SignalReplay, contract.Replay{Generation: 1}) })
	h.at(2*time.Minute, func() { h.signal(contract.SignalReplay, contract.Replay{Generation: 2}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	dls := h.deadLetters.all()
	require.Len(t, dls, 3)
	require.NotEmpty(t, dls[0].input.Window)
	require.Contains(t, dls[0].input.Window, "ep_1", "a window is its delivery's")
	require.Equal(t, dls[0].input.Window, dls[1].input.Window, "a retry names the window it retries")
	require.NotEqual(t, dls[1].input.Window, dls[2].input.Window, "the replayed window is another")
}

// TestEventWorkflowResetBeforeItsDeadLetterWaitsOnIt (found by the operator
// model, seed 17): the delivery of a run that a Reset took back to before
// its dead letter sends nothing and names the dead letter; the lane waits
// on it, and an operator's skip ends it.
func TestEventWorkflowResetBeforeItsDeadLetterWaitsOnIt(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(9))
	h.releasedAtStart = true
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(contract.DeliverResult{DeadLettered: 2, Attempt: 1}, nil).Once()
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()
	h.expectSkip("ep_1", 2, "erin", "")
	h.at(time.Minute, func() {
		require.Equal(t, contract.LaneStatus{Endpoint: "ep_1", State: contract.StateDeadLettered, Generation: 2}, h.lane("ep_1"))
		h.signal(contract.SignalSkip, contract.Skip{Generation: 2, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
}

// TestEventWorkflowTakesTheLedgersGeneration (found by the operator model,
// seed 1064): a Reset took the workflow back to waiting on dead letter 1,
// which the ledger has at generation 2. The stale replay of 1 loses its
// claim and names generation 2; the lane then takes the skip of 2.
func TestEventWorkflowTakesTheLedgersGeneration(t *testing.T) {
	t.Parallel()
	in := eventInput(10)
	in.Lanes[0].DeadLetter = &workflows.DeadLetter{Generation: 1}
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 9}
	h := newEventHarness(t, in)
	h.replayClaim = func(contract.ReplayedInput) contract.OperatorResult {
		return contract.OperatorResult{Lost: "generation 2", Generation: 2}
	}
	h.expectSkip("ep_1", 2, "erin", "")
	h.at(time.Minute, func() { h.signal(contract.SignalReplay, contract.Replay{Generation: 1}) })
	h.at(2*time.Minute, func() {
		require.Equal(t, 1, h.replays.len())
		require.Equal(t, int32(2), h.lane("ep_1").Generation, "it waits on the ledger's dead letter")
		h.signal(contract.SignalSkip, contract.Skip{Generation: 2, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Zero(t, h.attempts.len())
}

// TestEventWorkflowIgnoresRepeatedReleases: a resync answers every lane in
// flight, so the sweep repeats the release of a dead-lettered delivery
// each time it runs. However many come, the operator's replay still
// reaches the lane.
func TestEventWorkflowIgnoresRepeatedReleases(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3, "ep_1", "ep_2"))
	h.releasedAtStart = true
	h.rejecting(1, "ep_1")
	h.onDeadLetter(func(int) error { return nil })
	for i := range 40 {
		h.at(time.Minute+time.Duration(i)*time.Second, func() {
			h.signal(contract.SignalRelease, contract.Release{Sequence: 3, Lanes: []contract.LaneRelease{h.releaseOf("ep_1"), h.releaseOf("ep_2")}})
			h.signal(contract.SignalReplay, contract.Replay{EndpointID: "ep_2", Generation: 1}) // ep_2 is delivered: nothing to replay
		})
	}
	h.at(time.Hour, func() {
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_1").State)
		h.signal(contract.SignalReplay, contract.Replay{EndpointID: "ep_1", Generation: 1, By: "frank"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attemptsTo("ep_1"), 2, "the replay delivered it; the releases sent nothing")
	require.Len(t, h.attemptsTo("ep_2"), 1)
	require.Equal(t, []contract.ReplayedInput{{EventID: eventID(3), EndpointID: "ep_1", Generation: 1, By: "frank"}}, h.replays.all())
}

// TestEventWorkflowDeliversThreeLanesInOneTask: three lanes released at
// start deliver side by side: three first attempts as local activities in
// the first workflow task, one upsert at the end.
func TestEventWorkflowDeliversThreeLanesInOneTask(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(4, endpoints(3)...))
	h.releasedAtStart = true
	h.release["ep_2"] = contract.LaneRelease{Endpoint: "ep_2", Previous: 1}
	h.release["ep_3"] = contract.LaneRelease{Endpoint: "ep_3", Skipped: []int64{2}}
	h.onDeliver(delivered)

	res := h.run()

	require.Equal(t, workflows.EventResult{State: contract.StateDelivered, Lanes: []workflows.LaneResult{
		{Endpoint: "ep_1", State: contract.StateDelivered, Attempts: 1},
		{Endpoint: "ep_2", State: contract.StateDelivered, Attempts: 1},
		{Endpoint: "ep_3", State: contract.StateDelivered, Attempts: 1},
	}}, res)
	for _, a := range h.attempts.all() {
		requireAbout(t, 0, a.at.Sub(h.start), "every lane delivers at once")
	}
	require.Len(t, h.handOvers.all(), 3)
	require.Equal(t, historyCount{markers: 3, upserts: 1}, h.counts(), "no activity, timer or signal: nothing wakes the workflow after its first task")
	require.Equal(t, 9, h.history())
	require.Equal(t, []contract.State{contract.StateDelivered}, h.states())
}

// TestEventWorkflowDeadLettersOneLaneWhileTheOthersComplete: one
// delivery's receiver rejects it; its lane is dead-lettered (and the search
// attributes name its endpoint) while the other two deliver and hand over.
func TestEventWorkflowDeadLettersOneLaneWhileTheOthersComplete(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(4, endpoints(3)...))
	h.releasedAtStart = true
	h.rejecting(0, "ep_2")
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_2", 1, "gina", "")
	h.at(time.Hour, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{
			{Endpoint: "ep_1", State: contract.StateDelivered},
			{Endpoint: "ep_2", State: contract.StateDeadLettered, Generation: 1, Reason: "permanent rejection: receiver answered 400"},
			{Endpoint: "ep_3", State: contract.StateDelivered},
		}}, h.state())
		var finished []string
		for _, ho := range h.handOvers.all() {
			finished = append(finished, ho.done.Lanes[0].Endpoint)
		}
		slices.Sort(finished)
		require.Equal(t, []string{"ep_1", "ep_3"}, finished, "the other deliveries are handed over, their lanes move on")
		h.signal(contract.SignalSkip, contract.Skip{EndpointID: "ep_2", Generation: 1, By: "gina"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State, "delivered to some, skipped for the rest")
	require.Equal(t, []workflows.LaneResult{
		{Endpoint: "ep_1", State: contract.StateDelivered, Attempts: 1},
		{Endpoint: "ep_2", State: contract.StateSkipped},
		{Endpoint: "ep_3", State: contract.StateDelivered, Attempts: 1},
	}, res.Lanes)
	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	require.Equal(t, "ep_2", dls[0].input.Event.EndpointID)
	require.Equal(t, []upsert{
		{State: contract.StateDeadLettered, Dead: []string{"ep_2"}},
		{State: contract.StateDelivered, DeadUnset: true},
	}, h.upserts.all())
}

// twoDeadLetters is a three-lane event whose ep_2 and ep_3 deliveries are
// rejected at once (dead letter 1 each) and delivered once replayed.
func twoDeadLetters(t *testing.T) *eventHarness {
	h := newEventHarness(t, eventInput(6, endpoints(3)...))
	h.releasedAtStart = true
	h.rejecting(1, "ep_2", "ep_3")
	h.onDeadLetter(func(int) error { return nil })
	return h
}

// TestEventWorkflowReplaysTheLaneItNames: a replay naming ep_2 replays
// ep_2's delivery and leaves ep_3's dead-lettered.
func TestEventWorkflowReplaysTheLaneItNames(t *testing.T) {
	t.Parallel()
	h := twoDeadLetters(t)
	h.expectSkip("ep_3", 1, "hal", "")
	h.at(time.Minute, func() {
		// The two dead letters were written in either order.
		us := h.upserts.all()
		require.Len(t, us, 2)
		require.Equal(t, contract.StateDeadLettered, us[0].State)
		require.Equal(t, upsert{Dead: []string{"ep_2", "ep_3"}}, us[1])
		h.signal(contract.SignalReplay, map[string]any{"endpoint_id": "ep_2", "generation": 1, "by": "hal"})
	})
	h.at(2*time.Minute, func() {
		require.Equal(t, contract.StateDelivered, h.lane("ep_2").State)
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_3").State, "the replay of ep_2 did not touch ep_3")
		require.Len(t, h.attemptsTo("ep_3"), 1)
		h.signal(contract.SignalSkip, map[string]any{"endpoint_id": "ep_3", "generation": 1, "by": "hal"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attemptsTo("ep_2"), 2)
	require.Equal(t, []contract.ReplayedInput{{EventID: eventID(6), EndpointID: "ep_2", Generation: 1, By: "hal"}}, h.replays.all())
	require.Equal(t, []upsert{
		{Dead: []string{"ep_3"}}, // ep_2 replayed: still dead-lettered, by ep_3
		{State: contract.StateDelivered, DeadUnset: true},
	}, h.upserts.all()[2:])
}

// TestEventWorkflowRawSignalActsOnlyOnTheOneDeadLetter: a replay sent by
// hand as {} acts on the one dead-lettered delivery, and on none while
// there are two (which it cannot tell apart).
func TestEventWorkflowRawSignalActsOnlyOnTheOneDeadLetter(t *testing.T) {
	t.Parallel()
	h := twoDeadLetters(t)
	h.at(time.Minute, func() {
		h.signal(contract.SignalReplay, map[string]any{})
		h.signal(contract.SignalSkip, map[string]any{})
	})
	h.at(2*time.Minute, func() {
		require.Empty(t, h.replays.all(), "{} with two dead letters acts on neither")
		require.Len(t, h.attempts.all(), 3)
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_2").State)
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_3").State)
		h.signal(contract.SignalReplay, contract.Replay{EndpointID: "ep_3", Generation: 1})
	})
	h.at(3*time.Minute, func() {
		require.Equal(t, contract.StateDelivered, h.lane("ep_3").State)
		h.signal(contract.SignalReplay, map[string]any{})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Equal(t, []contract.ReplayedInput{
		{EventID: eventID(6), EndpointID: "ep_3", Generation: 1},
		{EventID: eventID(6), EndpointID: "ep_2", Generation: 1},
	}, h.replays.all(), "then {} replays the one dead letter left")
}

// TestEventWorkflowReleaseNamingTwoLanesReleasesBoth: one release signal
// carries two of the event's lanes; the third waits for its own.
func TestEventWorkflowReleaseNamingTwoLanesReleasesBoth(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(5, endpoints(3)...))
	h.manualRelease = true
	h.release["ep_1"] = contract.LaneRelease{Endpoint: "ep_1", Previous: 4}
	h.release["ep_3"] = contract.LaneRelease{Endpoint: "ep_3", Previous: 2, Skipped: []int64{3}}
	h.onDeliver(delivered)
	h.at(releaseAfter, func() {
		h.releaseLanes(contract.Release{Sequence: 5, Lanes: []contract.LaneRelease{h.releaseOf("ep_1"), h.releaseOf("ep_3")}})
	})
	h.at(time.Minute, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateWaiting, Lanes: []contract.LaneStatus{
			{Endpoint: "ep_1", State: contract.StateDelivered},
			{Endpoint: "ep_2", State: contract.StateWaiting},
			{Endpoint: "ep_3", State: contract.StateDelivered},
		}}, h.state())
		h.releaseLanes(contract.Release{Sequence: 5, Lanes: []contract.LaneRelease{h.releaseOf("ep_2")}})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	for _, ep := range endpoints(3) {
		ts := h.attemptTimes(ep)
		require.Len(t, ts, 1, ep)
		requireAbout(t, 0, ts[0].Sub(h.released[ep]), "%s delivers at its release", ep)
	}
	requireAbout(t, releaseAfter, h.released["ep_3"].Sub(h.start), "ep_3 went with ep_1")
	require.Equal(t, []contract.State{contract.StateDelivered}, h.states(),
		"two lanes delivered and one waiting is still a waiting event: nothing to upsert")
}

// TestEventWorkflowPublishesAtOnceASkipWhileOtherLanesRun: a dead-lettered
// delivery skipped while another lane still waits for its release stops
// being listed in DeadLetteredEndpointIds then, not when the event ends.
func TestEventWorkflowPublishesAtOnceASkipWhileOtherLanesRun(t *testing.T) {
	t.Parallel()
	in := eventInput(5, "ep_1", "ep_2")
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 4}
	h := newEventHarness(t, in)
	h.manualRelease = true
	h.rejecting(0, "ep_1")
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_1", 1, "ivy", "")
	h.at(time.Minute, func() { h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "ivy"}) })
	h.at(2*time.Minute, func() {
		require.Equal(t, []upsert{
			{State: contract.StateDeadLettered, Dead: []string{"ep_1"}},
			{State: contract.StateWaiting, DeadUnset: true},
		}, h.upserts.all(), "the skip is published while ep_2 waits")
		h.releaseLanes(contract.Release{Sequence: 5, Lanes: []contract.LaneRelease{h.releaseOf("ep_2")}})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Equal(t, contract.StateDelivered, h.upserts.all()[2].State)
}

// TestEventWorkflowWithNoLanesIsDelivered: an event nobody subscribes to
// has nothing to deliver: its workflow ends at once, delivered.
func TestEventWorkflowWithNoLanesIsDelivered(t *testing.T) {
	t.Parallel()
	in := eventInput(2)
	in.Lanes = nil
	h := newEventHarness(t, in)
	h.manualRelease = true

	res := h.run()

	require.Equal(t, workflows.EventResult{State: contract.StateDelivered}, res)
	require.Zero(t, h.attempts.len())
	require.Empty(t, h.upserts.all(), "the starter set delivered at start")
	requireAbout(t, 0, h.env.Now().Sub(h.start), "it ends at once")
	require.Equal(t, 5, h.history())
}

// TestEventWorkflowHistoryStaysBoundedWithManyLanes: 100 lanes released at
// start cost the history a marker each and nothing else per lane: one
// workflow task, one upsert. A workflow task, a timer or an upsert per lane
// would break the bound.
func TestEventWorkflowHistoryStaysBoundedWithManyLanes(t *testing.T) {
	t.Parallel()
	const lanes = 100
	h := newEventHarness(t, eventInput(9, endpoints(lanes)...))
	h.releasedAtStart = true
	h.onDeliver(delivered)

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, res.Lanes, lanes)
	require.Len(t, h.attempts.all(), lanes)
	require.Len(t, h.handOvers.all(), lanes)
	require.Equal(t, historyCount{markers: lanes, upserts: 1}, h.counts())
	require.Less(t, h.history(), lanes+20, "history of %d events for %d lanes", h.history(), lanes)
}

// batch is one Finish: the lanes one hand-over named, and the wall-clock
// time it ran (the first attempts are local activities, which run in real
// time in the test environment).
type batch struct {
	at    time.Time
	lanes []string
}

// deferredDelivery mocks Deliver as the real one answers an event with
// several lanes (HandOffPending, DeferHandOver set), each endpoint after
// its delay in wall-clock time, and records each Finish as a batch.
func (h *eventHarness) deferredDelivery(delay map[string]time.Duration) (answered func() map[string]time.Time, batches *recorder[batch]) {
	var mu sync.Mutex
	at := map[string]time.Time{}
	batches = &recorder[batch]{}
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) (contract.DeliverResult, error) {
			require.True(h.t, in.DeferHandOver, "an event with several lanes hands them over in batches")
			time.Sleep(delay[in.EndpointID])
			mu.Lock()
			at[in.EndpointID] = time.Now()
			mu.Unlock()
			return contract.DeliverResult{StatusCode: 200, Attempt: 1, HandOffPending: true}, nil
		})
	h.env.OnActivity(act.Finish, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.FinishInput) error {
		var lanes []string
		for _, l := range in.Lanes {
			lanes = append(lanes, l.Endpoint)
		}
		slices.Sort(lanes)
		batches.add(batch{at: time.Now(), lanes: lanes})
		return nil
	})
	return func() map[string]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(at)
	}, batches
}

// TestEventWorkflowHandsAFastLaneOverWithoutItsSlowPeer: of two lanes
// released together, ep_2's receiver answers after 2 s. ep_1's lane is
// handed over by itself within HandOverBatch of its delivery, long before
// ep_2 answers, and ep_2's is handed over when it does: a slow receiver no
// longer paces the other lanes of the events it shares.
func TestEventWorkflowHandsAFastLaneOverWithoutItsSlowPeer(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(4, endpoints(2)...))
	h.releasedAtStart = true
	const slow = 2 * time.Second
	answered, batches := h.deferredDelivery(map[string]time.Duration{"ep_2": slow})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	bs := batches.all()
	require.Len(t, bs, 2, "one hand-over per lane: the fast one did not wait")
	require.Equal(t, []string{"ep_1"}, bs[0].lanes)
	require.Equal(t, []string{"ep_2"}, bs[1].lanes)
	at := answered()
	fastWait := bs[0].at.Sub(at["ep_1"])
	require.Less(t, fastWait, slow/2, "ep_1 was handed over %s after it was delivered", fastWait)
	require.True(t, bs[0].at.Before(at["ep_2"]), "ep_1 was handed over before ep_2's receiver answered")
	require.False(t, bs[1].at.Before(at["ep_2"]))
	require.Equal(t, 1, h.counts().upserts)
}

// TestEventWorkflowHandsLanesDeliveredTogetherOverInOneUpdate: three lanes
// released together whose receivers answer at once are still handed over
// in one Finish (one finished update to the sequencer), and the workflow
// task is the only one: the pause waiting for peers costs one marker.
func TestEventWorkflowHandsLanesDeliveredTogetherOverInOneUpdate(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(4, endpoints(3)...))
	h.releasedAtStart = true
	_, batches := h.deferredDelivery(map[string]time.Duration{"ep_1": 5 * time.Millisecond, "ep_2": 10 * time.Millisecond, "ep_3": 15 * time.Millisecond})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	bs := batches.all()
	require.Len(t, bs, 1, "lanes delivered within HandOverBatch of each other go in one hand-over")
	require.Equal(t, []string{"ep_1", "ep_2", "ep_3"}, bs[0].lanes)
	c := h.counts()
	require.Equal(t, 0, c.activities+c.timers+c.signals, "nothing wakes the workflow after its first task")
	require.LessOrEqual(t, c.markers, 5, "three deliveries, at most one pause, one Finish")
}
