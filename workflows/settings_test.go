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
