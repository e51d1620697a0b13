package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// Request Cancellation, pressed in the Web UI on an event's workflow, must
// leave no lane of the event stranded: the run refuses it and goes on, so
// each lane still ends delivered, skipped or on its dead letter, and its
// sequencer is told.

// TestEventWorkflowHeldGoesOnAfterACancellationRequest: a held event is
// cancelled before its release; the release still delivers it, and the
// sequencer hears of it.
func TestEventWorkflowHeldGoesOnAfterACancellationRequest(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(2))
	h.onDeliver(delivered)
	h.at(releaseAfter/2, func() {
		require.Equal(t, contract.StateWaiting, h.state().State)
		h.env.CancelWorkflow()
	})

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 1), res)
	require.Len(t, h.attempts.all(), 1)
	require.Len(t, h.handOvers.all(), 1, "the sequencer hears of the delivery, and releases the lane's next")
}

// TestEventWorkflowDeliveringGoesOnAfterACancellationRequest: the event is
// cancelled while its retries are in flight (a regular activity, between
// attempts); the retries go on within the same window, and the attempt
// that succeeds hands the lane over.
func TestEventWorkflowDeliveringGoesOnAfterACancellationRequest(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(2))
	h.releasedAtStart = true
	h.onDeliver(func(n int, number int32) (contract.DeliverResult, error) {
		if n < 3 {
			return contract.DeliverResult{}, retryable("receiver answered 503")
		}
		return delivered(n, number)
	})
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()
	h.at(3*time.Second, func() {
		require.Equal(t, contract.StateDelivering, h.state().State)
		require.Len(t, h.attempts.all(), 2, "cancelled between the second attempt and the third")
		h.env.CancelWorkflow()
	})

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 3), res)
	got := offsets(h.start, h.attemptTimes("ep_1"))
	require.Len(t, got, 3)
	requireAbout(t, 5*time.Second, got[2], "the third attempt comes when the retry policy says, not earlier")
	require.Len(t, h.handOvers.all(), 1)
}

// TestEventWorkflowDeadLetteredGoesOnAfterACancellationRequest: the event
// waits on its dead letter when it is cancelled; the operator's replay
// afterwards delivers it, and a second cancellation changes nothing.
func TestEventWorkflowDeadLetteredGoesOnAfterACancellationRequest(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(2))
	h.releasedAtStart = true
	h.rejecting(1, "ep_1")
	h.onDeadLetter(func(int) error { return nil })
	h.at(time.Minute, func() {
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_1").State)
		h.env.CancelWorkflow()
	})
	h.at(2*time.Minute, func() {
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_1").State, "still waiting on its dead letter")
		h.signal(contract.SignalReplay, contract.Replay{EndpointID: "ep_1", Generation: 1, By: "api-key"})
	})

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 1), res)
	require.Len(t, h.attempts.all(), 2)
	require.Len(t, h.deadLetters.all(), 1)
	require.Len(t, h.replays.all(), 1, "the replay is claimed")
	require.Len(t, h.handOvers.all(), 1)
}
