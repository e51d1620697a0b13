package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestEndpointHealth: an endpoint's health counts its own attempts of the
// window by outcome (not another endpoint's, not older ones, not those made
// while it was disabled), their latency percentiles, its deliveries not
// finished with the oldest of them, and its open dead letters.
func TestEndpointHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "h-1", "h", 1, "a", "b") // a: retried twice, then delivered
	insertRouted(t, st, "h-2", "h", 2, "a")      // a: rejected, dead-lettered
	insertRouted(t, st, "h-3", "h", 3, "a")      // a: waiting behind it
	insertRouted(t, st, "k-1", "k", 1, "a")      // a: being delivered
	for _, id := range []string{"h-1", "h-2", "h-3", "k-1"} {
		require.NoError(t, st.EventMarkStarted(ctx, id, ""))
	}
	attempt := func(id, endpoint string, n, latency int32, outcome string, ago time.Duration) store.Attempt {
		a := store.Attempt{Attempt: n, StartedAt: time.Now().Add(-ago), LatencyMS: latency, Outcome: outcome}
		require.NoError(t, st.AttemptInsert(ctx, id, endpoint, a))
		return a
	}
	attempt("h-1", "a", 1, 10, "retry", time.Minute)
	attempt("h-1", "a", 2, 20, "retry", time.Minute)
	attempt("h-1", "a", 3, 900, "delivered", 2*time.Hour) // before the window
	attempt("h-1", "a", 4, 0, "disabled", time.Minute)    // no request made
	attempt("h-1", "b", 1, 500, "delivered", time.Minute) // b's
	_, err := st.DeliveryStartAttempt(ctx, "h-1", "a")
	require.NoError(t, err)
	require.NoError(t, st.DeliveryDelivered(ctx, "h-1", "a", "h", 1,
		store.Attempt{Attempt: 5, StartedAt: time.Now(), LatencyMS: 30, Outcome: "delivered"}, time.Now()))
	_, err = st.DeliveryStartAttempt(ctx, "h-2", "a")
	require.NoError(t, err)
	attempt("h-2", "a", 1, 40, "permanent", 0)
	_, err = st.DeadLetterUpsert(ctx, deadLetter("h-2", "a", "h", 2), "w/1")
	require.NoError(t, err)
	_, err = st.DeliveryStartAttempt(ctx, "k-1", "a")
	require.NoError(t, err)
	age(t, st, "h-2", 10*time.Minute)

	h, err := st.EndpointHealth(ctx, "a", time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.AttemptCounts{Total: 4, Delivered: 1, Retry: 2, Permanent: 1}, h.Attempts)
	require.InDelta(t, 0.25, *h.Attempts.SuccessRate(), 1e-9)
	// Latencies 10, 20, 30, 40: the median lies between 20 and 30, the
	// 99th percentile 97 % of the way from 30 to 40.
	require.InDelta(t, 25, *h.LatencyP50MS, 1e-9)
	require.InDelta(t, 39.7, *h.LatencyP99MS, 1e-9)
	require.Equal(t, []int64{1, 1, 1}, []int64{h.Waiting, h.Delivering, h.DeadLettersOpen})
	require.NotNil(t, h.Oldest)
	require.InDelta(t, 600, h.Oldest.AgeSeconds, 30)
	h.Oldest.AgeSeconds = 0
	require.Equal(t, store.OldestDelivery{EventID: "h-2", CorrelationID: "h", Sequence: 2, State: contract.StateDeadLettered}, *h.Oldest,
		"the dead letter is the oldest delivery not finished; h-1 was delivered")

	b, err := st.EndpointHealth(ctx, "b", time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.AttemptCounts{Total: 1, Delivered: 1}, b.Attempts)
	require.InDelta(t, 500, *b.LatencyP99MS, 1e-9)
	require.Equal(t, "h-1", b.Oldest.EventID, "b's delivery of h-1 still waits")

	none, err := st.EndpointHealth(ctx, "c", time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.Health{EndpointID: "c", FailureThreshold: store.DefaultCircuitFailureThreshold, Circuit: store.Circuit{State: store.CircuitClosed}}, none,
		"no attempts: no rate, no percentiles, nothing waiting, never throttled, its circuit closed")
	require.Nil(t, none.Attempts.SuccessRate())
}

// TestEndpointHealthSample: an endpoint whose window holds more attempts
// than HealthSample is told from its last HealthSample, and says so;
// EndpointsHealth reads a page of the endpoints' health, in id order, each
// as EndpointHealth reads it.
func TestEndpointHealthSample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "s-1", "s", 1, "a", "b")
	// The oldest five failed; the last HealthSample delivered.
	_, err := st.Pool().Exec(ctx, `INSERT INTO delivery_attempts (tenant_id, event_id, endpoint_id, attempt, started_at, latency_ms, outcome)
		SELECT 'default', 's-1', 'a', i, now() - interval '1 second' * ($1 + 5 - i), 10, CASE WHEN i <= 5 THEN 'retry' ELSE 'delivered' END
		FROM generate_series(1, $1 + 5) i`, store.HealthSample)
	require.NoError(t, err)
	attempt := store.Attempt{Attempt: 1, StartedAt: time.Now(), LatencyMS: 3, Outcome: "retry"}
	require.NoError(t, st.AttemptInsert(ctx, "s-1", "b", attempt))

	a, err := st.EndpointHealth(ctx, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, a.Sampled)
	require.Equal(t, store.AttemptCounts{Total: store.HealthSample, Delivered: store.HealthSample}, a.Attempts)
	b, err := st.EndpointHealth(ctx, "b", time.Hour)
	require.NoError(t, err)
	require.False(t, b.Sampled)
	require.Equal(t, store.AttemptCounts{Total: 1, Retry: 1}, b.Attempts)

	all, err := st.EndpointsHealth(ctx, time.Hour, "", 10)
	require.NoError(t, err)
	ids := func(hs []store.Health) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.EndpointID)
		}
		return out
	}
	require.Equal(t, []string{"a", "b", "c", "ep"}, ids(all))
	page2, err := st.EndpointsHealth(ctx, time.Hour, "a", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, ids(page2), "a page: after the cursor, at most the limit")
	require.Equal(t, b.Attempts, page2[0].Attempts)
	require.Equal(t, a.Attempts, all[0].Attempts)
	require.Equal(t, b.Attempts, all[1].Attempts)
	require.Equal(t, b.Oldest.EventID, all[1].Oldest.EventID)

	page, ids64, err := st.AttemptsPage(ctx, "s-1", "a", 0, 3)
	require.NoError(t, err)
	require.Len(t, page, 3)
	require.EqualValues(t, 1, page[0].Attempt)
	next, _, err := st.AttemptsPage(ctx, "s-1", "a", ids64[2], 3)
	require.NoError(t, err)
	require.EqualValues(t, 4, next[0].Attempt, "the next page starts after the cursor")
	_, _, err = st.AttemptsPage(ctx, "s-1", "c", 0, 3)
	require.ErrorIs(t, err, store.ErrNotFound, "no delivery to c")
	last, err := st.AttemptsLastByEvent(ctx, "s-1", 2)
	require.NoError(t, err)
	require.Len(t, last["a"], 2)
	require.EqualValues(t, store.HealthSample+5, last["a"][1].Attempt, "the last, oldest first")
	require.Len(t, last["b"], 1)
}
