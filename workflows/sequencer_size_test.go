package workflows

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

type discard struct{}

func (discard) Warn(string, ...any) {}

// TestSequencerStateStaysSmallBehindADeadLetter prints the size of a
// sequencer's state (its continue-as-new input, and what a fresh run's
// load carries) with 100,000 events held behind one lane's dead letter
// while the other lanes deliver every one: the state is bounded by the
// lanes, not the backlog. Two shapes: an application correlation (E takes
// every event and waits on its first; A and B deliver), and a hookflow.*
// correlation ("hookflow:" and an endpoint's ID, one event per dead letter,
// three subscribers, one of them dead-lettered). The bound asserted is far
// under Temporal's 2 MiB payload limit; the figure is printed.
func TestSequencerStateStaysSmallBehindADeadLetter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, correlation string
		held              string
		others            []string
	}{
		{"application", "acct-7", "ep_e", []string{"ep_a", "ep_b"}},
		{"operational", contract.OperationalCorrelation("ep_0123456789abcdef"), "ep_ops_held", []string{"ep_ops_1", "ep_ops_2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSequencer(discard{}, tc.correlation)
			// Lanes new to the correlation, as their first LoadLanes finds
			// them: no position yet.
			for _, ep := range append([]string{tc.held}, tc.others...) {
				s.lane(ep)
			}
			const events = 100_000
			for seq := int64(1); seq <= events; seq++ {
				id := fmt.Sprintf("%s-%020d", tc.correlation, seq)
				s.arrive(contract.Arrival{Sequence: seq, EventID: id, Endpoints: append([]string{tc.held}, tc.others...)})
				s.releases()
				for _, ep := range tc.others {
					_, _ = s.finished(contract.Done{Sequence: seq, EventID: id, Lanes: []contract.LaneDone{{Endpoint: ep}}})
				}
			}
			st := s.snapshot()
			i := slices.IndexFunc(st.Lanes, func(l contract.LaneState) bool { return l.Endpoint == tc.held })
			require.GreaterOrEqual(t, i, 0)
			held := st.Lanes[i]
			body, err := json.Marshal(SequencerInput{CorrelationID: tc.correlation, State: &st})
			require.NoError(t, err)
			t.Logf("sequencer state with %d events held behind %s's dead letter: %d bytes (%d lanes, %d queued in the held lane)",
				events, tc.held, len(body), len(st.Lanes), len(held.Queued))
			require.EqualValues(t, 1, held.InFlight, "the held lane waits on its first")
			require.Len(t, held.Queued, contract.MaxQueuedPerLane)
			require.True(t, held.Partial)
			require.EqualValues(t, events+1, st.Frontier)
			require.Less(t, len(body), 16<<10, "bounded by the lanes, far under Temporal's 2 MiB")
		})
	}
}

// logSizes prints the largest payload of each kind seen in a situation,
// and holds each to contract.MaxPayloadBytes.
func logSizes(t *testing.T, situation string, z sizes) {
	t.Helper()
	for _, kind := range slices.Sorted(maps.Keys(z)) {
		t.Logf("FIGURE %s: %s %d bytes", situation, kind, z[kind])
	}
	for _, kind := range slices.Sorted(maps.Keys(z)) {
		require.Less(t, z[kind], contract.MaxPayloadBytes, "%s: %s over the budget", situation, kind)
	}
}

// TestSequencerSizesStayUnderTheBudget (bounded by design): the largest
// sequencer state (its continue-as-new input), ledger load (a fresh run's
// LoadSequencer, a LoadLanes), update answer, release signal, event input
// and Deliver input seen while real sequencer state runs through the
// situations that once passed Temporal's 2 MiB blob limit stay under
// contract.MaxPayloadBytes, and every lane applies every event in order.
// The figures are printed (go test -v).
func TestSequencerSizesStayUnderTheBudget(t *testing.T) {
	t.Parallel()
	t.Run("250 lanes with 255-character IDs held by a gap, then a Terminate", func(t *testing.T) {
		t.Parallel()
		const corr, events = "gap-250", 100
		f, z := newFakeLedger(), sizes{}
		var eps []string
		for i := range contract.MaxSubscribersCeiling {
			eps = append(eps, long("ep_", i))
		}
		s := freshRun(t, corr, f, z)
		for seq := int64(2); seq <= events; seq++ {
			require.Empty(t, arriveOn(t, s, f, z, seq, long("evt_", int(seq)), eps), "held behind the missing 1")
		}
		z.note(t, "SequencerInput", SequencerInput{CorrelationID: corr, State: ptr(s.snapshot())})
		s = freshRun(t, corr, f, z)
		drainAll(t, s, f, z, arriveOn(t, s, f, z, 1, long("evt_", 1), eps), nil)
		for _, ep := range eps {
			require.Len(t, f.applied[ep], events, "every event applied once, in order")
			require.True(t, slices.IsSorted(f.applied[ep]))
		}
		logSizes(t, "250 lanes x 255-char IDs behind a gap", z)
	})
	t.Run("20,000 endpoints ever routed", func(t *testing.T) {
		t.Parallel()
		const corr, endpoints = "many-endpoints", 20_000
		f, z := newFakeLedger(), sizes{}
		s := freshRun(t, corr, f, z)
		for i := 1; i <= endpoints; i++ {
			ep := fmt.Sprintf("ep_%024d", i)
			drainAll(t, s, f, z, arriveOn(t, s, f, z, int64(i), fmt.Sprintf("evt_%024d", i), []string{ep}), nil)
			require.Equal(t, []int64{int64(i)}, f.applied[ep])
		}
		st := s.snapshot()
		z.note(t, "SequencerInput", SequencerInput{CorrelationID: corr, State: &st})
		require.LessOrEqual(t, len(st.Lanes), contract.MaxIdleLanes, "idle lanes past the cap are dropped")
		logSizes(t, "20,000 endpoints ever routed", z)
	})
	t.Run("100,000 skips in one lane", func(t *testing.T) {
		t.Parallel()
		const corr, skips = "deleted-backlog", 100_000
		f, z := newFakeLedger(), sizes{}
		s := freshRun(t, corr, f, z)
		deleted := func(ep string, _ int64) bool { return ep == "ep_deleted" }
		for seq := int64(1); seq <= skips; seq++ {
			drainAll(t, s, f, z, arriveOn(t, s, f, z, seq, fmt.Sprintf("evt_%024d", seq), []string{"ep_a", "ep_deleted"}), deleted)
		}
		// The lane's next delivery names the newest skips, and its receiver
		// (cursor 0) applies it.
		drainAll(t, s, f, z, arriveOn(t, s, f, z, skips+1, "evt_last", []string{"ep_deleted"}), nil)
		require.Equal(t, []int64{skips + 1}, f.applied["ep_deleted"])
		require.Len(t, f.applied["ep_a"], skips)
		logSizes(t, "100,000 skips in one lane", z)
	})
	t.Run("1,000 endpoints with 255-character IDs held by a gap, then a Terminate", func(t *testing.T) {
		t.Parallel()
		const corr, endpoints, events = "wide", 1000, 41
		f, z := newFakeLedger(), sizes{}
		var eps []string
		for i := range endpoints {
			eps = append(eps, long("ep_", i))
		}
		routed := func(seq int64) []string {
			from := int(seq) * contract.MaxSubscribersCeiling % endpoints
			return eps[from : from+contract.MaxSubscribersCeiling]
		}
		s := freshRun(t, corr, f, z)
		for seq := int64(2); seq <= events; seq++ {
			require.Empty(t, arriveOn(t, s, f, z, seq, long("evt_", int(seq)), routed(seq)))
		}
		z.note(t, "SequencerInput", SequencerInput{CorrelationID: corr, State: ptr(s.snapshot())})
		s = freshRun(t, corr, f, z)
		drainAll(t, s, f, z, arriveOn(t, s, f, z, 1, long("evt_", 1), routed(1)), nil)
		for _, ep := range eps {
			require.Len(t, f.applied[ep], events/4+map[bool]int{true: 1}[slices.Contains(routed(1), ep)], "lane %.12s…", ep)
			require.True(t, slices.IsSorted(f.applied[ep]))
		}
		logSizes(t, "1,000 endpoints x 255-char IDs behind a gap", z)
	})
}
