package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestSequencerLoadOfReadsOnlyLanesWithOpenDeliveries: a sequencer's load
// leaves out a lane whose deliveries are all finished (its position stays
// in the ledger, and LanesLoad reads it with the voided sequences after
// it), while the operators' view (CorrelationLoadOf) still names it; and a
// release rebuilt from the ledger (LaneRelease) names the voided sequences
// between the lane's previous sequence and its event, as the sequencer's
// release does.
func TestSequencerLoadOfReadsOnlyLanesWithOpenDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "s-1", "s", 1, "a", "b")
	insertRouted(t, st, "s-2", "s", 2, "b")
	delivered(t, st, "s-1", "a", "s", 1)
	delivered(t, st, "s-1", "b", "s", 1)
	_, err := st.CorrelationVoid(ctx, "s", []int64{3, 4}, "op", "lost")
	require.NoError(t, err)
	insertRouted(t, st, "s-5", "s", 5, "b")

	load, err := st.SequencerLoadOf(ctx, "s")
	require.NoError(t, err)
	require.Len(t, load.Lanes, 1, "a has nothing open: its position stays in the ledger")
	require.Equal(t, "b", load.Lanes[0].EndpointID)
	require.Equal(t, []int64{3, 4}, load.Voided)
	every, err := st.CorrelationLoadOf(ctx, "s", 0)
	require.NoError(t, err)
	require.Len(t, every.Lanes, 2, "the operators' view names every lane")

	lanes, err := st.LanesLoad(ctx, "s", []string{"a"}, []int64{0}, contract.MaxQueuedPerLane)
	require.NoError(t, err)
	require.Equal(t, []store.LaneLoad{{Lane: store.Lane{EndpointID: "a", LastFinished: 1, Previous: 1}, Voided: []int64{3, 4}}}, lanes)

	r, err := st.LaneRelease(ctx, "s", "b", 5)
	require.NoError(t, err)
	require.Equal(t, contract.LaneRelease{Endpoint: "b", Previous: 1, Skipped: []int64{3, 4}}, r, "the voided sequences count as skipped, as in the sequencer's release")
	r, err = st.LaneRelease(ctx, "s", "b", 2)
	require.NoError(t, err)
	require.Equal(t, contract.LaneRelease{Endpoint: "b", Previous: 1}, r, "none past the event")
}

// TestSequencerLoadOfStaysUnderItsBudget: 300 lanes, each with 40 open
// deliveries of 255-character IDs, load within contract.MaxQueuedBytes in
// all, each lane within contract.MaxQueuedBytesPerLane; the lanes past the
// budget keep none and say there are more.
func TestSequencerLoadOfStaysUnderItsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	var eps []string
	for i := range 300 {
		ep := fmt.Sprintf("%0255d", i)
		_, err := st.EndpointInsert(ctx, ep, "https://example.com/"+ep[:8], "whsec_x", nil)
		require.NoError(t, err)
		eps = append(eps, ep)
	}
	for seq := int64(2); seq <= 41; seq++ {
		insertRouted(t, st, fmt.Sprintf("%0255d", seq), "big", seq, eps[:contract.MaxSubscribersCeiling]...)
		insertRouted(t, st, strings.Repeat("x", 250)+fmt.Sprintf("%05d", seq), "big", seq+1000, eps[contract.MaxSubscribersCeiling:]...)
	}
	load, err := st.SequencerLoadOf(ctx, "big")
	require.NoError(t, err)
	require.Len(t, load.Lanes, 300)
	total, empty := 0, 0
	for _, l := range load.Lanes {
		n := 0
		for _, q := range l.Open {
			n += contract.QueuedBytes(q)
		}
		require.LessOrEqual(t, n, contract.MaxQueuedBytesPerLane)
		require.True(t, l.More)
		if len(l.Open) == 0 {
			empty++
		}
		total += n
	}
	t.Logf("FIGURE sequencer load of 300 lanes x 40 open deliveries with 255-character IDs: %d bytes queued, %d lanes left to load later", total, empty)
	require.LessOrEqual(t, total, contract.MaxQueuedBytes)
	require.Positive(t, empty)
}
