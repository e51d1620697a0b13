package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
func TestCircuitCloseKeepsTheRateLimit(t *testing.T) {
	b := setup(t, options{window: 30 * time.Minute})
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
	posted := time.Now()
	corrs := b.postLanes("cr", n, 1, ep.ID)

	// The last head's slot is about n-1 s after the posts: by then every
	// head has found the circuit open, holding the slot it waited for.
	time.Sleep(time.Until(posted.Add((n + 2) * time.Second)))
	up.Store(true)
	back := time.Now()
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"disabled": false}, nil))
	requireDrained(t, rcv, corrs, 1, 2*time.Minute)

	after := got.since(back)
	require.NotEmpty(t, after)
	span := after[len(after)-1].Sub(after[0])
	busiest := busiestSecond(after)
	t.Logf("FIGURE circuit close under rate_limit 1/s: %d heads sent in %.2f s after the close, at most %d within one second",
		len(after), span.Seconds(), busiest)
	// The slots are a second apart and none is sent before its slot; a
	// timer that fires late (up to lateSlot) may bring two within one
	// second, never the burst of every woken head.
	require.LessOrEqual(t, busiest, 2, "the woken heads went in a burst past the rate limit: %v", after)
	require.GreaterOrEqual(t, span, time.Duration(len(after)-2)*time.Second, "sent faster than 1/s")
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
