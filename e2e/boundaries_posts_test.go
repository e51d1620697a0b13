package e2e

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTestEventsSpendThePostLimit: with HOOKFLOW_EVENTS_RATE_LIMIT=2 (bursts
// of 4), 20 test events at once from a portal session, and then from the
// tenant's key, are each held to the bucket POST /v1/events spends: at most
// a burst and a little refill accepted, the rest 429 with Retry-After.
func TestTestEventsSpendThePostLimit(t *testing.T) {
	b := setup(t, options{eventsPerSecond: 2})
	s := b.newLimitedSide("bounds-posts-" + b.prefix)
	for _, who := range []struct{ name, token string }{{"session", s.session}, {"key", s.key}} {
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code := b.callAs(who.token, http.MethodPost, "/v1/endpoints/"+s.ep1+"/test", nil, nil)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Equal(t, 20, codes[http.StatusAccepted]+codes[http.StatusTooManyRequests], "%s: %v", who.name, codes)
		require.GreaterOrEqual(t, codes[http.StatusTooManyRequests], 10, "%s: %v", who.name, codes)
		require.GreaterOrEqual(t, codes[http.StatusAccepted], 1, "%s: %v", who.name, codes)
	}
}
