package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestEventWorkflowCircuitOpenWaitsAndDeadLettersAtTheWindowEnd: a 60 s
// window's attempts find the endpoint's circuit open, told to wait 25 s
// each time: each wait is one timer, it spends the window (unlike a
// throttle), and the delivery is dead-lettered at the window's end, after
// a last look then, with the reason "endpoint circuit open".
func TestEventWorkflowCircuitOpenWaitsAndDeadLettersAtTheWindowEnd(t *testing.T) {
	t.Parallel()
	in := eventInput(7)
	in.Lanes[0].RecoveryWindow = time.Minute
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{CircuitOpen: 25 * time.Second, Attempt: number}, nil
	})
	h.onDeadLetter(func(int) error { return nil })
	h.expectSkip("ep_1", 1, "op", "")
	h.at(time.Hour, func() { h.signal(contract.SignalSkip, contract.Skip{Generation: 1, By: "op"}) })

	h.run()

	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	requireAbout(t, time.Minute, dls[0].at.Sub(h.start), "the window's end: waiting on an open circuit spends it")
	require.Equal(t, contract.CircuitOpenReason, dls[0].input.Reason)
	got := offsets(h.start, h.attemptTimes("ep_1"))
	require.Len(t, got, 4, "a look at 0, 25 and 50 s, and at the window's end")
	requireAbout(t, 25*time.Second, got[1])
	requireAbout(t, 50*time.Second, got[2])
	requireAbout(t, time.Minute, got[3])
	// One timer per wait, the last cut to the window's end: no busy loop.
	require.Equal(t, 3, h.counts().timers)
}

// TestEventWorkflowCircuitClosesAndDelivers: a retry that finds the
// circuit open waits, is made again with its number, and is delivered once
// the probe closed the circuit.
func TestEventWorkflowCircuitClosesAndDelivers(t *testing.T) {
	t.Parallel()
	in := eventInput(8)
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		switch n {
		case 1:
			return contract.DeliverResult{}, retryable("receiver answered 503")
		case 2, 3:
			return contract.DeliverResult{CircuitOpen: 10 * time.Second, Attempt: number}, nil
		}
		return delivered(n, number)
	})

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	require.Zero(t, h.deadLetters.len())
	attempts := h.attemptsTo("ep_1")
	require.Len(t, attempts, 4)
	require.EqualValues(t, 2, attempts[3].number, "the second attempt, made again")
	got := offsets(h.start, h.attemptTimes("ep_1"))
	requireAbout(t, 21*time.Second, got[3], "1 s retry, then two 10 s waits")
}

// TestEventWorkflowReplayProbesOnceThenWaitsItsTurn: a replay's first
// attempt asks to probe the open circuit at once; told another probe is
// out, it waits, and the attempts after it wait for the circuit's own
// probe time like any other.
func TestEventWorkflowReplayProbesOnceThenWaitsItsTurn(t *testing.T) {
	t.Parallel()
	in := eventInput(9)
	in.Lanes[0].RecoveryWindow = time.Minute
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		switch {
		case n == 1:
			return contract.DeliverResult{}, rejected("receiver answered 400")
		case n <= 3:
			return contract.DeliverResult{CircuitOpen: 5 * time.Second, Attempt: number}, nil
		}
		return delivered(n, number)
	})
	h.onDeadLetter(func(int) error { return nil })
	h.at(10*time.Minute, func() { h.signal(contract.SignalReplay, contract.Replay{Generation: 1, By: "op"}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	var probes []bool
	for _, a := range h.attemptsTo("ep_1") {
		probes = append(probes, a.input.Probe)
	}
	require.Equal(t, []bool{false, true, false, false}, probes)
}

// TestEventWorkflowCircuitClosedWakesTheWait: an attempt told the circuit
// opens again in 5 minutes waits on one timer, and the circuit's close
// (SignalCircuitClosed, from the starter: a probe answered, or the
// endpoint was enabled) ends that wait: the attempt is made again at once
// and delivers, minutes before the timer. A close of another endpoint
// wakes nothing; a close signalled while the lane was not waiting makes
// its next wait one more look, which finds the circuit open again and
// waits on its timer.
func TestEventWorkflowCircuitClosedWakesTheWait(t *testing.T) {
	t.Parallel()
	in := eventInput(10)
	in.Lanes[0].RecoveryWindow = time.Hour
	h := newEventHarness(t, in)
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		switch n {
		case 1:
			return contract.DeliverResult{}, retryable("receiver answered 503")
		case 2, 3, 4:
			return contract.DeliverResult{CircuitOpen: 5 * time.Minute, Attempt: number}, nil
		}
		return delivered(n, number)
	})
	h.at(500*time.Millisecond, func() { h.signal(contract.SignalCircuitClosed, contract.CircuitClosed{EndpointID: "ep_1"}) })
	h.at(30*time.Second, func() { h.signal(contract.SignalCircuitClosed, contract.CircuitClosed{EndpointID: "ep_other"}) })
	h.at(5*time.Minute+time.Minute, func() { h.signal(contract.SignalCircuitClosed, contract.CircuitClosed{EndpointID: "ep_1"}) })

	res := h.run()

	require.Equal(t, contract.StateDelivered, res.State)
	got := offsets(h.start, h.attemptTimes("ep_1"))
	require.Len(t, got, 5)
	requireAbout(t, time.Second, got[1], "the retry, 1 s after the failure")
	requireAbout(t, time.Second, got[2], "the close signalled during the retry's wait: one more look at once")
	requireAbout(t, 5*time.Minute+time.Second, got[3], "another endpoint's close wakes nothing: the timer")
	requireAbout(t, 6*time.Minute, got[4], "the close ends the wait, 4 minutes before its timer")
	require.EqualValues(t, 2, h.attemptsTo("ep_1")[4].number, "the second attempt, made again")
}
