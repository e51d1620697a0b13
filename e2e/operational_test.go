package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// opRecorder keeps, per endpoint, the operational envelopes its receiver
// was sent (every request, repeats included).
type opRecorder struct {
	mu   sync.Mutex
	seen map[string][]contract.Envelope
}

func (o *opRecorder) record(endpoint string, ev contract.Envelope) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[endpoint] = append(o.seen[endpoint], ev)
}

func (o *opRecorder) of(endpoint string) []contract.Envelope {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]contract.Envelope(nil), o.seen[endpoint]...)
}

// TestOperationalDeadLetterEvents (issue 24 item 5): operators' endpoints
// subscribed to hookflow.* receive, signed, in order and exactly once, the
// hookflow.dead_letter.created events of an endpoint whose receiver rejects
// its events, one per dead letter, with correlation = that endpoint's ID
// and sequences 1, 2, 3. An operator's endpoint that itself dead-letters
// is told nothing about itself (the other operator is); an endpoint
// subscribed to every type is sent none; a producer cannot post one.
func TestOperationalDeadLetterEvents(t *testing.T) {
	b := setup(t, options{window: 5 * time.Second})
	rec := &opRecorder{seen: map[string][]contract.Envelope{}}
	watch := func(s subscriber, reject func(ev contract.Envelope) bool) {
		s.rcv.fault = func(ev contract.Envelope, _ int) string {
			if contract.Operational(ev.Type) {
				rec.record(s.ID, ev)
			}
			if reject(ev) {
				return "400"
			}
			return ""
		}
	}
	isOrder := func(ev contract.Envelope) bool { return strings.HasPrefix(ev.Type, "order.") }
	never := func(contract.Envelope) bool { return false }
	failing := b.subscribe("order.*")
	watch(failing, isOrder)
	opA := b.subscribe("hookflow.*", "order.*") // an operator's endpoint that rejects the orders it also takes
	watch(opA, isOrder)
	opB := b.subscribe("hookflow.*")
	watch(opB, never)
	every := b.subscribe() // every type: a producer's receiver, never asked for hookflow's events
	watch(every, never)

	const n = 3
	var orders []string
	for i := range n {
		corr := b.id(fmt.Sprintf("order-%d", i))
		id := corr + "-1"
		orders = append(orders, id)
		ev := b.publish(id, corr, 1, "order.created")
		require.ElementsMatch(t, []string{failing.ID, opA.ID, every.ID}, ev.Endpoints())
	}
	for _, id := range orders {
		b.waitDelivery(id, failing.ID, contract.StateDeadLettered, 30*time.Second)
		b.waitDelivery(id, opA.ID, contract.StateDeadLettered, 30*time.Second)
		b.waitDelivery(id, every.ID, contract.StateDelivered, 30*time.Second)
	}
	want := []int64{1, 2, 3}
	waitFor(t, 60*time.Second, "every operational event delivered", func() bool {
		return fmt.Sprint(opA.rcv.appliedTo(failing.ID)) == fmt.Sprint(want) &&
			fmt.Sprint(opB.rcv.appliedTo(failing.ID)) == fmt.Sprint(want) &&
			fmt.Sprint(opB.rcv.appliedTo(opA.ID)) == fmt.Sprint(want)
	})
	// Nothing more comes: every event's dead letter published once.
	time.Sleep(3 * time.Second)

	for _, s := range []subscriber{failing, opA, opB, every} {
		s.rcv.requireClean(t) // signed with the endpoint's secret, in order, applied once
	}
	require.Empty(t, opA.rcv.appliedTo(opA.ID), "never told about itself")
	require.Empty(t, rec.of(every.ID), "every type is not hookflow's types")
	require.Empty(t, rec.of(failing.ID))

	checkOps := func(to subscriber, about subscriber) {
		t.Helper()
		var got []contract.Envelope
		for _, ev := range rec.of(to.ID) {
			if ev.CorrelationID == about.ID {
				got = append(got, ev)
			}
		}
		require.Len(t, got, n, "each sent once to %s", to.ID)
		var events []string
		for i, ev := range got {
			seq := int64(i + 1)
			require.Equal(t, fmt.Sprintf("hookflow-%s-%d", about.ID, seq), ev.ID)
			require.Equal(t, contract.OpDeadLetterCreated, ev.Type)
			require.Equal(t, seq, ev.Sequence)
			require.Equal(t, seq-1, ev.PreviousSequence)
			var data struct {
				EndpointID    string `json:"endpoint_id"`
				EventID       string `json:"event_id"`
				EventType     string `json:"event_type"`
				CorrelationID string `json:"correlation_id"`
				Sequence      int64  `json:"sequence"`
				Generation    int32  `json:"generation"`
				Reason        string `json:"reason"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			require.Equal(t, about.ID, data.EndpointID)
			require.Equal(t, "order.created", data.EventType)
			require.EqualValues(t, 1, data.Sequence)
			require.EqualValues(t, 1, data.Generation)
			require.Equal(t, strings.TrimSuffix(data.EventID, "-1"), data.CorrelationID)
			require.Contains(t, data.Reason, "400")
			events = append(events, data.EventID)
		}
		require.ElementsMatch(t, orders, events, "one per dead letter")
	}
	checkOps(opA, failing)
	checkOps(opB, failing)
	checkOps(opB, opA)

	// The events are the ledger's like any: delivered, and a producer
	// cannot post one.
	ev := b.fanned(fmt.Sprintf("hookflow-%s-1", failing.ID))
	require.Equal(t, contract.StateDelivered, ev.State)
	require.ElementsMatch(t, []string{opA.ID, opB.ID}, ev.Endpoints())
	var p struct {
		Field string `json:"field"`
	}
	code := b.call("POST", "/v1/events", map[string]any{
		"id": b.id("forged"), "correlation_id": b.id("forged"), "sequence": 1, "type": contract.OpDeadLetterCreated, "data": map[string]any{},
	}, &p)
	require.Equal(t, 422, code)
	require.Equal(t, "type", p.Field)
}
