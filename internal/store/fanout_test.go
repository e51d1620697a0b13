package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestConcurrentLanesFinish: the lanes of one correlation finish at once on
// different workers. Whatever the interleaving, each event ends finished
// and the cursor ends past every one: no finish misses another's because
// both committed between each other's reads.
func TestConcurrentLanesFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	const rounds = 50
	for r := range rounds {
		corr := fmt.Sprintf("race-%d", r)
		for seq := int64(1); seq <= 2; seq++ {
			insertRouted(t, st, corrSeq(corr, seq), corr, seq, "a", "b")
			require.NoError(t, st.EventMarkStarted(ctx, corrSeq(corr, seq), ""))
		}
		// Round r finishes the two lanes of event 1 only (even r) or of
		// both events (odd r), each by its own goroutine, all let go at once.
		type finish struct {
			seq      int64
			endpoint string
		}
		finishes := []finish{{1, "a"}, {1, "b"}}
		if r%2 == 1 {
			finishes = append(finishes, finish{2, "a"}, finish{2, "b"})
		}
		var (
			start sync.WaitGroup
			done  sync.WaitGroup
			errs  = make(chan error, len(finishes))
		)
		start.Add(1)
		for i, f := range finishes {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				id := corrSeq(corr, f.seq)
				if (i+r)%3 == 0 {
					errs <- st.DeliverySkipped(ctx, id, f.endpoint, corr, f.seq, time.Now())
					return
				}
				errs <- st.DeliveryDelivered(ctx, id, f.endpoint, corr, f.seq, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now())
			}()
		}
		start.Done()
		done.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		want := int64(2)
		if r%2 == 1 {
			want = 3
			require.True(t, stateOf(t, st, corrSeq(corr, 2)).Final(), "round %d", r)
		}
		require.True(t, stateOf(t, st, corrSeq(corr, 1)).Final(), "round %d", r)
		require.Equal(t, want, cursor(t, st, corr), "round %d", r)
	}
}

// TestReplayPageOrderPerLane: a batch replay reads the open dead letters
// lane by lane, each in sequence order, one page after another, whatever
// order they were written in.
func TestReplayPageOrderPerLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "z-1", "z", 1, "a", "b")
	insertRouted(t, st, "z-2", "z", 2, "a", "b")
	insertRouted(t, st, "z-3", "z", 3, "a")
	insertRouted(t, st, "y-1", "y", 1, "b")
	for _, d := range []struct {
		id, endpoint, corr string
		seq                int64
	}{{"z-3", "a", "z", 3}, {"z-2", "b", "z", 2}, {"y-1", "b", "y", 1}, {"z-1", "a", "z", 1}, {"z-1", "b", "z", 1}, {"z-2", "a", "z", 2}} {
		_, err := st.DeadLetterUpsert(ctx, deadLetter(d.id, d.endpoint, d.corr, d.seq), "w/1")
		require.NoError(t, err)
	}
	// One moment for all (the database stamps each write): the listing's
	// keyset must still tell them apart.
	_, err := st.Pool().Exec(ctx, `UPDATE dead_letters SET dead_lettered_at = now() WHERE event_id IN ('z-1', 'z-2', 'z-3', 'y-1')`)
	require.NoError(t, err)
	ok, err := st.DeadLetterMarkSkipped(ctx, "z-2", "a", 1, "op", "")
	require.NoError(t, err)
	require.True(t, ok)

	got := pageAll(t, func(last *store.DeadLetter) ([]store.DeadLetter, error) {
		var after *store.ReplayCursor
		if last != nil {
			after = &store.ReplayCursor{CorrelationID: last.CorrelationID, EndpointID: last.EndpointID, Sequence: last.Sequence, EventID: last.EventID}
		}
		return st.DeadLetterReplayPage(ctx, store.DeadLetterFilter{Limit: 2}, after)
	})
	require.Equal(t, []string{"y-1/b", "z-1/a", "z-3/a", "z-1/b", "z-2/b"}, got, "z-2/a was skipped")

	page, err := st.DeadLetterReplayPage(ctx, store.DeadLetterFilter{EndpointID: "b", CorrelationID: "z", Limit: 10}, nil)
	require.NoError(t, err)
	require.Len(t, page, 2)

	// The listing pages through the six, all written at one moment.
	got = pageAll(t, func(last *store.DeadLetter) ([]store.DeadLetter, error) {
		f := store.DeadLetterFilter{Limit: 4}
		if last != nil {
			f.AfterTime, f.AfterID, f.AfterEndpointID = &last.DeadLetteredAt, last.EventID, last.EndpointID
		}
		return st.DeadLetterList(ctx, f)
	})
	require.Equal(t, []string{"y-1/b", "z-1/a", "z-1/b", "z-2/a", "z-2/b", "z-3/a"}, got)
}

// pageAll reads pages from next, each after the last row of the one
// before, until one is empty, and lists the rows as "event/endpoint".
func pageAll(t *testing.T, next func(last *store.DeadLetter) ([]store.DeadLetter, error)) []string {
	t.Helper()
	var (
		got  []string
		last *store.DeadLetter
	)
	for {
		page, err := next(last)
		require.NoError(t, err)
		if len(page) == 0 {
			return got
		}
		for _, d := range page {
			got = append(got, d.EventID+"/"+d.EndpointID)
		}
		last = &page[len(page)-1]
	}
}

// TestStartAttemptPerDelivery: an attempt reads and moves its own delivery:
// not one to a disabled endpoint, not a finished one, and an endpoint that
// does not exist is not found.
func TestStartAttemptPerDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "s-1", "s", 1, "a", "b", "c")
	require.NoError(t, st.EventMarkStarted(ctx, "s-1", ""))
	require.NoError(t, st.EndpointDisable(ctx, "b", "gone"))
	delivered(t, st, "s-1", "c", "s", 1)

	start, err := st.DeliveryStartAttempt(ctx, "s-1", "a")
	require.NoError(t, err)
	require.Equal(t, contract.StateWaiting, start.State)
	require.Equal(t, "a", start.Endpoint.ID)
	start, err = st.DeliveryStartAttempt(ctx, "s-1", "b")
	require.NoError(t, err)
	require.True(t, start.Endpoint.Disabled)
	start, err = st.DeliveryStartAttempt(ctx, "s-1", "c")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivered, start.State)
	start, err = st.DeliveryStartAttempt(ctx, "s-1", "ep")
	require.NoError(t, err)
	require.Empty(t, start.State, "the event has no delivery to ep")
	_, err = st.DeliveryStartAttempt(ctx, "s-1", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	e, err := st.EventGet(ctx, "s-1")
	require.NoError(t, err)
	require.Equal(t, []contract.State{contract.StateDelivering, contract.StateWaiting, contract.StateDelivered},
		[]contract.State{e.Deliveries[0].State, e.Deliveries[1].State, e.Deliveries[2].State})
	require.NotNil(t, e.Deliveries[0].ReleasedAt)
	require.Nil(t, e.Deliveries[1].ReleasedAt)
	require.Equal(t, contract.StateDelivering, e.State)
	require.NotNil(t, e.ReleasedAt)
}
