package activities_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// TestDeliverWaitsForTheEarlierOpenDeliveryOfItsLane: 2 is released to
// ep_1 while 1, routed there before it, is still waiting (a sequencer
// behind the ledger released it, or an operator sent the release by hand
// from the Web UI). The attempt sends nothing, records nothing and leaves
// 2 waiting; it answers as a throttle does (the workflow waits on a timer
// that spends no window and makes the same attempt again) and asks the
// sequencer to resync. Once 1 is delivered, the same attempt sends 2.
func TestDeliverWaitsForTheEarlierOpenDeliveryOfItsLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu  sync.Mutex
		got []int64
	)
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, r *http.Request) {
		var env contract.Envelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		mu.Lock()
		got = append(got, env.Sequence)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	_, ok, err := b.st.EventInsertRouted(ctx, intake.Event{
		ID: "evt_2", CorrelationID: "order-1", Sequence: 2, EndpointID: "ep_1",
		Type: "order.updated", Data: []byte(`{"n":2}`), PayloadHash: []byte{2},
	}, []string{"ep_1"}, nil)

	require.NoError(t, err)
	require.True(t, ok)
	first := b.in
	b.in.EventID, b.in.Sequence = "evt_2", 2

	res, err := b.deliver(t)
	require.NoError(t, err)
	require.Positive(t, res.Throttled)
	require.Equal(t, contract.DeliverResult{Throttled: res.Throttled, InFlightFull: true, Attempt: 1}, res)
	require.Empty(t, got, "nothing is sent while 1 is open in the lane")
	attempts, err := b.st.AttemptsList(ctx, "evt_2", "ep_1")
	require.NoError(t, err)
	require.Empty(t, attempts, "nothing was sent: nothing is recorded")
	ev := b.event(t)
	require.Equal(t, contract.StateWaiting, ev.Deliveries[0].State)
	require.Nil(t, ev.Deliveries[0].ReleasedAt)
	require.Equal(t, []string{"order-1"}, b.seq.resyncs())
	require.Empty(t, b.seq.handedOver())

	// 1 is delivered (its own attempt), and 2's attempt made again goes.
	b.in = first
	res, err = b.deliver(t)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	b.in.EventID, b.in.Sequence, b.in.Previous = "evt_2", 2, 1
	res, err = b.deliver(t)
	require.NoError(t, err)
	require.Equal(t, contract.DeliverResult{StatusCode: http.StatusOK, Attempt: 1}, res)
	require.Equal(t, []int64{1, 2}, got)
	require.Equal(t, contract.StateDelivered, b.event(t).State)
	require.Equal(t, []string{"order-1"}, b.seq.resyncs(), "a lane in order asks for no resync")
}

// TestDeliverHeldBehindADeadLetterLooksAgainLater: the earlier delivery
// waits on its dead letter, which only an operator ends: the held attempt
// looks again after longer than behind one on its way.
func TestDeliverHeldBehindADeadLetterLooksAgainLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	_, ok, err := b.st.EventInsertRouted(ctx, intake.Event{
		ID: "evt_2", CorrelationID: "order-1", Sequence: 2, EndpointID: "ep_1",
		Type: "order.updated", Data: []byte(`{"n":2}`), PayloadHash: []byte{2},
	}, []string{"ep_1"}, nil)

	require.NoError(t, err)
	require.True(t, ok)
	b.in.EventID, b.in.Sequence = "evt_2", 2
	behindWaiting, err := b.deliver(t)
	require.NoError(t, err)

	_, err = b.st.DeadLetterUpsert(ctx, store.DeadLetter{EventID: "evt_1", CorrelationID: "order-1", Sequence: 1, EndpointID: "ep_1",
		Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}, "w/evt_1")
	require.NoError(t, err)
	behindDeadLetter, err := b.deliver(t)
	require.NoError(t, err)
	require.Less(t, behindWaiting.Throttled, 10*time.Second)
	require.GreaterOrEqual(t, behindDeadLetter.Throttled, time.Minute)
	require.True(t, behindDeadLetter.InFlightFull)
}
