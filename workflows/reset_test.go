package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// A Reset of an event's workflow to before its dead letter's write runs the
// write again, in a run with another ID. The ledger has that dead letter
// already, maybe with an operator's replay or skip the API claimed (and
// answered 202): the new run takes the dead letter and carries the action
// out, even when the Reset left the action's signal behind.

// TestEventWorkflowCarriesOutASkipClaimedBeforeAReset: the write answers
// that the window's dead letter (generation 1) is written already and its
// skip claimed; the lane is skipped with no signal, as the claim says.
func TestEventWorkflowCarriesOutASkipClaimedBeforeAReset(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(6))
	h.releasedAtStart = true
	h.rejecting(0, "ep_1")
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
			h.deadLetters.add(deadLetter{at: h.env.Now(), input: in})
			return contract.DeadLetterResult{Generation: 1, Claimed: contract.DeadLetterClaimSkipped, By: "alice", Note: "superseded"}, nil
		}).Once()
	h.expectSkip("ep_1", 1, "alice", "superseded")

	res := h.run()

	require.Equal(t, oneLane(contract.StateSkipped, 0), res)
	dls := h.deadLetters.all()
	require.Len(t, dls, 1)
	require.Zero(t, dls[0].input.Follows, "the delivery's first window follows no dead letter")
	require.Len(t, h.attempts.all(), 1)
}

// TestEventWorkflowCarriesOutAReplayClaimedBeforeAReset: the write answers
// that dead letter 2 is written already and its replay claimed; the lane
// claims it (the claim holds: it is the same) and delivers in a fresh
// window; the window's failure before it is written after generation 2.
func TestEventWorkflowCarriesOutAReplayClaimedBeforeAReset(t *testing.T) {
	t.Parallel()
	h := newEventHarness(t, eventInput(6))
	h.releasedAtStart = true
	h.rejecting(2, "ep_1")
	writes := 0
	h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
			writes = h.deadLetters.add(deadLetter{at: h.env.Now(), input: in})
			if writes == 1 {
				return contract.DeadLetterResult{Generation: 2, Claimed: contract.DeadLetterClaimReplayed, By: "bob"}, nil
			}
			return contract.DeadLetterResult{Generation: 3}, nil
		})
	h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(contract.OperatorResult{}, nil).Never()
	h.at(releaseAfter, func() {
		require.Equal(t, contract.LaneStatus{Endpoint: "ep_1", State: contract.StateDeadLettered, Generation: 3, Reason: h.lane("ep_1").Reason}, h.lane("ep_1"),
			"the replayed window failed too: it waits on the dead letter after the claimed one")
		h.signal(contract.SignalReplay, contract.Replay{Generation: 3, By: "carol"})
	})

	res := h.run()

	require.Equal(t, oneLane(contract.StateDelivered, 1), res)
	require.Equal(t, []contract.ReplayedInput{
		{EventID: h.in.Event.EventID, EndpointID: "ep_1", Generation: 2, By: "bob"},
		{EventID: h.in.Event.EventID, EndpointID: "ep_1", Generation: 3, By: "carol"},
	}, h.replays.all(), "the claimed replay is carried out with no signal, then the operator's next")
	dls := h.deadLetters.all()
	require.Len(t, dls, 2)
	require.Zero(t, dls[0].input.Follows)
	require.EqualValues(t, 2, dls[1].input.Follows, "the replayed window's dead letter is written after the generation it replayed")
	require.Len(t, h.attempts.all(), 3)
}
