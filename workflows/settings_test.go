package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestEventWorkflowLaneWindowAndTimeoutAreTheEndpoints: two lanes of one
// event fail alike; the one whose endpoint has a 30 s window and a 2 s
// timeout is dead-lettered when its own window ends, its attempts bounded
// by its own timeout, while the other keeps the event's (the server's) 5
// minutes and 5 s.
func TestEventWorkflowLaneWindowAndTimeoutAreTheEndpoints(t *testing.T) {
	t.Parallel()
	in := eventInput(3, "ep_1", "ep_2")
	in.Lanes[1].RecoveryWindow, in.Lanes[1].Timeout = 30*time.Second, 2*time.Second
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("receiver answered 503")
	})
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_1", 1, "op", "")
	h.expectSkip("ep_2", 1, "op", "")
	h.at(time.Hour, func() {
		h.signal(contract.SignalSkip, contract.Skip{EndpointID: "ep_1", Generation: 1, By: "op"})
		h.signal(contract.SignalSkip, contract.Skip{EndpointID: "ep_2", Generation: 1, By: "op"})
	})

	h.run()

	at := map[string]time.Duration{}
	for _, d := range h.deadLetters.all() {
		at[d.input.Event.EndpointID] = d.at.Sub(h.start)
	}
	requireAbout(t, 5*time.Minute, at["ep_1"], "the server's window")
	requireAbout(t, 30*time.Second, at["ep_2"], "the endpoint's window")
	for _, a := range h.attemptsTo("ep_1") {
		require.Equal(t, 5*time.Second, a.input.Timeout)
	}
	short := h.attemptsTo("ep_2")
	require.Len(t, short, 4, "attempts at 0, 1, 5, 21 s; the next (85 s) is past its window")
	for _, a := range short {
		require.Equal(t, 2*time.Second, a.input.Timeout, "the endpoint's timeout bounds each attempt")
	}
}

// TestEventWorkflowThrottledNeverSpendsTheWindow: an endpoint's rate limit
// throttles a 30 s window's attempts for ten minutes in all, first the first
// attempt and then a retry: each throttle is one timer, the wait moves the
// window's end on, the attempt after each wait is made in the slot it
// reserved, with the throttled attempt's number, and the delivery is
// delivered, not dead-lettered.
func TestEventWorkflowThrottledNeverSpendsTheWindow(t *testing.T) {
	t.Parallel()
	in := eventInput(5)
	in.Lanes[0].RecoveryWindow = 30 * time.Second
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		switch {
		case n <= 5: // the first attempt, throttled five times
			return contract.DeliverResult{Throttled: time.Minute, Attempt: number}, nil
		case n == 6:
			return contract.DeliverResult{}, retryable("receiver answered 503")
		case n <= 11: // the retry, throttled five times
			return contract.DeliverResult{Throttled: time.Minute, Attempt: number}, nil
		}
		return delivered(n, number)
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Zero(t, h.deadLetters.len(), "waiting one's turn never dead-letters")
	attempts := h.attemptsTo("ep_1")
	require.Len(t, attempts, 12)
	got := offsets(h.start, h.attemptTimes("ep_1"))
	for i := 1; i <= 5; i++ {
		requireAbout(t, time.Duration(i)*time.Minute, got[i], "attempt %d after its wait", i+1)
		require.True(t, attempts[i].input.SlotReserved, "sent in the slot it reserved")
		require.EqualValues(t, 1, attempts[i].number, "the first attempt, made again")
	}
	requireAbout(t, 5*time.Minute+time.Second, got[6], "the retry, 1 s after the first attempt failed")
	require.False(t, attempts[6].input.SlotReserved, "a retry reserves its own slot")
	for i := 7; i < 12; i++ {
		require.True(t, attempts[i].input.SlotReserved)
		require.EqualValues(t, 2, attempts[i].number, "the second attempt, made again")
	}
	// One timer per throttle and one for the retry's 1 s: no busy loop.
	require.Equal(t, 11, h.counts().timers)
}

// TestEventWorkflowThrottledThenFailingDeadLettersAtTheMovedWindowEnd: a
// delivery throttled for 20 s, then refused (503) through its 30 s window,
// is dead-lettered 50 s after its release: the wait moved the window's end.
func TestEventWorkflowThrottledThenFailingDeadLettersAtTheMovedWindowEnd(t *testing.T) {
	t.Parallel()
	in := eventInput(6)
	in.Lanes[0].RecoveryWindow = 30 * time.Second
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n == 1 {
			return contract.DeliverResult{Throttled: 20 * time.Second, Attempt: number}, nil
		}
		return contract.DeliverResult{}, retryable("receiver answered 503")
	})
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_1", 1, "op", "")
	h.at(time.Hour, func() { h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "op"}) })

	h.run()

	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	requireAbout(t, 50*time.Second, dls[0].at.Sub(h.start), "the window's end, moved by the 20 s waited")
	require.Contains(t, dls[0].input.Reason, "recovery window spent")
}

// TestEventWorkflowCircuitWaitTakesAFreshSlot: an attempt sent in the slot
// it waited for that finds the endpoint's circuit open waits on the circuit
// and then reserves a fresh slot, in the first attempt's loop and in the
// retries' alike: the slot it held is stale when the circuit closes, and
// every head that held one would otherwise send at once, past the rate
// limit.
func TestEventWorkflowCircuitWaitTakesAFreshSlot(t *testing.T) {
	t.Parallel()
	in := eventInput(5)
	in.Lanes[0].RecoveryWindow = time.Hour
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		switch n {
		case 1, 4:
			return contract.DeliverResult{Throttled: time.Minute, Attempt: number}, nil
		case 2, 5:
			return contract.DeliverResult{CircuitOpen: 2 * time.Minute, Attempt: number}, nil
		case 3:
			return contract.DeliverResult{}, retryable("receiver answered 503")
		}
		return delivered(n, number)
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	var reserved []bool
	for _, a := range h.attemptsTo("ep_1") {
		reserved = append(reserved, a.input.SlotReserved)
	}
	require.Equal(t, []bool{false, true, false, false, true, false}, reserved,
		"the attempt after each circuit wait reserves its slot afresh")
}

// TestEventWorkflowLaneWakeEndsTheTurnInAFreshSlot: a lane wake
// (SignalCircuitClosed, which the starter sends when the endpoint's
// rate_limit changes) ends a 30-minute wait for a slot of the old rate at
// once, and the attempt reserves a fresh slot under the new one; a turn
// waited out to its end still sends in the slot it reserved.
func TestEventWorkflowLaneWakeEndsTheTurnInAFreshSlot(t *testing.T) {
	t.Parallel()
	in := eventInput(5)
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		switch n {
		case 1:
			return contract.DeliverResult{Throttled: 30 * time.Minute, Attempt: number}, nil
		case 2:
			return contract.DeliverResult{Throttled: time.Minute, Attempt: number}, nil
		}
		return delivered(n, number)
	})
	h.at(10*time.Second, func() { h.signal(contract.SignalCircuitClosed, contract.CircuitClosed{EndpointID: "ep_1"}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	attempts := h.attemptsTo("ep_1")
	require.Len(t, attempts, 3)
	got := offsets(h.start, h.attemptTimes("ep_1"))
	requireAbout(t, 10*time.Second, got[1], "the wake ends the wait")
	require.False(t, attempts[1].input.SlotReserved, "a woken attempt reserves again, under the new rate")
	requireAbout(t, 70*time.Second, got[2], "the new rate's turn, waited out")
	require.True(t, attempts[2].input.SlotReserved, "sent in the slot it waited for")
	require.Zero(t, h.deadLetters.len())
}

// TestEventWorkflowInFlightFullWaitsWithoutASlot: an attempt that found
// its endpoint's attempts in flight at max_in_flight waits its turn as a
// throttled one does, spending no window, but holds no send slot of the
// rate limit: the attempt made again reserves its own (SlotReserved
// false), so a capped endpoint's rate limit still holds.
func TestEventWorkflowInFlightFullWaitsWithoutASlot(t *testing.T) {
	t.Parallel()
	in := eventInput(5)
	in.Lanes[0].RecoveryWindow = 10 * time.Second
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n <= 20 { // 20 waits of 2 s: 40 s, four windows' worth
			return contract.DeliverResult{Throttled: 2 * time.Second, InFlightFull: true, Attempt: number}, nil
		}
		return delivered(n, number)
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Zero(t, h.deadLetters.len(), "waiting for a place never dead-letters")
	attempts := h.attemptsTo("ep_1")
	require.Len(t, attempts, 21)
	for i, a := range attempts {
		require.False(t, a.input.SlotReserved, "attempt %d: no slot was reserved for it", i+1)
		require.EqualValues(t, 1, a.number, "the first attempt, made again")
	}
	requireAbout(t, 40*time.Second, offsets(h.start, h.attemptTimes("ep_1"))[20])
}
