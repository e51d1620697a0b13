package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// arrivals records when a receiver took each request it did not refuse.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) add() { a.mu.Lock(); a.at = append(a.at, time.Now()); a.mu.Unlock() }

// since are the arrivals from t on, in order.
func (a *arrivals) since(t time.Time) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Time
	for _, at := range a.at {
		if !at.Before(t) {
			out = append(out, at)
		}
	}
	slices.SortFunc(out, func(x, y time.Time) int { return x.Compare(y) })
	return out
}

// busiestSecond is the most arrivals within any one second.
func busiestSecond(at []time.Time) int {
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// TestCircuitCloseKeepsTheRateLimit: heads of an endpoint limited to one
// delivery a second reserve their send slots, one a second; the receiver
// fails the first of them to send, which opens the circuit (threshold 1),
// and every later head, at its slot, finds the circuit open and waits on
// it. When the receiver is back and the operator enables the endpoint
// (closing the circuit, which wakes every held lane at once), each head
// takes a fresh slot: the receiver, just back, gets them at the endpoint's
// rate, not in one burst of every head that once held a slot.
//
// Both halves are read so that a loaded machine cannot decide them: the
// close waits until the ledger's clock is past every slot reserved (so
// each head has found the circuit open at its slot, or reserved afresh),
// not for a time of the test's; and the rate is read from the slots, not
// from how close together a slow machine happened to send: every send
// after the close comes no sooner than its slot, so the k-th of them comes
// at least k-1 seconds after the close (one may go in a slot it held from
// before the close, whose timer fired within lateSlot), and the ledger's
// next slot shows a fresh slot taken for all of them but that one. Woken
// heads that went in the slots they held before the close would all come
// at once, and take no slot.
func TestCircuitCloseKeepsTheRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 30 * time.Minute})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	var up atomic.Bool
	var first string
	var got arrivals
	rcv.fault = func(ev contract.Envelope, _ int) string {
		// The first head goes through, so the others reserve their slots
		// before the circuit opens: the second head's failure opens it.
		if up.Load() || ev.CorrelationID == first {
			got.add()
			return ""
		}
		return "503"
	}
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "rate_limit": 1, "circuit_failure_threshold": 1})
	rcv.secret = ep.Secret
	const n = 10
	first = b.id("cr-0")
	corrs := b.postLanes("cr", n, 1, ep.ID)

	// nextSlot is the endpoint's next free send slot, and whether it is
	// more than 3 s past on the ledger's clock.
	nextSlot := func() (time.Time, bool) {
		var next time.Time
		var past bool
		err := b.store.Pool().QueryRow(ctx, `SELECT next_slot, next_slot < clock_timestamp() - interval '3 seconds' FROM endpoint_rate_slots WHERE endpoint_id = $1`, ep.ID).Scan(&next, &past)
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, false
		}
		require.NoError(t, err)
		return next, past
	}
	waitFor(t, 5*time.Minute, "the circuit open and every reserved slot seconds past", func() bool {
		c, err := b.store.CircuitGet(ctx, ep.ID)
		require.NoError(t, err)
		_, past := nextSlot()
		return c.Open() && past
	})
	up.Store(true)
	back := time.Now()
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"disabled": false}, nil))
	requireDrained(t, rcv, corrs, 1, 5*time.Minute)

	after := got.since(back)
	require.NotEmpty(t, after)
	span := after[len(after)-1].Sub(after[0])
	busiest := busiestSecond(after)
	t.Logf("FIGURE circuit close under rate_limit 1/s: %d heads sent in %.2f s after the close, at most %d within one second",
		len(after), span.Seconds(), busiest)
	// The ledger's clock and the receiver's are the machine's one clock;
	// 50 ms allow for their readings' rounding.
	for k := 1; k < len(after); k++ {
		require.False(t, after[k].Before(back.Add(time.Duration(k-1)*time.Second-50*time.Millisecond)),
			"send %d came %s after the close, before its slot: the woken heads went in a burst past the rate limit: %v", k+1, after[k].Sub(back), after)
	}
	next, _ := nextSlot()
	require.False(t, next.Before(back.Add(time.Duration(len(after)-1)*time.Second-50*time.Millisecond)),
		"the ledger's next slot %s after the close: the %d heads sent did not each take a fresh slot", next.Sub(back), len(after))
}

// TestRateLimitChangeHoldsAtOnce: heads waiting their turn under a rate of
// one delivery in 1,000 s (the slowest allowed) would sleep for 1,000 s
// and 2,000 s; a PATCH to 50/s gives up the old rate's slots and wakes
// them, and they are delivered within seconds, each once, in order.
func TestRateLimitChangeHoldsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "rate_limit": 0.001})
	rcv.secret = ep.Secret
	const n = 3
	corrs := b.postLanes("rc", n, 1, ep.ID)
	waitFor(t, 30*time.Second, "the first head delivered", func() bool {
		all, _ := rcv.snapshot()
		return len(all) == 1
	})
	var stats struct {
		Throttled int64 `json:"throttled"`
	}
	waitFor(t, 30*time.Second, "the other heads throttled", func() bool {
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+ep.ID+"/stats", nil, &stats))
		return stats.Throttled >= n-1
	})
	time.Sleep(time.Second) // they sleep on their turn's timers

	changed := time.Now()
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"rate_limit": 50}, nil))
	requireDrained(t, rcv, corrs, 1, 20*time.Second)
	t.Logf("FIGURE rate_limit 0.001/s → 50/s: the %d heads waiting 1,000 s and 2,000 s were delivered %.2f s after the PATCH",
		n-1, time.Since(changed).Seconds())
	for _, c := range corrs {
		require.Equal(t, 1, rcv.requestsFor(c+"-1"), fmt.Sprintf("%s sent once", c))
	}
}
