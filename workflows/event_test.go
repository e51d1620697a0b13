package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// releaseAfter is when the tests' sequencer releases a held event.
const releaseAfter = 10 * time.Second

// attempt is one call of the Deliver mock.
type attempt struct {
	at     time.Time
	number int32
	input  contract.DeliverInput
}

// handOver is one time the event told its sequencer it was finished (the
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

// eventHarness runs one EventWorkflow against mocked activities: the event
// is held and released by the signal releaseAfter after start, unless it is
// released at start (releasedAtStart) or starts dead-lettered.
type eventHarness struct {
	t        *testing.T
	env      *testsuite.TestWorkflowEnvironment
	in       workflows.EventInput
	start    time.Time
	released time.Time // when the release came; main loop only
	// skippedBefore is what the release says was skipped before the event.
	skippedBefore []int64
	// releasedAtStart gives the event its release in its input, as the API
	// does when the sequencer answered its arrival with it.
	releasedAtStart bool

	attempts    recorder[attempt]
	deadLetters recorder[deadLetter]
	handOvers   recorder[handOver]
	replays     recorder[contract.ReplayedInput]
	// replayClaim answers Replayed (default: the claim holds).
	replayClaim func(contract.ReplayedInput) contract.OperatorResult
	states      recorder[contract.State] // DeliveryState search attribute upserts
}

func newEventHarness(t *testing.T, in workflows.EventInput) *eventHarness {
	t.Helper()
	h := &eventHarness{t: t, env: newEnv(t), in: in}
	h.start = h.env.Now()
	env := h.env
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if s, ok := sa.GetKeyword(contract.DeliveryStateKey); ok {
			h.states.add(contract.State(s))
		}
	}).Maybe()
	env.OnActivity(act.Replayed, mock.Anything, mock.Anything).Return(func(_ context.Context, r contract.ReplayedInput) (contract.OperatorResult, error) {
		h.replays.add(r)
		if h.replayClaim != nil {
			return h.replayClaim(r), nil
		}
		return contract.OperatorResult{}, nil
	}).Maybe()
	h.at(releaseAfter, func() {
		if h.releasedAtStart || h.in.DeadLetter != nil {
			return
		}
		require.Equal(t, contract.StateWaiting, h.state().State, "an unreleased event waits")
		require.Zero(t, h.attempts.len(), "no delivery before release")
		h.released = env.Now()
		env.SignalWorkflow(contract.SignalRelease, contract.Release{Sequence: in.Event.Sequence, Skipped: h.skippedBefore})
	})
	return h
}

// at runs fn on the test's main loop d after the workflow starts.
func (h *eventHarness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

// onDeliver mocks Deliver; answer gets the attempt's 1-based index across
// the whole test (replays included) and the activity attempt number. A
// delivered attempt hands the event over, as Deliver does.
func (h *eventHarness) onDeliver(answer func(n int, attempt int32) (contract.DeliverResult, error)) {
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) (contract.DeliverResult, error) {
			number := activity.GetInfo(ctx).Attempt + in.AttemptOffset // as Deliver counts
			n := h.attempts.add(attempt{at: h.env.Now(), number: number, input: in})
			res, err := answer(n, number)
			if err == nil && !res.HandOffPending {
				h.handOvers.add(handOver{at: h.env.Now(), done: contract.Done{Sequence: in.Sequence, EventID: in.EventID}})
			}
			return res, err
		})
}

// onDeadLetter mocks WriteDeadLetter; answer gets the call's 1-based index.
// Every successful write is the next generation.
func (h *eventHarness) onDeadLetter(answer func(n int) error) {
	written := int32(0)
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
			if err := answer(h.deadLetters.add(deadLetter{at: h.env.Now(), input: in})); err != nil {
				return contract.DeadLetterResult{}, err
			}
			written++
			return contract.DeadLetterResult{Generation: written}, nil
		})
}

// expectSkip mocks Skip, expecting it once for generation gen.
func (h *eventHarness) expectSkip(gen int32, by, note string) {
	h.env.OnActivity(act.Skip, mock.Anything, contract.SkipInput{
		EventID: h.in.Event.EventID, CorrelationID: correlation, Sequence: h.in.Event.Sequence, Generation: gen, By: by, Note: note,
	}).Return(func(context.Context, contract.SkipInput) (contract.OperatorResult, error) {
		h.handOvers.add(handOver{at: h.env.Now(), done: contract.Done{Sequence: h.in.Event.Sequence, EventID: h.in.Event.EventID, Skipped: true}})
		return contract.OperatorResult{}, nil
	}).Once()
}

func (h *eventHarness) state() contract.EventStatus {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(contract.QueryState)
	require.NoError(h.t, err)
	var s contract.EventStatus
	require.NoError(h.t, v.Get(&s))
	return s
}

// run executes the workflow to its end and returns its result.
func (h *eventHarness) run() workflows.EventResult {
	h.t.Helper()
	if h.releasedAtStart {
		h.in.Released = &contract.Release{Sequence: h.in.Event.Sequence, Skipped: h.skippedBefore}
		h.released = h.start
	}
	h.env.ExecuteWorkflow(contract.EventWorkflow, h.in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var res workflows.EventResult
	require.NoError(h.t, h.env.GetWorkflowResult(&res))

	// Every attempt carried the event's identifiers and what was skipped
	// before it.
	for _, a := range h.attempts.all() {
		require.Equal(h.t, h.in.Event.EventID, a.input.EventID)
		require.Equal(h.t, h.in.Event.CorrelationID, a.input.CorrelationID)
		require.Equal(h.t, h.in.Event.Sequence, a.input.Sequence)
		require.Equal(h.t, h.in.Event.EndpointID, a.input.EndpointID)
		require.JSONEq(h.t, string(h.in.Event.Data), string(a.input.Data))
		require.Equal(h.t, h.skippedBefore, a.input.Skipped, "the envelope tells the receiver what was skipped before it")
	}
	// The sequencer hears once how the event finished.
	if hs := h.handOvers.all(); len(hs) > 0 {
		require.Len(h.t, hs, 1)
		require.Equal(h.t, contract.Done{
			Sequence: h.in.Event.Sequence, EventID: h.in.Event.EventID, Skipped: res.State == contract.StateSkipped,
		}, hs[0].done)
	}
	return res
}

func (h *eventHarness) attemptTimes() []time.Time {
	var ts []time.Time
	for _, a := range h.attempts.all() {
		ts = append(ts, a.at)
	}
	return ts
}

func retryable(msg string) error {
	return temporal.NewApplicationError(msg, contract.ErrTypeRetryable)
}

func delivered(_ int, number int32) (contract.DeliverResult, error) {
	return contract.DeliverResult{StatusCode: 200, Attempt: number}, nil
}

func TestEventWorkflowWaitsForTheReleaseSignal(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.skippedBefore = []int64{1, 2}
	h.onDeliver(delivered)
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()

	res := h.run()

	require.Equal(t, workflows.EventResult{State: contract.StateDelivered, Attempts: 1}, res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	requireAbout(t, 0, attempts[0].at.Sub(h.released), "delivery starts at release")
	require.Len(t, h.handOvers.all(), 1, "the sequencer is told the event is done")
	// A first attempt that succeeds records only the final state.
	require.Equal(t, []contract.State{contract.StateDelivered}, h.states.all())
	require.Equal(t, contract.EventStatus{State: contract.StateDelivered}, h.state())
}

func TestEventWorkflowReleasedAtStartDeliversAtOnce(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.releasedAtStart = true
	h.skippedBefore = []int64{2}
	h.onDeliver(delivered)

	res := h.run()

	require.Equal(t, workflows.EventResult{State: contract.StateDelivered, Attempts: 1}, res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	requireAbout(t, 0, attempts[0].at.Sub(h.start), "an event released in the sequencer's answer delivers at once")
	require.Equal(t, []contract.State{contract.StateDelivered}, h.states.all())
}

func TestEventWorkflowRetriesThroughWindowThenDeadLettersUntilSkipped(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(7))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("receiver answered 503")
	})
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip(1, "alice", "receiver rebuilt from snapshot")

	// An hour later the event is still dead-lettered, its successors still
	// held; then an operator skips it.
	h.at(time.Hour, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateDeadLettered, Generation: 1, Reason: h.deadLetters.all()[0].input.Reason}, h.state())
		require.Zero(t, h.handOvers.len(), "a dead-lettered event must keep its successors held")
		h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 1, By: "alice", Note: "receiver rebuilt from snapshot"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	attempts := h.attempts.all()
	require.Len(t, attempts, 5, "attempts at 0, 1, 5, 21, 85 s; the next (341 s) is past the window")
	want := []time.Duration{0, time.Second, 5 * time.Second, 21 * time.Second, 85 * time.Second}
	got := offsets(attempts[0].at, h.attemptTimes())
	for i := range want {
		requireAbout(t, want[i], got[i], "attempt %d at %v, want %v", i+1, got[i], want[i])
		require.EqualValues(t, i+1, attempts[i].number)
	}
	requireAbout(t, 0, attempts[0].at.Sub(h.released), "the window starts at release")

	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	requireAbout(t, 5*time.Minute, dls[0].at.Sub(h.released), "dead-lettered when the window ends, not at the last attempt")
	require.Equal(t, h.in.Event.EventID, dls[0].input.Event.EventID)
	require.Equal(t, h.in.Event.Sequence, dls[0].input.Event.Sequence)
	// The reason says the window ran out and carries the last answer.
	require.Contains(t, dls[0].input.Reason, "recovery window spent")
	require.Contains(t, dls[0].input.Reason, "503")
	require.NotContains(t, dls[0].input.Reason, "permanent")

	hs := h.handOvers.all()
	require.Len(t, hs, 1)
	requireAbout(t, time.Hour, hs[0].at.Sub(h.start), "the sequencer hears of the event only once it is skipped")
	require.Equal(t, []contract.State{contract.StateDelivering, contract.StateDeadLettered, contract.StateSkipped}, h.states.all())
}

func TestEventWorkflowDeadLettersPermanentFailureAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"4xx rejection", temporal.NewNonRetryableApplicationError("receiver answered 400: bad signature", contract.ErrTypePermanent, nil), "permanent rejection"},
		{"410 gone", temporal.NewNonRetryableApplicationError("receiver answered 410", contract.ErrTypeEndpointGone, nil), "endpoint gone"},
		{"endpoint disabled", temporal.NewNonRetryableApplicationError("endpoint ep_1 is disabled", contract.ErrTypeEndpointDisabled, nil), "endpoint disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newEventHarness(t, eventInput(2))
			h.onDeliver(func(int, int32) (contract.DeliverResult, error) { return contract.DeliverResult{}, tc.err })
			h.onDeadLetter(func(int) error { return nil })
			h.expectSkip(1, "bob", "")
			h.at(time.Hour, func() {
				s := h.state()
				require.Equal(t, contract.StateDeadLettered, s.State)
				require.Contains(t, s.Reason, tc.reason)
				h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 1, By: "bob"})
			})

			res := h.run()

			require.Equal(t, contract.StateSkipped, res.State)
			require.Len(t, h.attempts.all(), 1, "a permanent failure is not retried")
			dls := h.deadLetters.all()
			require.Len(t, dls, 1)
			require.Less(t, dls[0].at.Sub(h.released), 2*time.Second, "dead-lettered at once, not at the window's end")
			require.Contains(t, dls[0].input.Reason, tc.reason)
			require.Len(t, h.handOvers.all(), 1)
			require.Equal(t, []contract.State{contract.StateDeadLettered, contract.StateSkipped}, h.states.all(),
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

	require.Equal(t, workflows.EventResult{State: contract.StateDelivered, Attempts: 2}, res)
	ts := h.attemptTimes()
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
	h.expectSkip(1, "carol", "")
	h.at(time.Hour, func() { h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 1, By: "carol"}) })

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Len(t, h.attempts.all(), 1, "the asked-for delay falls past the window")
	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	requireAbout(t, 5*time.Minute, dls[0].at.Sub(h.released), "the event still owns its whole window")
}

func TestEventWorkflowReplayStartsAFreshWindow(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(5))
	h.skippedBefore = []int64{4}
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
		s := h.state()
		require.Equal(t, contract.StateDeadLettered, s.State)
		require.NotEmpty(t, s.Reason)
		require.Zero(t, h.handOvers.len())
		replayedAt = h.env.Now()
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1, By: "dave"})
	})

	res := h.run()

	require.Equal(t, workflows.EventResult{State: contract.StateDelivered, Attempts: 5}, res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 10)
	require.Len(t, h.deadLetters.all(), 1)
	require.True(t, attempts[4].at.Before(replayedAt))
	want := []time.Duration{0, time.Second, 5 * time.Second, 21 * time.Second, 85 * time.Second}
	got := offsets(replayedAt, h.attemptTimes()[5:])
	for i := range want {
		requireAbout(t, want[i], got[i], "replayed attempt %d at %v after the replay, want %v", i+1, got[i], want[i])
		require.EqualValues(t, i+1, attempts[5+i].number, "the retry policy starts over")
	}
	hs := h.handOvers.all()
	require.Len(t, hs, 1)
	require.True(t, hs[0].at.After(replayedAt))
	require.Equal(t, []contract.ReplayedInput{{EventID: h.in.Event.EventID, Generation: 1, By: "dave"}}, h.replays.all(),
		"the dead letter of that generation is marked replayed")
	require.Equal(t, contract.EventStatus{State: contract.StateDelivered}, h.state(), "the old reason is cleared")
	require.Equal(t, []contract.State{contract.StateDelivering, contract.StateDeadLettered, contract.StateDelivering, contract.StateDelivered}, h.states.all())
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
			return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("receiver answered 400", contract.ErrTypePermanent, nil)
		}
		return contract.DeliverResult{StatusCode: 200, Attempt: number}, nil
	})
	h.onDeadLetter(func(int) error { return nil })
	h.at(time.Minute, func() {
		require.Equal(t, int32(1), h.state().Generation)
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1, By: "click-1"})
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1, By: "click-2"})
	})
	h.at(time.Hour, func() {
		s := h.state()
		require.Equal(t, contract.StateDeadLettered, s.State, "the second click did not replay dead letter 2")
		require.Equal(t, int32(2), s.Generation)
		require.Len(t, h.attempts.all(), 2)
		// A raw replay from the Web UI (no generation) replays the one it waits on.
		h.env.SignalWorkflow(contract.SignalReplay, nil)
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.deadLetters.all(), 2)
	require.Equal(t, []contract.ReplayedInput{
		{EventID: h.in.Event.EventID, Generation: 1, By: "click-1"},
		{EventID: h.in.Event.EventID, Generation: 2},
	}, h.replays.all())
}

// TestEventWorkflowIgnoresAReplayPressedWhileDelivering: a raw replay sent
// while the event was still being delivered is not held over to act on the
// dead letter that follows.
func TestEventWorkflowIgnoresAReplayPressedWhileDelivering(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(2))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("receiver answered 503")
	})
	h.onDeadLetter(func(int) error { return nil })
	h.at(releaseAfter+2*time.Minute, func() {
		require.Equal(t, contract.StateDelivering, h.state().State)
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{})
		h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{By: "early"})
	})
	h.expectSkip(1, "later", "")
	h.at(time.Hour, func() {
		require.Equal(t, contract.StateDeadLettered, h.state().State)
		require.Len(t, h.attempts.all(), 5, "no second window was started")
		h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 1, By: "later"})
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
	in.DeadLetter = &workflows.DeadLetter{Generation: 3, Reason: "permanent rejection: receiver answered 400"}
	h := newEventHarness(t, in)
	h.onDeliver(delivered)
	h.at(time.Minute, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateDeadLettered, Generation: 3, Reason: in.DeadLetter.Reason}, h.state())
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 2})
	})
	h.at(2*time.Minute, func() {
		require.Zero(t, h.attempts.len(), "a replay of dead letter 2 does not replay dead letter 3")
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 3, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attempts.all(), 1)
	require.Equal(t, []contract.ReplayedInput{{EventID: in.Event.EventID, Generation: 3, By: "erin"}}, h.replays.all())
}

func TestEventWorkflowRetriesDeadLetterWrite(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(6))
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("receiver answered 422", contract.ErrTypePermanent, nil)
	})
	// Postgres is down for the first two writes.
	h.onDeadLetter(func(n int) error {
		if n <= 2 {
			return errors.New("insert dead letter: dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	})
	h.expectSkip(1, "erin", "")
	h.at(time.Hour, func() {
		require.False(t, h.env.IsWorkflowCompleted(), "the event waits for an operator")
		require.Equal(t, contract.StateDeadLettered, h.state().State)
		require.Zero(t, h.handOvers.len())
		h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 1, By: "erin"})
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
	h.env.OnActivity(act.Finish, mock.Anything, contract.FinishInput{CorrelationID: correlation, Sequence: 3, EventID: eventID(3)}).Return(
		func(context.Context, contract.FinishInput) error {
			tries++
			if tries < 3 {
				return errors.New("finished update to sequencer of order-42: rpc error: code = Unavailable")
			}
			h.handOvers.add(handOver{at: h.env.Now(), done: contract.Done{Sequence: 3, EventID: eventID(3)}})
			return nil
		})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Equal(t, 3, tries, "the hand-over is repeated until the sequencer has it")
	require.Len(t, h.attempts.all(), 1, "and the event is not sent again for it")
}

// TestEventWorkflowFindsItDeliveredWhenTheWindowEnds: the delivering attempt
// recorded the delivery but its result never came back (Temporal was
// restarting) and the window ran out. The ledger has the event as
// delivered: no dead letter, the workflow ends delivered, and hands over to
// the sequencer, which the lost attempt may not have done.
func TestEventWorkflowFindsItDeliveredWhenTheWindowEnds(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(3))
	h.releasedAtStart = true
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("deliver: context deadline exceeded")
	})
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{Finished: contract.StateDelivered}, nil).Once()
	h.env.OnActivity(act.Finish, mock.Anything, contract.FinishInput{CorrelationID: correlation, Sequence: 3, EventID: eventID(3)}).Return(
		func(context.Context, contract.FinishInput) error {
			h.handOvers.add(handOver{at: h.env.Now(), done: contract.Done{Sequence: 3, EventID: eventID(3)}})
			return nil
		}).Once()

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.handOvers.all(), 1)
	require.Equal(t, contract.StateDelivered, h.states.all()[len(h.states.all())-1])
}

// TestEventWorkflowStartedAgainOnItsDeadLetterOwesTheSkipped (issue 22,
// defect 1): the workflow of a dead letter started again from the ledger
// carries its release, with the sequences skipped before it, and its
// replay's delivery still names them.
func TestEventWorkflowStartedAgainOnItsDeadLetterOwesTheSkipped(t *testing.T) {
	t.Parallel()
	in := eventInput(2)
	in.DeadLetter = &workflows.DeadLetter{Generation: 1, Reason: "permanent rejection: receiver answered 400"}
	in.Released = &contract.Release{Sequence: 2, Skipped: []int64{1}}
	h := newEventHarness(t, in)
	h.skippedBefore = []int64{1}
	h.onDeliver(delivered)
	h.at(time.Minute, func() { h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1, By: "erin"}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attempts.all(), 1)
}

// TestEventWorkflowOfASkippedEventSendsNothing (issue 22, defect 5): a
// Reset runs the delivery of an event an operator skipped again; Deliver
// finds it skipped in the ledger and sends nothing, and the workflow ends
// skipped, with no dead letter.
func TestEventWorkflowOfASkippedEventSendsNothing(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(5))
	h.releasedAtStart = true
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(contract.DeliverResult{Skipped: true, Attempt: 1}, nil).Once()
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()
	h.env.OnActivity(act.Finish, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.FinishInput) error {
		h.handOvers.add(handOver{at: h.env.Now(), done: contract.Done{Sequence: in.Sequence, EventID: in.EventID, Skipped: in.Skipped}})
		return nil
	}).Once()

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Len(t, h.handOvers.all(), 1, "the sequencer hears it is skipped (again: harmless)")
}

// TestEventWorkflowLostClaimWaitsForTheWinner (issue 22, defect 4): a skip
// sent by hand from the Web UI reaches the workflow while the API holds a
// replay's claim on the dead letter. The skip takes no effect; the replay
// the API signals then does.
func TestEventWorkflowLostClaimWaitsForTheWinner(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(7))
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n == 1 {
			return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("receiver answered 400", contract.ErrTypePermanent, nil)
		}
		return delivered(n, number)
	})
	h.onDeadLetter(func(int) error { return nil })
	var skips int
	h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(func(context.Context, contract.SkipInput) (contract.OperatorResult, error) {
		skips++
		return contract.OperatorResult{Lost: "replayed"}, nil
	}).Once()
	h.at(time.Minute, func() { h.env.SignalWorkflow(contract.SignalSkip, map[string]any{}) })
	h.at(2*time.Minute, func() {
		require.Equal(t, 1, skips)
		require.Equal(t, contract.StateDeadLettered, h.state().State, "the lost skip changed nothing")
		h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1, By: "api-key"})
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Len(t, h.attempts.all(), 2)
	require.Equal(t, []contract.ReplayedInput{{EventID: h.in.Event.EventID, Generation: 1, By: "api-key"}}, h.replays.all())
}

// TestEventWorkflowNamesTheWindowEachDeadLetterEnds (issue 22, defect 6):
// every write of one window's dead letter, retries included, names the
// same window, and the replayed window's another.
func TestEventWorkflowNamesTheWindowEachDeadLetterEnds(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(8))
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n <= 2 {
			return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("receiver answered 400", contract.ErrTypePermanent, nil)
		}
		return delivered(n, number)
	})
	h.onDeadLetter(func(n int) error {
		if n == 1 {
			return errors.New("the result of a committed write was lost")
		}
		return nil
	})
	h.at(time.Minute, func() { h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1}) })
	h.at(2*time.Minute, func() { h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 2}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	dls := h.deadLetters.all()
	require.Len(t, dls, 3)
	require.NotEmpty(t, dls[0].input.Window)
	require.Equal(t, dls[0].input.Window, dls[1].input.Window, "a retry names the window it retries")
	require.NotEqual(t, dls[1].input.Window, dls[2].input.Window, "the replayed window is another")
}

// TestEventWorkflowResetBeforeItsDeadLetterWaitsOnIt (found by the operator
// model, seed 17): the delivery of a run that a Reset took back to before
// its dead letter sends nothing and names the dead letter; the workflow
// waits on it, and an operator's skip ends it.
func TestEventWorkflowResetBeforeItsDeadLetterWaitsOnIt(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(9))
	h.releasedAtStart = true
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(contract.DeliverResult{DeadLettered: 2, Attempt: 1}, nil).Once()
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()
	h.expectSkip(2, "erin", "")
	h.at(time.Minute, func() {
		require.Equal(t, contract.EventStatus{State: contract.StateDeadLettered, Generation: 2}, h.state())
		h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 2, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
}

// TestEventWorkflowTakesTheLedgersGeneration (found by the operator model,
// seed 1064): a Reset took the workflow back to waiting on dead letter 1,
// which the ledger has at generation 2. The stale replay of 1 loses its
// claim and names generation 2; the workflow then takes the skip of 2.
func TestEventWorkflowTakesTheLedgersGeneration(t *testing.T) {
	t.Parallel()
	in := eventInput(10)
	in.DeadLetter = &workflows.DeadLetter{Generation: 1}
	h := newEventHarness(t, in)
	h.replayClaim = func(contract.ReplayedInput) contract.OperatorResult {
		return contract.OperatorResult{Lost: "generation 2", Generation: 2}
	}
	h.expectSkip(2, "erin", "")
	h.at(time.Minute, func() { h.env.SignalWorkflow(contract.SignalReplay, contract.Replay{Generation: 1}) })
	h.at(2*time.Minute, func() {
		require.Equal(t, 1, h.replays.len())
		require.Equal(t, int32(2), h.state().Generation, "it waits on the ledger's dead letter")
		h.env.SignalWorkflow(contract.SignalSkip, contract.Skip{Generation: 2, By: "erin"})
	})

	res := h.run()

	require.Equal(t, contract.StateSkipped, res.State)
	require.Zero(t, h.attempts.len())
}
