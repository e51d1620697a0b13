package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/webhook"
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

// TestOperationalDeadLetterEvents: operators' endpoints
// subscribed to hookflow.* receive, signed, in order and exactly once, the
// hookflow.dead_letter.created events of an endpoint whose receiver rejects
// its events, one per dead letter, with correlation "hookflow:" and that
// endpoint's ID and sequences 1, 2, 3. An operator's endpoint that itself dead-letters
// is told nothing about itself (the other operator is); an endpoint
// subscribed to every type is sent none; a producer cannot post one.
//
// The dead letters come of permanent rejections (400), which no window
// decides: the window is the default 5 minutes and the HTTP timeout a
// minute, so a loaded machine neither dead-letters an operational event
// nor cuts an attempt the receiver answers (which would send it again and
// break the count of requests below), and the waits are for outcomes, with
// minutes to spare.
func TestOperationalDeadLetterEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, options{timeout: time.Minute})
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
		b.waitDelivery(id, failing.ID, contract.StateDeadLettered, 5*time.Minute)
		b.waitDelivery(id, opA.ID, contract.StateDeadLettered, 5*time.Minute)
		b.waitDelivery(id, every.ID, contract.StateDelivered, 5*time.Minute)
	}
	want := []int64{1, 2, 3}
	waitFor(t, 5*time.Minute, "every operational event delivered", func() bool {
		return fmt.Sprint(opA.rcv.appliedTo(contract.OperationalCorrelation(failing.ID))) == fmt.Sprint(want) &&
			fmt.Sprint(opB.rcv.appliedTo(contract.OperationalCorrelation(failing.ID))) == fmt.Sprint(want) &&
			fmt.Sprint(opB.rcv.appliedTo(contract.OperationalCorrelation(opA.ID))) == fmt.Sprint(want)
	})
	// Nothing more comes: every event's dead letter published once.
	time.Sleep(3 * time.Second)

	for _, s := range []subscriber{failing, opA, opB, every} {
		s.rcv.requireClean(t) // signed with the endpoint's secret, in order, applied once
	}
	require.Empty(t, opA.rcv.appliedTo(contract.OperationalCorrelation(opA.ID)), "never told about itself")
	require.Empty(t, rec.of(every.ID), "every type is not hookflow's types")
	require.Empty(t, rec.of(failing.ID))

	checkOps := func(to subscriber, about subscriber) {
		t.Helper()
		var got []contract.Envelope
		for _, ev := range rec.of(to.ID) {
			if ev.CorrelationID == contract.OperationalCorrelation(about.ID) {
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

// TestOperationalCorrelationCannotBeTaken: an endpoint
// whose ID is not of the generated form (hookflow dev's ep_dev_receiver,
// here one made the same way) has its operational events on correlation
// "hookflow:<id>", which no producer may post to. A producer that posts
// on the endpoint's bare ID takes nothing of hookflow's: the endpoint's
// dead letter is written and its hookflow.dead_letter.created event
// reaches the operator's endpoint as sequence 1. Before, the producer's
// sequence 1 made the event's insert fail, which rolled back the dead
// letter's write, again at every try: the delivery never dead-lettered.
// The reserved forms are refused in any case.
func TestOperationalCorrelationCannotBeTaken(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Second})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	rcv.secret = secret
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if strings.HasPrefix(ev.Type, "order.") {
			return "400"
		}
		return ""
	}
	named, err := b.store.EndpointInsert(ctx, b.id("ep_named"), rcv.URL(), secret, []string{"order.*"})
	require.NoError(t, err)
	op := b.subscribe("hookflow.*")

	// The producer takes sequences 1 and 2 of the endpoint's bare ID.
	for seq := int64(1); seq <= 2; seq++ {
		b.publish(fmt.Sprintf("%s-taken-%d", named.ID, seq), named.ID, seq, "note.created")
	}
	rejected := b.id("order-1")
	b.publish(rejected, b.id("order"), 1, "order.created")
	b.waitDelivery(rejected, named.ID, contract.StateDeadLettered, 60*time.Second)
	opCorr := contract.OperationalCorrelation(named.ID)
	waitFor(t, 60*time.Second, "the dead letter's event at the operator", func() bool {
		return fmt.Sprint(op.rcv.appliedTo(opCorr)) == "[1]"
	})
	op.rcv.requireClean(t)
	var ev struct {
		Type          string `json:"type"`
		CorrelationID string `json:"correlation_id"`
		Sequence      int64  `json:"sequence"`
	}
	require.Equal(t, 200, b.call("GET", "/v1/events/"+fmt.Sprintf("hookflow-%s-1", named.ID), nil, &ev))
	require.Equal(t, contract.OpDeadLetterCreated, ev.Type)
	require.Equal(t, opCorr, ev.CorrelationID)
	require.EqualValues(t, 1, ev.Sequence)

	var p struct {
		Type  string `json:"type"`
		Field string `json:"field"`
	}
	for field, v := range map[string]string{
		"type":           "Hookflow.endpoint.disabled",
		"id":             "HOOKFLOW-" + named.ID + "-2",
		"correlation_id": "HOOKFLOW:" + named.ID,
	} {
		body := map[string]any{"id": b.id("forged-" + field), "correlation_id": b.id("forged"), "sequence": 1, "type": "order.created", "data": map[string]any{}}
		body[field] = v
		require.Equal(t, 422, b.call("POST", "/v1/events", body, &p), v)
		require.Equal(t, field, p.Field, v)
		require.True(t, strings.HasSuffix(p.Type, "/reserved-field"), p.Type)
	}
}
