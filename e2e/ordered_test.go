package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestOrderedExactlyOnce posts 20 correlations × 25 events in shuffled order,
// with duplicate posts, through transient 503s and a connection dropped after
// the receiver committed, and checks the receiver's ledger: every event
// applied once, each correlation in order 1..25, every signature valid.
// Every wait is for an outcome, with minutes to spare: how long the 500
// deliveries take is the machine's, and no assertion depends on it.
func TestOrderedExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{workers: 2})
	rcv := newLedgerReceiver(t)
	// The circuit breaker is kept out of the way (TestCircuit* hold it):
	// every faulted attempt is an event's first, and a probe is a held
	// head's first attempt, so a probe that meets a fault reopens the
	// circuit for longer each time, until the lanes' windows run out and
	// they are dead-lettered, which is not what this test is about.
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "circuit_failure_threshold": 1000})
	rcv.secret = ep.Secret
	rcv.fault = func(ev contract.Envelope, n int) string {
		switch {
		case ev.Sequence%7 == 3 && n == 1:
			return "503"
		case ev.Sequence%11 == 5 && n == 1:
			return "drop-after-commit"
		}
		return ""
	}

	const correlations, perCorrelation = 20, 25
	type post struct {
		id, corr string
		seq      int64
	}
	var posts []post
	for c := 0; c < correlations; c++ {
		corr := b.id(fmt.Sprintf("order-%d", c))
		for s := int64(1); s <= perCorrelation; s++ {
			posts = append(posts, post{fmt.Sprintf("%s-%d", corr, s), corr, s})
		}
	}
	rng := rand.New(rand.NewPCG(42, 7))
	rng.Shuffle(len(posts), func(i, j int) { posts[i], posts[j] = posts[j], posts[i] })
	// One in ten posted twice, the duplicate later in the stream.
	all := append([]post(nil), posts...)
	for i := 0; i < len(posts); i += 10 {
		all = append(all, posts[i])
	}

	var wg sync.WaitGroup
	codes := make([]int, len(all))
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := all[i]
				codes[i], _ = b.postEvent(p.id, p.corr, p.seq, ep.ID, map[string]any{"amount": p.seq})
			}
		}()
	}
	for i := range all {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, code := range codes {
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, code, "post %d (%s)", i, all[i].id)
	}

	waitFor(t, 15*time.Minute, "every event delivered", func() bool {
		applied, _ := rcv.snapshot()
		n := 0
		for _, seqs := range applied {
			n += len(seqs)
		}
		return n == correlations*perCorrelation
	})
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Len(t, applied, correlations)
	for corr, seqs := range applied {
		want := make([]int64, perCorrelation)
		for i := range want {
			want[i] = int64(i + 1)
		}
		require.Equal(t, want, seqs, "correlation %s", corr)
	}
	// The sender's ledger agrees, and a dropped ack was retried and answered
	// "already processed" rather than applied twice.
	for _, p := range posts[:50] {
		waitFor(t, 5*time.Minute, "ledger says delivered", func() bool { return b.eventState(p.id).State == contract.StateDelivered })
	}
	dropped := fmt.Sprintf("%s-%d", b.id("order-0"), 5)
	require.GreaterOrEqual(t, rcv.requestsFor(dropped), 2, "a dropped ack must be retried")

	// The ledger reports every correlation's cursor past its last event.
	corr := b.correlation(b.id("order-3"))
	require.EqualValues(t, perCorrelation+1, corr.NextSequence)
	require.Empty(t, corr.only(t).Parked)

	// The Web UI's filter works: visibility finds the events by CorrelationId.
	waitFor(t, 5*time.Minute, "visibility lists the correlation's events", func() bool {
		resp, err := b.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("CorrelationId = '%s' AND WorkflowType = 'EventWorkflow' AND DeliveryState = 'delivered'", b.id("order-3")),
		})
		return err == nil && len(resp.Executions) == perCorrelation
	})
}

// TestSameKeySemantics checks the idempotency contract of POST /v1/events.
func TestSameKeySemantics(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	corr := b.id("acct")

	code, st := b.postEvent(b.id("k1"), corr, 1, ep.ID, map[string]any{"amount": 10, "note": "x"})
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, contract.StateWaiting, st.State)

	// Same content, keys in another order: 200 with the current state.
	var again map[string]any
	code = b.call(http.MethodPost, "/v1/events", map[string]any{
		"data": map[string]any{"note": "x", "amount": 10}, "type": "order.updated", "endpoint_id": ep.ID,
		"sequence": 1, "correlation_id": corr, "id": b.id("k1"),
	}, &again)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, b.id("k1"), again["id"])

	// Same key, other content: 422.
	code, _ = b.postEvent(b.id("k1"), corr, 1, ep.ID, map[string]any{"amount": 11})
	require.Equal(t, http.StatusUnprocessableEntity, code)

	// Another key claiming sequence 1: 409 naming the high-water mark.
	waitFor(t, 30*time.Second, "first event delivered", func() bool { return b.eventState(b.id("k1")).State == contract.StateDelivered })
	var prob map[string]any
	code = b.call(http.MethodPost, "/v1/events", map[string]any{
		"id": b.id("k2"), "correlation_id": corr, "sequence": 1, "endpoint_id": ep.ID, "type": "t", "data": map[string]any{},
	}, &prob)
	require.Equal(t, http.StatusConflict, code)
	require.EqualValues(t, 1, prob["high_water_mark"])
	require.EqualValues(t, 2, prob["next_sequence"])

	// Concurrent identical posts of a new key: one 202, the rest 200, and one
	// application at the receiver.
	var wg sync.WaitGroup
	results := make([]int, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = b.postEvent(b.id("k3"), corr, 2, ep.ID, map[string]any{"amount": 5})
		}()
	}
	wg.Wait()
	sort.Ints(results)
	require.Equal(t, http.StatusOK, results[0])
	require.Equal(t, http.StatusAccepted, results[9])
	require.Equal(t, http.StatusOK, results[8])
	waitFor(t, 30*time.Second, "k3 delivered", func() bool { return b.eventState(b.id("k3")).State == contract.StateDelivered })
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
}
