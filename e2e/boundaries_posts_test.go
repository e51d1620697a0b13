package e2e

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTestEventsSpendThePostLimit: with HOOKFLOW_EVENTS_RATE_LIMIT=2 (bursts
// of 4), 20 test events at once from a portal session, and then from the
// tenant's key, are each held to the bucket POST /v1/events spends: at most
// a burst and a little refill accepted, the rest 429 with Retry-After; and
// the tenant's events_per_second refuses them as it refuses posts.
func TestTestEventsSpendThePostLimit(t *testing.T) {
	t.Parallel()
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

	// The tenant's events_per_second holds them too: a fresh key, whose
	// own bucket lets 4 through, is refused by the tenant's.
	require.Equal(t, http.StatusOK, b.call(http.MethodPut, "/v1/tenants/"+s.id, map[string]any{"name": "Posts",
		"limits": map[string]any{"events_per_second": 1}}, nil))
	var k struct {
		Key string `json:"key"`
	}
	require.Equal(t, http.StatusCreated, b.call(http.MethodPost, "/v1/api-keys", map[string]any{"name": s.id + "-fresh", "tenant_id": s.id,
		"scopes": []string{"events:test"}}, &k))
	// The tenant's row is cached for a moment: try until its new limit
	// holds, a few at once each time.
	waitFor(t, 30*time.Second, "a test event refused by the tenant's events_per_second", func() bool {
		var mu sync.Mutex
		refused := false
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var p map[string]any
				code := b.callAs(k.Key, http.MethodPost, "/v1/endpoints/"+s.ep1+"/test", nil, &p)
				mu.Lock()
				refused = refused || code == http.StatusTooManyRequests && p["tenant_limit"] == "events_per_second"
				mu.Unlock()
			}()
		}
		wg.Wait()
		return refused
	})
}
