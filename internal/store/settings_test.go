package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// TestDeliveriesKeepTheSettingsOfTheirRouting: an event's deliveries get
// their endpoints' window and timeout as they are when it is routed (none:
// the server's), and keep them through a later change of the endpoint,
// which only later events get.
func TestDeliveriesKeepTheSettingsOfTheirRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.EndpointCreate(ctx, store.Endpoint{ID: "set", URL: "https://example.com/s", Secret: "whsec_x",
		Settings: store.Settings{RecoveryWindow: 90 * time.Second, Timeout: 2500 * time.Millisecond, RateLimit: 2, Headers: map[string]string{"X-K": "v"}}}, store.Caps{})
	require.NoError(t, err)
	route := func(id string, seq int64) store.Event {
		ev, ok, err := st.EventInsertRouted(ctx, intake.Event{ID: id, CorrelationID: "c-settings", Sequence: seq, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{"ep", "set"}, nil)

		require.NoError(t, err)
		require.True(t, ok)
		return ev
	}
	first := route("e1", 1)
	require.Len(t, first.Deliveries, 2)
	require.Zero(t, first.Deliveries[0].RecoveryWindow(), "ep has the server's")
	require.Zero(t, first.Deliveries[0].Timeout())
	require.Equal(t, 90*time.Second, first.Deliveries[1].RecoveryWindow())
	require.Equal(t, 2500*time.Millisecond, first.Deliveries[1].Timeout())

	w := 72 * time.Hour
	none := time.Duration(0)
	ep, err := st.EndpointUpdate(ctx, "set", store.EndpointChange{RecoveryWindow: &w, Timeout: &none})
	require.NoError(t, err)
	require.Equal(t, store.Settings{RecoveryWindow: w, RateLimit: 2, Headers: map[string]string{"X-K": "v"}}, ep.Settings)

	got, err := st.EventGet(ctx, "e1")
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, got.Deliveries[1].RecoveryWindow(), "a routed delivery keeps its window")
	require.Equal(t, 2500*time.Millisecond, got.Deliveries[1].Timeout())
	second := route("e2", 2)
	require.Equal(t, w, second.Deliveries[1].RecoveryWindow())
	require.Zero(t, second.Deliveries[1].Timeout())
}

// TestEndpointRateReserveSpacesSlots: concurrent reservations at 10/s get
// distinct slots exactly 100 ms apart, in some order, and an idle
// endpoint's next slot is now (no burst is banked).
func TestEndpointRateReserveSpacesSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	const n = 20
	slots := make([]store.RateSlot, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := st.EndpointRateReserve(ctx, "ep", 10)
			require.NoError(t, err)
			slots[i] = s
		})
	}
	wg.Wait()
	slices.SortFunc(slots, func(a, b store.RateSlot) int { return a.At.Compare(b.At) })
	require.Zero(t, slots[0].Wait, "the first is sent at once")
	for i := 1; i < n; i++ {
		require.Equal(t, 100*time.Millisecond, slots[i].At.Sub(slots[i-1].At), "slot %d", i)
	}
	require.Greater(t, slots[n-1].Wait, time.Second, "the last waits its turn")
	h, err := st.EndpointHealth(ctx, "ep", time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(n-1), h.Throttled, "every reservation but the first waited, and was counted")

	time.Sleep(slots[n-1].Wait + 200*time.Millisecond)
	s, err := st.EndpointRateReserve(ctx, "ep", 10)
	require.NoError(t, err)
	require.Zero(t, s.Wait, "an idle endpoint sends at once")
	next, err := st.EndpointRateReserve(ctx, "ep", 10)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, next.At.Sub(s.At), "and the next waits one interval")
	h, err = st.EndpointHealth(ctx, "ep", time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(n), h.Throttled, "the idle endpoint's reservation was not a throttle, the next was")
	_, err = st.EndpointInsert(ctx, "never-limited", "https://example.com/n", "whsec_x", nil)
	require.NoError(t, err)
	other, err := st.EndpointHealth(ctx, "never-limited", time.Hour)
	require.NoError(t, err)
	require.Zero(t, other.Throttled)
}

// TestARateChangeGivesUpTheOldSlotsAndWakesTheLanes: heads that reserved
// slots far ahead under a slow rate do not keep the endpoint's horizon
// when its rate_limit changes: the next reservation is sent at once under
// the new rate, and the endpoint's lanes are asked to wake (the wake
// sweep's stamp, made for an endpoint whose circuit never failed), in the
// update's transaction. A PATCH that leaves the rate as it is changes
// neither; the throttled count is kept.
func TestARateChangeGivesUpTheOldSlotsAndWakesTheLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	wakes := func() []string {
		pending, err := st.CircuitsWakePending(ctx, 100)
		require.NoError(t, err)
		var ids []string
		for _, w := range pending {
			ids = append(ids, w.EndpointID)
		}
		return ids
	}
	slow := 0.01
	_, err := st.EndpointUpdate(ctx, "ep", store.EndpointChange{RateLimit: &slow})
	require.NoError(t, err)
	require.Equal(t, []string{"ep"}, wakes(), "no limit to a limit is a change")
	pending, err := st.CircuitsWakePending(ctx, 100)
	require.NoError(t, err)
	require.NoError(t, st.CircuitWakeDone(ctx, pending[0]))
	for range 3 {
		_, err := st.EndpointRateReserve(ctx, "ep", slow)
		require.NoError(t, err)
	}
	held, err := st.EndpointRateReserve(ctx, "ep", slow)
	require.NoError(t, err)
	require.Greater(t, held.Wait, 250*time.Second, "the slow rate's horizon")

	_, err = st.EndpointUpdate(ctx, "ep", store.EndpointChange{RateLimit: &slow})
	require.NoError(t, err)
	require.Empty(t, wakes(), "the same rate again is no change")
	kept, err := st.EndpointRateReserve(ctx, "ep", slow)
	require.NoError(t, err)
	require.Greater(t, kept.Wait, held.Wait, "and keeps the horizon")

	fast := 50.0
	ep, err := st.EndpointUpdate(ctx, "ep", store.EndpointChange{RateLimit: &fast})
	require.NoError(t, err)
	require.Equal(t, fast, ep.Settings.RateLimit)
	require.Equal(t, []string{"ep"}, wakes(), "the lanes are asked to wake")
	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State, "the wake's row is a closed circuit")
	now, err := st.EndpointRateReserve(ctx, "ep", fast)
	require.NoError(t, err)
	require.Zero(t, now.Wait, "the old rate's slots are given up")
	next, err := st.EndpointRateReserve(ctx, "ep", fast)
	require.NoError(t, err)
	require.Equal(t, 20*time.Millisecond, next.At.Sub(now.At), "and the new rate spaces the next")
	h, err := st.EndpointHealth(ctx, "ep", time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(5), h.Throttled, "the throttled count outlives the reset")
}

// TestEndpointLeasesCapAttemptsInFlight: of 20 attempts that ask at once
// for a place at an endpoint capped at 3, 3 get one; a place given back
// goes to the next; the same attempt asking again renews its own; and a
// lease never given back (a crashed worker's) frees itself when it
// expires.
func TestEndpointLeasesCapAttemptsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	const n, capMax = 20, 3
	var mu sync.Mutex
	var taken []string
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			owner := fmt.Sprintf("evt_%d/ep/1", i)
			l, err := st.EndpointLeaseAcquire(ctx, "ep", owner, capMax, time.Minute)
			require.NoError(t, err)
			if l.Taken {
				mu.Lock()
				taken = append(taken, owner)
				mu.Unlock()
			} else {
				require.Equal(t, capMax, l.Held)
			}
		})
	}
	wg.Wait()
	require.Len(t, taken, capMax, "never more in flight than the cap")

	l, err := st.EndpointLeaseAcquire(ctx, "ep", taken[0], capMax, time.Minute)
	require.NoError(t, err)
	require.True(t, l.Taken, "the holder asking again renews its own")
	l, err = st.EndpointLeaseAcquire(ctx, "ep", "late", capMax, time.Minute)
	require.NoError(t, err)
	require.False(t, l.Taken)
	require.NoError(t, st.EndpointLeaseRelease(ctx, "ep", taken[0]))
	l, err = st.EndpointLeaseAcquire(ctx, "ep", "late", capMax, time.Minute)
	require.NoError(t, err)
	require.True(t, l.Taken, "a place given back goes to the next")
	l, err = st.EndpointLeaseAcquire(ctx, "a", "x", 1, time.Minute)
	require.NoError(t, err)
	require.True(t, l.Taken, "each endpoint has its own places")

	// A crashed worker's lease: never given back, it expires.
	_, err = st.EndpointCreate(ctx, store.Endpoint{ID: "tarpit", URL: "https://example.com/t", Secret: "whsec_x", Settings: store.Settings{MaxInFlight: 1}}, store.Caps{})
	require.NoError(t, err)
	l, err = st.EndpointLeaseAcquire(ctx, "tarpit", "crashed", 1, 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, l.Taken)
	l, err = st.EndpointLeaseAcquire(ctx, "tarpit", "next", 1, time.Minute)
	require.NoError(t, err)
	require.False(t, l.Taken)
	time.Sleep(400 * time.Millisecond)
	l, err = st.EndpointLeaseAcquire(ctx, "tarpit", "next", 1, time.Minute)
	require.NoError(t, err)
	require.True(t, l.Taken, "the expired lease freed its place")
	require.Zero(t, l.Held)
}

// TestMaxInFlightIsStoredAndChanged: max_in_flight round-trips through
// create and update; zero puts the default back.
func TestMaxInFlightIsStoredAndChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	ep, err := st.EndpointCreate(ctx, store.Endpoint{ID: "capped", URL: "https://example.com/c", Secret: "whsec_x", Settings: store.Settings{MaxInFlight: 7}}, store.Caps{})
	require.NoError(t, err)
	require.Equal(t, 7, ep.Settings.InFlightCap())
	zero := 0
	ep, err = st.EndpointUpdate(ctx, "capped", store.EndpointChange{MaxInFlight: &zero})
	require.NoError(t, err)
	require.Equal(t, store.DefaultMaxInFlight, ep.Settings.InFlightCap())
	one := 1
	ep, err = st.EndpointUpdate(ctx, "capped", store.EndpointChange{MaxInFlight: &one})
	require.NoError(t, err)
	got, err := st.EndpointGet(ctx, "capped")
	require.NoError(t, err)
	require.Equal(t, 1, got.Settings.MaxInFlight)
}
