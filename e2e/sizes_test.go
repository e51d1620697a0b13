package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestSequencerAtTheSubscriberCeilingSurvivesATerminate: 250 subscribers
// (the subscriber ceiling) take events with 255-character IDs, 2 to 44,
// held behind a missing 1; an operator presses Terminate on the
// correlation's sequencer; then 1 is posted. The fresh sequencer run loads
// the correlation from the ledger within its budget (it once passed
// Temporal's 2 MiB blob limit there, and its first workflow task failed
// for ever), and every lane applies every event once, in order.
//
// Disabled: its two runs so far (44 and 10 events; race detector, a
// loaded machine) never
// got past the event workflows' starts: every ExecuteWorkflow of a
// 250-lane event with a 255-character ID timed out at the API's 3 s and
// then in the queued sweep for 15 minutes (the sequencer answered the
// arrivals), so it shows nothing of the sequencer yet. Why the starts
// time out is to be found before it is enabled.
func TestSequencerAtTheSubscriberCeilingSurvivesATerminate(t *testing.T) {
	t.Skip("disabled: event workflow starts at 250 lanes with 255-character IDs timed out in both runs; see the comment above")
	b := setup(t, options{maxSubscribers: contract.MaxSubscribersCeiling})
	typ := "ceiling." + b.prefix
	subs := make([]subscriber, 0, contract.MaxSubscribersCeiling)
	for range contract.MaxSubscribersCeiling {
		subs = append(subs, b.subscribe(typ))
	}
	corr := b.id("ceiling")
	key := func(seq int64) string { return fmt.Sprintf("%s-%0*d", corr, 255-len(corr)-1, seq) }
	const last = 44
	for seq := int64(2); seq <= last; seq++ {
		require.Len(t, b.publish(key(seq), corr, seq, typ).Deliveries, contract.MaxSubscribersCeiling)
	}
	waitFor(t, 2*time.Minute, "the sequencer to hold every arrival", func() bool {
		st := b.sequencerState(corr)
		return len(st.Arrived) > 0 && st.Arrived[0].To == last
	})
	b.terminate(contract.SequencerID(store.DefaultTenant, corr))
	b.publish(key(1), corr, 1, typ)
	want := make([]int64, 0, last)
	for seq := int64(1); seq <= last; seq++ {
		want = append(want, seq)
	}
	waitFor(t, 15*time.Minute, "every lane to apply 1 to 44", func() bool {
		for _, s := range subs {
			if len(s.rcv.appliedTo(corr)) < last {
				return false
			}
		}
		return true
	})
	for _, s := range subs {
		require.Equal(t, want, s.rcv.appliedTo(corr), "endpoint %s", s.ID)
		s.rcv.requireClean(t)
	}
}
