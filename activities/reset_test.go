package activities_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// writeDeadLetter runs WriteDeadLetter for the bundle's delivery, as the
// window named window (its run's ID in it) after dead letter follows.
func (b *deliverBundle) writeDeadLetter(t *testing.T, window string, follows int32) contract.DeadLetterResult {
	t.Helper()
	val, err := b.env.ExecuteActivity(b.acts.WriteDeadLetter, contract.DeadLetterInput{Event: b.in, Reason: "400", Window: window, Follows: follows})
	require.NoError(t, err)
	var res contract.DeadLetterResult
	require.NoError(t, val.Get(&res))
	return res
}

// TestWriteDeadLetterAgainAfterAResetKeepsTheClaimedAction: the API claims
// a skip (or a replay) of dead letter 1, then an operator's Reset takes the
// workflow back to before the write, and the new run writes the same
// window's dead letter again under its own run ID. No generation 2 is
// opened over the claim: the answer is dead letter 1 with the action
// claimed, which the workflow carries out. The replayed window's own
// failure is written as generation 2.
func TestWriteDeadLetterAgainAfterAResetKeepsTheClaimedAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, action := range []string{contract.DeadLetterClaimSkipped, contract.DeadLetterClaimReplayed} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
			_, err := b.deliver(t)
			require.Error(t, err)
			require.Equal(t, contract.DeadLetterResult{Generation: 1}, b.writeDeadLetter(t, "run-a/ep/1", 0))
			var ok bool
			if action == contract.DeadLetterClaimSkipped {
				ok, err = b.st.DeadLetterMarkSkipped(ctx, b.in.EventID, b.in.EndpointID, 1, "api-key", "superseded")
			} else {
				ok, err = b.st.DeadLetterMarkReplayed(ctx, b.in.EventID, b.in.EndpointID, 1, "api-key")
			}
			require.NoError(t, err)
			require.True(t, ok, "the API claims the action")

			want := contract.DeadLetterResult{Generation: 1, Claimed: action, By: "api-key"}
			if action == contract.DeadLetterClaimSkipped {
				want.Note = "superseded"
			}
			require.Equal(t, want, b.writeDeadLetter(t, "run-b/ep/1", 0), "the reset run's write takes dead letter 1 and its claim")
			d, err := b.st.DeadLetterGet(ctx, b.in.EventID, b.in.EndpointID)
			require.NoError(t, err)
			require.EqualValues(t, 1, d.Generation)
			require.Equal(t, action, d.Status, "the claim stands")
			if action == contract.DeadLetterClaimReplayed {
				require.Equal(t, contract.DeadLetterResult{Generation: 2}, b.writeDeadLetter(t, "run-b/ep/2", 1), "the replay's window failed: dead letter 2")
				d, err := b.st.DeadLetterGet(ctx, b.in.EventID, b.in.EndpointID)
				require.NoError(t, err)
				require.Equal(t, store.DeadLetterOpen, d.Status)
			}
		})
	}
}
