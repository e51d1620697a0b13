package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// TestAHealthyLaneGoesOnAfterTerminateBehindTenThousandEvents is the volume
// case of lanes that never hold each other back: endpoint E (x.*)
// dead-letters sequence 1 of a correlation; endpoint A (every type) takes 1
// and then 10,100 events of type y.*, which E does not take, so the
// correlation's cursor stays at 1 behind E's dead letter the whole time.
// The first 100 go through the API; the other 10,000 are written to the
// ledger as A's deliveries leave them (store.EventInsertRouted and
// DeliveryDelivered, what the API and A's attempts run), so the test stays
// short. Then an operator presses Terminate on the sequencer. The fresh run
// loads a state bounded by the lanes, and A's next arrival is released at
// once, naming the last of the 10,101 as its previous sequence; E's dead
// letter, skipped, lets the cursor past all of it. Before the sequencer
// kept its lanes bounded (cc2f4fc), the fresh run loaded the first 10,000
// events from the cursor, took 10,102 for an arrival after a gap, and A's
// lane stopped until someone handled E's dead letter.
func TestAHealthyLaneGoesOnAfterTerminateBehindTenThousandEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 3 * time.Second})
	held := b.subscribe("x.*")
	healthy := b.subscribe()
	held.rcv.fault = func(contract.Envelope, int) string { return "400" }
	corr := b.id("acct-7")
	id := func(seq int64) string { return fmt.Sprintf("%s-%d", corr, seq) }

	b.publish(id(1), corr, 1, "x.created")
	b.waitDelivery(id(1), held.ID, contract.StateDeadLettered, 30*time.Second)
	const viaAPI, viaLedger = 100, 10_000
	for seq := int64(2); seq <= 1+viaAPI; seq++ {
		b.publish(id(seq), corr, seq, "y.updated")
	}
	b.waitDelivery(id(1+viaAPI), healthy.ID, contract.StateDelivered, 2*time.Minute)

	ctx := context.Background()
	last := int64(1 + viaAPI + viaLedger)
	for seq := int64(2 + viaAPI); seq <= last; seq++ {
		_, ok, err := b.store.EventInsertRouted(ctx, intake.Event{ID: id(seq), CorrelationID: corr, Sequence: seq, Type: "y.updated",
			Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{healthy.ID}, nil)

		require.NoError(t, err)
		require.True(t, ok)
		now := time.Now()
		require.NoError(t, b.store.DeliveryDelivered(ctx, id(seq), healthy.ID, corr, seq, store.Attempt{Attempt: 1, StartedAt: now, Outcome: "delivered"}, now))
	}
	healthy.rcv.mu.Lock()
	for seq := int64(2 + viaAPI); seq <= last; seq++ {
		healthy.rcv.applied[corr] = append(healthy.rcv.applied[corr], seq)
	}
	healthy.rcv.mu.Unlock()
	load, err := b.store.CorrelationLoadOf(ctx, corr, contract.MaxQueuedPerLane)
	require.NoError(t, err)
	require.EqualValues(t, 1, load.Next, "the cursor waits behind E's dead letter")

	b.terminate(contract.SequencerID(store.DefaultTenant, corr))
	b.publish(id(last+1), corr, last+1, "y.updated")
	b.waitDelivery(id(last+1), healthy.ID, contract.StateDelivered, 30*time.Second)
	require.Equal(t, last+1, healthy.rcv.appliedTo(corr)[len(healthy.rcv.appliedTo(corr))-1])

	st := b.sequencerState(corr)
	body, err := json.Marshal(st)
	require.NoError(t, err)
	t.Logf("the fresh sequencer's state with %d events past its cursor: %d bytes", last, len(body))
	require.Less(t, len(body), 16<<10, "bounded by the lanes")
	require.EqualValues(t, 1, st.Next)
	require.EqualValues(t, last+2, st.Frontier)

	// E's dead letter is skipped (an operator gave up on it): E's lane and
	// the correlation's cursor move past all of it.
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id(1)+"/skip", map[string]any{"endpoint_id": held.ID}, nil))
	waitFor(t, 60*time.Second, "the cursor past every event", func() bool {
		l, err := b.store.CorrelationLoadOf(ctx, corr, 0)
		return err == nil && l.Next == last+2
	})
	require.Empty(t, held.rcv.appliedTo(corr))
	held.rcv.requireClean(t)
	healthy.rcv.requireClean(t)
}
