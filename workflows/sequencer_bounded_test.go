package workflows

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// idleLanes makes n lanes, each delivered one event after lastly, so that
// every one finished after the lanes before it.
func idleLanes(t *testing.T, s *sequencer, f *fakeLedger, z sizes, from int64, n int) int64 {
	seq := from
	for i := range n {
		ep := fmt.Sprintf("ep_other_%03d", i)
		drainAll(t, s, f, z, arriveOn(t, s, f, z, seq, fmt.Sprintf("evt_%d", seq), []string{ep}), nil)
		seq++
	}
	return seq
}

// TestIdleLaneDroppedThenReloadedKeepsItsPosition: a lane dropped as idle
// (more than contract.MaxIdleLanes idle lanes finished after it) takes an
// event that arrives for it with the position the ledger has: its
// previous sequence, its skipped one and the voided sequence between, as
// if it had never left the state; and its receiver applies the event.
func TestIdleLaneDroppedThenReloadedKeepsItsPosition(t *testing.T) {
	t.Parallel()
	f, z := newFakeLedger(), sizes{}
	s := freshRun(t, "reload", f, z)
	drainAll(t, s, f, z, arriveOn(t, s, f, z, 1, "evt_1", []string{"ep_x"}), nil)
	drainAll(t, s, f, z, arriveOn(t, s, f, z, 2, "evt_2", []string{"ep_x"}), func(ep string, seq int64) bool { return seq == 2 })
	f.void(3)
	s.addVoided([]int64{3})
	s.addArrived(contract.SequenceRange{From: 3, To: 3})
	next := idleLanes(t, s, f, z, 4, contract.MaxIdleLanes+1)
	_, held := s.lanes["ep_x"]
	require.False(t, held, "the lane that finished least lately is dropped")
	require.LessOrEqual(t, len(s.lanes), contract.MaxIdleLanes)

	hs := arriveOn(t, s, f, z, next, "evt_x", []string{"ep_x"})
	require.Equal(t, []contract.Handoff{{EventID: "evt_x", Release: contract.Release{Sequence: next,
		Lanes: []contract.LaneRelease{{Endpoint: "ep_x", Previous: 1, Skipped: []int64{2, 3}}}}}}, hs,
		"the release names the ledger's previous sequence, the lane's skip and the voided sequence")
	drainAll(t, s, f, z, hs, nil)
	require.Equal(t, []int64{1, next}, f.applied["ep_x"])
}

// TestLaneDroppedWhileItsEventsWaitInTheLedgerReleasesThemInOrder: a lane
// dropped as idle while a gap holds the correlation, which then takes
// several events, loads them with its position and releases them in
// order once the gap fills.
func TestLaneDroppedWhileItsEventsWaitInTheLedgerReleasesThemInOrder(t *testing.T) {
	t.Parallel()
	f, z := newFakeLedger(), sizes{}
	s := freshRun(t, "reload-gap", f, z)
	drainAll(t, s, f, z, arriveOn(t, s, f, z, 1, "evt_1", []string{"ep_x"}), nil)
	next := idleLanes(t, s, f, z, 2, contract.MaxIdleLanes+1)
	_, held := s.lanes["ep_x"]
	require.False(t, held)
	gap := next
	for seq := gap + 1; seq <= gap+40; seq++ {
		require.Empty(t, arriveOn(t, s, f, z, seq, fmt.Sprintf("evt_%d", seq), []string{"ep_x"}))
	}
	drainAll(t, s, f, z, arriveOn(t, s, f, z, gap, fmt.Sprintf("evt_%d", gap), []string{"ep_y"}), nil)
	require.Len(t, f.applied["ep_x"], 41)
	require.Equal(t, gap+40, f.applied["ep_x"][40])
}

// TestVoidedSequencesStayBoundedBehindALaneThatNeverMoves: a lane whose
// previous sequence never moves (a deleted endpoint's, its backlog
// skipped) does not keep every voided sequence in the state: at most
// contract.MaxVoidedKept stay, however many an operator voids.
func TestVoidedSequencesStayBoundedBehindALaneThatNeverMoves(t *testing.T) {
	t.Parallel()
	f, z := newFakeLedger(), sizes{}
	s := freshRun(t, "voids", f, z)
	drainAll(t, s, f, z, arriveOn(t, s, f, z, 1, "evt_1", []string{"ep_deleted", "ep_a"}), func(ep string, _ int64) bool { return ep == "ep_deleted" })
	seq := int64(2)
	for range 2000 {
		f.void(seq)
		s.addVoided([]int64{seq})
		s.addArrived(contract.SequenceRange{From: seq, To: seq})
		drainAll(t, s, f, z, arriveOn(t, s, f, z, seq+1, fmt.Sprintf("evt_%d", seq+1), []string{"ep_a"}), nil)
		seq += 2
	}
	st := s.snapshot()
	require.LessOrEqual(t, len(st.Voided), contract.MaxVoidedKept)
	require.Len(t, f.applied["ep_a"], 2001)
}
