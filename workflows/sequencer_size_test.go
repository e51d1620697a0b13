package workflows

import (
	"encoding/json"
	"fmt"
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
