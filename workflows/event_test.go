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

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/store"
	"github.com/hookflow/hookflow/workflows"
)

// releaseAfter is when the tests' sequencer releases the event.
const releaseAfter = 10 * time.Second

// attempt is one call of the Deliver mock.
type attempt struct {
	at     time.Time
	number int32
	input  activities.DeliverInput
}

// doneCall is one done signal the event sent its sequencer.
type doneCall struct {
	at   time.Time
	done workflows.Done
}

// deadLetter is one call of the WriteDeadLetter mock.
type deadLetter struct {
	at    time.Time
	input activities.DeadLetterInput
}

// eventHarness runs one EventWorkflow against mocked activities and a mocked
// sequencer: the event is announced, released releaseAfter after start, and
// the done signal it sends the sequencer is recorded.
type eventHarness struct {
	t        *testing.T
	env      *testsuite.TestWorkflowEnvironment
	in       workflows.EventInput
	start    time.Time
	released time.Time // when the release signal was sent; main loop only
	// skippedBefore is what the release says was skipped before the event.
	skippedBefore []int64
	// arriveErr, when set, answers each announcement (the signal-with-start
	// or update-with-start of the sequencer); nil means it succeeds.
	arriveErr func(now time.Time) error
	// releasedAtOnce makes the fast path's announcement answer "released"
	// (the event was next in line), or starts a ledger event released, so
	// no release signal is sent.
	releasedAtOnce bool

	arrivals    recorder[announcement]
	attempts    recorder[attempt]
	deadLetters recorder[deadLetter]
	dones       recorder[doneCall]
	states      recorder[string] // DeliveryState search attribute upserts
}

// announcement is one call of the Arrive or Announce mock: Name is the
// signal or update it carries.
type announcement struct {
	SequencerID, SequencerType, Name, CorrelationID string
	Arrival                                         activities.Arrival
	StartArg                                        any
}

// fast reports whether the harness runs a protocol whose first attempt is a
// local activity (the fast path or the ledger's).
func (h *eventHarness) fast() bool { return h.in.Protocol >= workflows.ProtocolFastPath }

// ledger reports whether the harness runs the ledger protocol: no
// sequencer, Claim answers, the finishing attempt or skip hands off.
func (h *eventHarness) ledger() bool { return h.in.Protocol == workflows.ProtocolLedger }

// eachProtocol runs a test once per event protocol: the fast path every new
// event takes, and the signal protocol that workflows started before it
// keep to their end.
func eachProtocol(t *testing.T, fn func(t *testing.T, protocol int)) {
	for _, p := range []struct {
		name     string
		protocol int
	}{{"ledger", workflows.ProtocolLedger}, {"fast-path", workflows.ProtocolFastPath}, {"signals", workflows.ProtocolSignals}} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			fn(t, p.protocol)
		})
	}
}

// protocolInput is eventInput(seq) under the given protocol.
func protocolInput(seq int64, protocol int) workflows.EventInput {
	in := eventInput(seq)
	in.Protocol = protocol
	return in
}

func newEventHarness(t *testing.T, in workflows.EventInput) *eventHarness {
	t.Helper()
	h := &eventHarness{t: t, env: newEnv(t), in: in}
	h.start = h.env.Now()
	env := h.env

	announced := func(a announcement) error {
		h.arrivals.add(a)
		if h.arriveErr != nil {
			return h.arriveErr(env.Now())
		}
		return nil
	}
	recordDone := func(arg any) {
		d, _ := arg.(workflows.Done)
		h.dones.add(doneCall{at: env.Now(), done: d})
	}
	switch {
	case h.ledger():
		// No sequencer: released at start (run sets the input) or by signal.
	case h.fast():
		env.OnActivity(act.Announce, mock.Anything, mock.Anything).Return(func(_ context.Context, a activities.AnnounceInput) (activities.Announcement, error) {
			err := announced(announcement{a.SequencerID, a.SequencerType, a.Update, a.CorrelationID, a.Arrival, a.StartArg})
			if err != nil || !h.releasedAtOnce {
				return activities.Announcement{}, err
			}
			return activities.Announcement{Released: true, Skipped: h.skippedBefore}, nil
		})
		env.OnActivity(act.Finish, mock.Anything, mock.Anything).Return(func(_ context.Context, f activities.FinishInput) error {
			require.Equal(t, workflows.SequencerID(correlation), f.SequencerID)
			require.Equal(t, in.Event.EventID, f.EventID)
			require.Equal(t, workflows.UpdateFinished, f.Update)
			require.Equal(t, workflows.SignalRelease, f.ReleaseSignal)
			recordDone(f.Done)
			return nil
		}).Once()
	default:
		env.OnActivity(act.Arrive, mock.Anything, mock.Anything).Return(func(_ context.Context, a activities.ArriveInput) error {
			return announced(announcement{a.SequencerID, a.SequencerType, a.Signal, a.CorrelationID, a.Arrival, a.StartArg})
		})
		env.OnSignalExternalWorkflow(mock.Anything, workflows.SequencerID(correlation), "", workflows.SignalDone, mock.Anything).
			Return(func(_, _, _, _ string, arg any) error {
				recordDone(arg)
				return nil
			}).Once()
	}
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if s, ok := sa.GetKeyword(activities.DeliveryStateKey); ok {
			h.states.add(s)
		}
	}).Maybe()

	h.at(releaseAfter, func() {
		if h.releasedAtOnce {
			return
		}
		require.Equal(t, store.StateWaiting, h.state().State, "an unreleased event waits")
		require.Zero(t, h.attempts.len(), "no delivery before release")
		h.released = env.Now()
		env.SignalWorkflow(workflows.SignalRelease, workflows.Release{Sequence: in.Event.Sequence, Skipped: h.skippedBefore})
	})
	return h
}

// at runs fn on the test's main loop d after the workflow starts.
func (h *eventHarness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

// onDeliver mocks Deliver; answer gets the attempt's 1-based index across
// the whole test (replays included) and the activity attempt number.
func (h *eventHarness) onDeliver(answer func(n int, attempt int32) (activities.DeliverResult, error)) {
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.DeliverInput) (activities.DeliverResult, error) {
			number := activity.GetInfo(ctx).Attempt + in.AttemptOffset // as Deliver counts
			n := h.attempts.add(attempt{at: h.env.Now(), number: number, input: in})
			res, err := answer(n, number)
			if err == nil && in.HandOff {
				// The ledger protocol's delivered attempt moves the cursor
				// and releases the successor itself.
				h.dones.add(doneCall{at: h.env.Now(), done: workflows.Done{Sequence: in.Sequence, EventID: in.EventID}})
			}
			return res, err
		})
}

// onDeadLetter mocks WriteDeadLetter; answer gets the call's 1-based index.
func (h *eventHarness) onDeadLetter(answer func(n int) error) {
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeadLetterInput) error {
			return answer(h.deadLetters.add(deadLetter{at: h.env.Now(), input: in}))
		})
}

// expectSkip mocks Skip, expecting it once with the event's identifiers.
func (h *eventHarness) expectSkip(by, note string) {
	h.env.OnActivity(act.Skip, mock.Anything, activities.SkipInput{
		EventID: h.in.Event.EventID, CorrelationID: correlation, Sequence: h.in.Event.Sequence, By: by, Note: note,
		HandOff: h.ledger(),
	}).Return(func(context.Context, activities.SkipInput) error {
		if h.ledger() {
			h.dones.add(doneCall{at: h.env.Now(), done: workflows.Done{Sequence: h.in.Event.Sequence, EventID: h.in.Event.EventID, Skipped: true}})
		}
		return nil
	}).Once()
}

func (h *eventHarness) state() workflows.EventState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryState)
	require.NoError(h.t, err)
	var s workflows.EventState
	require.NoError(h.t, v.Get(&s))
	return s
}

// run executes the workflow to its end and returns its result.
func (h *eventHarness) run() workflows.EventResult {
	h.t.Helper()
	if h.ledger() && h.releasedAtOnce {
		h.in.ReleasedAtStart = &workflows.Release{Sequence: h.in.Event.Sequence, Skipped: h.skippedBefore}
	}
	h.env.ExecuteWorkflow(workflows.EventWorkflowName, h.in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var res workflows.EventResult
	require.NoError(h.t, h.env.GetWorkflowResult(&res))

	// Whatever happened, the event announced itself to its correlation's
	// sequencer (once, unless the announcement had to be retried), and
	// every attempt carried its identifiers.
	arrivals := h.arrivals.all()
	if h.ledger() {
		require.Empty(h.t, arrivals, "the ledger protocol has no sequencer to announce to")
	} else {
		require.NotEmpty(h.t, arrivals)
	}
	if h.arriveErr == nil && !h.ledger() {
		require.Len(h.t, arrivals, 1)
	}
	for _, a := range arrivals {
		require.Equal(h.t, workflows.SequencerID(correlation), a.SequencerID)
		require.Equal(h.t, workflows.SequencerWorkflowName, a.SequencerType)
		if h.fast() {
			require.Equal(h.t, workflows.UpdateArrive, a.Name)
		} else {
			require.Equal(h.t, workflows.SignalArrived, a.Name)
		}
		require.Equal(h.t, activities.Arrival{Sequence: h.in.Event.Sequence, EventID: h.in.Event.EventID}, a.Arrival)
		start := workflows.SequencerInput{CorrelationID: correlation}
		if h.fast() {
			start.MaxHistory = workflows.FastPathMaxHistory
		}
		require.Equal(h.t, start, a.StartArg, "the sequencer it may start")
		require.Equal(h.t, correlation, a.CorrelationID)
	}
	for _, a := range h.attempts.all() {
		require.Equal(h.t, h.in.Event.EventID, a.input.EventID)
		require.Equal(h.t, h.in.Event.CorrelationID, a.input.CorrelationID)
		require.Equal(h.t, h.in.Event.Sequence, a.input.Sequence)
		require.Equal(h.t, h.in.Event.EndpointID, a.input.EndpointID)
		require.JSONEq(h.t, string(h.in.Event.Data), string(a.input.Data))
		require.Equal(h.t, h.skippedBefore, a.input.Skipped, "the envelope tells the receiver what was skipped before it")
		require.Equal(h.t, h.ledger(), a.input.HandOff, "only the ledger protocol hands off from the attempt")
	}
	// The sequencer hears once how the event finished.
	if dones := h.dones.all(); len(dones) > 0 {
		require.Len(h.t, dones, 1)
		require.Equal(h.t, workflows.Done{
			Sequence: h.in.Event.Sequence, EventID: h.in.Event.EventID, Skipped: res.State == store.StateSkipped,
		}, dones[0].done)
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
	return temporal.NewApplicationError(msg, activities.ErrTypeRetryable)
}

func TestEventWorkflowDeliversAfterRelease(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(3, protocol))
		h.skippedBefore = []int64{1, 2}
		h.onDeliver(func(_ int, number int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{StatusCode: 200, Attempt: number}, nil
		})
		h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(nil).Never()

		res := h.run()

		require.Equal(t, workflows.EventResult{State: store.StateDelivered, Attempts: 1}, res)
		attempts := h.attempts.all()
		require.Len(t, attempts, 1)
		requireAbout(t, 0, attempts[0].at.Sub(h.released), "delivery starts at release")
		require.Len(t, h.dones.all(), 1, "the sequencer is told the event is done")
		require.False(t, h.dones.all()[0].at.Before(attempts[0].at))
		if h.fast() {
			// The first attempt's success records only the final state.
			require.Equal(t, []string{store.StateDelivered}, h.states.all())
		} else {
			require.Equal(t, []string{store.StateDelivering, store.StateDelivered}, h.states.all())
		}
		require.Equal(t, workflows.EventState{State: store.StateDelivered}, h.state())
	})
}

func TestEventWorkflowRetriesThroughWindowThenDeadLettersUntilSkipped(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(7, protocol))
		h.onDeliver(func(int, int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{}, retryable("receiver answered 503")
		})
		h.onDeadLetter(func(int) error { return nil })
		h.expectSkip("alice", "receiver rebuilt from snapshot")

		// An hour later the event is still dead-lettered, the sequencer still
		// gated on it; then an operator skips it.
		h.at(time.Hour, func() {
			require.Equal(t, store.StateDeadLettered, h.state().State)
			require.Zero(t, h.dones.len(), "a dead-lettered event must keep its successors held")
			h.env.SignalWorkflow(workflows.SignalSkip, workflows.Skip{By: "alice", Note: "receiver rebuilt from snapshot"})
		})

		res := h.run()

		require.Equal(t, store.StateSkipped, res.State)
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

		dones := h.dones.all()
		require.Len(t, dones, 1)
		requireAbout(t, time.Hour, dones[0].at.Sub(h.start), "the sequencer hears of the event only once it is skipped")
		require.Equal(t, []string{store.StateDelivering, store.StateDeadLettered, store.StateSkipped}, h.states.all())
	})
}

func TestEventWorkflowDeadLettersPermanentFailureAtOnce(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		for _, tc := range []struct {
			name   string
			err    error
			reason string
		}{
			{"4xx rejection", temporal.NewNonRetryableApplicationError("receiver answered 400: bad signature", activities.ErrTypePermanent, nil), "permanent rejection"},
			{"410 gone", temporal.NewNonRetryableApplicationError("receiver answered 410", activities.ErrTypeEndpointGone, nil), "endpoint gone"},
			{"endpoint disabled", temporal.NewNonRetryableApplicationError("endpoint ep_1 is disabled", activities.ErrTypeEndpointDisabled, nil), "endpoint disabled"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := newEventHarness(t, protocolInput(2, protocol))
				h.onDeliver(func(int, int32) (activities.DeliverResult, error) { return activities.DeliverResult{}, tc.err })
				h.onDeadLetter(func(int) error { return nil })
				h.expectSkip("bob", "")
				h.at(time.Hour, func() {
					s := h.state()
					require.Equal(t, store.StateDeadLettered, s.State)
					require.Contains(t, s.Reason, tc.reason)
					h.env.SignalWorkflow(workflows.SignalSkip, workflows.Skip{By: "bob"})
				})

				res := h.run()

				require.Equal(t, store.StateSkipped, res.State)
				require.Len(t, h.attempts.all(), 1, "a permanent failure is not retried")
				dls := h.deadLetters.all()
				require.Len(t, dls, 1)
				require.Less(t, dls[0].at.Sub(h.released), 2*time.Second, "dead-lettered at once, not at the window's end")
				require.Contains(t, dls[0].input.Reason, tc.reason)
				require.Len(t, h.dones.all(), 1)
			})
		}
	})
}

func TestEventWorkflowHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(4, protocol))
		h.onDeliver(func(n int, number int32) (activities.DeliverResult, error) {
			if n == 1 {
				return activities.DeliverResult{}, temporal.NewApplicationErrorWithOptions("receiver answered 429",
					activities.ErrTypeRetryAfter, temporal.ApplicationErrorOptions{NextRetryDelay: 30 * time.Second})
			}
			return activities.DeliverResult{StatusCode: 200, Attempt: number}, nil
		})

		res := h.run()

		require.Equal(t, workflows.EventResult{State: store.StateDelivered, Attempts: 2}, res)
		ts := h.attemptTimes()
		require.Len(t, ts, 2)
		requireAbout(t, 30*time.Second, ts[1].Sub(ts[0]), "the second attempt waits as the receiver asked")
		require.Len(t, h.dones.all(), 1)
	})
}

func TestEventWorkflowRetryAfterPastWindowDeadLettersAtWindowEnd(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(4, protocol))
		h.onDeliver(func(int, int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{}, temporal.NewApplicationErrorWithOptions("receiver answered 503",
				activities.ErrTypeRetryAfter, temporal.ApplicationErrorOptions{NextRetryDelay: 10 * time.Minute})
		})
		h.onDeadLetter(func(int) error { return nil })
		h.expectSkip("carol", "")
		h.at(time.Hour, func() { h.env.SignalWorkflow(workflows.SignalSkip, workflows.Skip{By: "carol"}) })

		res := h.run()

		require.Equal(t, store.StateSkipped, res.State)
		require.Len(t, h.attempts.all(), 1, "the asked-for delay falls past the window")
		dls := h.deadLetters.all()
		require.Len(t, dls, 1)
		requireAbout(t, 5*time.Minute, dls[0].at.Sub(h.released), "the event still owns its whole window")
	})
}

func TestEventWorkflowReplayStartsAFreshWindow(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(5, protocol))
		h.skippedBefore = []int64{4}
		// The first window fails throughout (5 attempts); after the replay the
		// receiver recovers on the fifth attempt, 85 s into the fresh window:
		// only a window counted from the replay still allows that attempt.
		h.onDeliver(func(n int, number int32) (activities.DeliverResult, error) {
			if n < 10 {
				return activities.DeliverResult{}, retryable("receiver answered 500")
			}
			return activities.DeliverResult{StatusCode: 204, Attempt: number}, nil
		})
		h.onDeadLetter(func(int) error { return nil })
		h.env.OnActivity(act.Replayed, mock.Anything, h.in.Event.EventID).Return(nil).Once()
		h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(nil).Never()

		var replayedAt time.Time
		h.at(20*time.Minute, func() {
			s := h.state()
			require.Equal(t, store.StateDeadLettered, s.State)
			require.NotEmpty(t, s.Reason)
			require.Zero(t, h.dones.len())
			replayedAt = h.env.Now()
			h.env.SignalWorkflow(workflows.SignalReplay, workflows.Replay{By: "dave"})
		})

		res := h.run()

		require.Equal(t, workflows.EventResult{State: store.StateDelivered, Attempts: 5}, res)
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
		dones := h.dones.all()
		require.Len(t, dones, 1)
		require.True(t, dones[0].at.After(replayedAt))
		require.Equal(t, workflows.EventState{State: store.StateDelivered}, h.state(), "the old reason is cleared")
		require.Equal(t, []string{store.StateDelivering, store.StateDeadLettered, store.StateDelivering, store.StateDelivered}, h.states.all())
	})
}

func TestEventWorkflowRetriesDeadLetterWrite(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(6, protocol))
		h.onDeliver(func(int, int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{}, temporal.NewNonRetryableApplicationError("receiver answered 422", activities.ErrTypePermanent, nil)
		})
		// Postgres is down for the first two writes.
		h.onDeadLetter(func(n int) error {
			if n <= 2 {
				return errors.New("insert dead letter: dial tcp 127.0.0.1:5432: connect: connection refused")
			}
			return nil
		})
		h.expectSkip("erin", "")
		h.at(time.Hour, func() {
			require.False(t, h.env.IsWorkflowCompleted(), "the event waits for an operator")
			require.Equal(t, store.StateDeadLettered, h.state().State)
			require.Zero(t, h.dones.len())
			h.env.SignalWorkflow(workflows.SignalSkip, workflows.Skip{By: "erin"})
		})

		res := h.run()

		require.Equal(t, store.StateSkipped, res.State)
		dls := h.deadLetters.all()
		require.Len(t, dls, 3, "the write is retried until Postgres answers")
		for _, dl := range dls {
			require.Equal(t, dls[0].input, dl.input, "every retry writes the same dead letter")
		}
		requireAbout(t, 3*time.Second, dls[2].at.Sub(dls[0].at), "ledger retries back off 1 s, 2 s")
		states := []string{store.StateDeadLettered, store.StateSkipped}
		if !h.fast() {
			states = append([]string{store.StateDelivering}, states...)
		}
		require.Equal(t, states, h.states.all(), "a first attempt rejected at once never left the fast path")
	})
}

func TestEventWorkflowSurvivesABriefTemporalOutageWhileAnnouncing(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		h := newEventHarness(t, protocolInput(3, protocol))
		// Signal-with-start of the sequencer fails for 30 s (a frontend restart).
		// The event was accepted: it must not fail, it must announce itself once
		// Temporal answers again and then deliver.
		outageEnd := h.start.Add(30 * time.Second)
		h.arriveErr = func(now time.Time) error {
			if now.Before(outageEnd) {
				return errors.New("signal sequencer sequencer/order-42: rpc error: code = Unavailable")
			}
			return nil
		}
		h.onDeliver(func(_ int, number int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{StatusCode: 200, Attempt: number}, nil
		})

		res := h.run()

		require.Equal(t, store.StateDelivered, res.State)
	})
}

func TestEventWorkflowFastPathReleasedByTheAnnouncement(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, protocolInput(3, workflows.ProtocolFastPath))
	h.releasedAtOnce = true
	h.skippedBefore = []int64{2}
	h.onDeliver(func(_ int, number int32) (activities.DeliverResult, error) {
		return activities.DeliverResult{StatusCode: 200, Attempt: number}, nil
	})
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(nil).Never()

	res := h.run()

	require.Equal(t, workflows.EventResult{State: store.StateDelivered, Attempts: 1}, res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	requireAbout(t, 0, attempts[0].at.Sub(h.start), "an event next in line delivers at once, without a release signal")
	require.Len(t, h.dones.all(), 1)
	require.Equal(t, []string{store.StateDelivered}, h.states.all())
}

func TestEventWorkflowLedgerReleasedAtStart(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, protocolInput(3, workflows.ProtocolLedger))
	h.releasedAtOnce = true
	h.skippedBefore = []int64{2}
	h.onDeliver(func(_ int, number int32) (activities.DeliverResult, error) {
		return activities.DeliverResult{StatusCode: 200, Attempt: number}, nil
	})
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(nil).Never()
	h.env.OnActivity(act.HandOff, mock.Anything, mock.Anything).Return(nil).Never()

	res := h.run()

	require.Equal(t, workflows.EventResult{State: store.StateDelivered, Attempts: 1}, res)
	attempts := h.attempts.all()
	require.Len(t, attempts, 1)
	requireAbout(t, 0, attempts[0].at.Sub(h.start), "an event next in line delivers at once, without a release signal")
	require.Equal(t, []string{store.StateDelivered}, h.states.all())
}

func TestEventWorkflowLedgerRetriesAFailedHandOff(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, protocolInput(3, workflows.ProtocolLedger))
	h.releasedAtOnce = true
	h.onDeliver(func(_ int, number int32) (activities.DeliverResult, error) {
		return activities.DeliverResult{StatusCode: 200, Attempt: number, HandOffPending: true}, nil
	})
	handOffs := 0
	h.env.OnActivity(act.HandOff, mock.Anything, activities.HandOffInput{CorrelationID: correlation, Sequence: 3}).Return(
		func(context.Context, activities.HandOffInput) error {
			handOffs++
			if handOffs < 3 {
				return errors.New("signal: rpc error: code = Unavailable")
			}
			return nil
		})

	res := h.run()

	require.Equal(t, store.StateDelivered, res.State)
	require.Equal(t, 3, handOffs, "the successor's release is repeated until it is sent")
}
