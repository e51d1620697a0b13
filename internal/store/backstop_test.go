package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// TestAnAttemptWaitsForTheEarlierOpenDeliveryOfItsLane: the ledger refuses
// to start 11 at endpoint a while 10, routed to a in the same correlation,
// is open there (waiting, delivering, or dead-lettered), whatever a
// sequencer or a hand-sent release says: the refused attempt marks nothing
// and names 10. Once 10 is delivered, or skipped, 11 starts.
func TestAnAttemptWaitsForTheEarlierOpenDeliveryOfItsLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		open  func(st *store.Store) // puts 10 in its open state
		state contract.State
		end   func(t *testing.T, st *store.Store) // finishes 10
	}{
		{"waiting", func(*store.Store) {}, contract.StateWaiting,
			func(t *testing.T, st *store.Store) { delivered(t, st, "o-10", "a", "o", 10) }},
		{"delivering", func(st *store.Store) {
			_, err := st.DeliveryStartAttempt(ctx, "o-10", "a")
			require.NoError(t, err)
		}, contract.StateDelivering, func(t *testing.T, st *store.Store) { delivered(t, st, "o-10", "a", "o", 10) }},
		{"dead-lettered", func(st *store.Store) {
			_, err := st.DeadLetterUpsert(ctx, deadLetter("o-10", "a", "o", 10), "w/o-10")
			require.NoError(t, err)
		}, contract.StateDeadLettered, func(t *testing.T, st *store.Store) { skipped(t, st, "o-10", "a", "o", 10) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			insertRouted(t, st, "o-10", "o", 10, "a")
			insertRouted(t, st, "o-11", "o", 11, "a")
			c.open(st)

			start, err := st.DeliveryStartAttempt(ctx, "o-11", "a")
			require.NoError(t, err)
			require.Equal(t, &store.LaneHead{Sequence: 10, EventID: "o-10", State: c.state}, start.HeldBy)
			require.Equal(t, contract.StateWaiting, start.State)
			e, err := st.EventGet(ctx, "o-11")
			require.NoError(t, err)
			require.Equal(t, contract.StateWaiting, e.Deliveries[0].State, "a held attempt marks nothing")
			require.Nil(t, e.Deliveries[0].ReleasedAt)

			c.end(t, st)
			start, err = st.DeliveryStartAttempt(ctx, "o-11", "a")
			require.NoError(t, err)
			require.Nil(t, start.HeldBy)
			require.Equal(t, contract.StateDelivering, stateOf(t, st, "o-11"))
		})
	}
}

// TestAnAttemptIsHeldOnlyByItsOwnLane: an open delivery holds back only the
// later deliveries of its own lane: not its own attempt, not the same
// event's delivery to another endpoint, not another correlation's at the
// same endpoint; and a later open delivery holds back nothing.
func TestAnAttemptIsHeldOnlyByItsOwnLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "l-1", "l", 1, "a")      // open at a: holds l-2 at a
	insertRouted(t, st, "l-2", "l", 2, "a", "b") // b: nothing before it there
	insertRouted(t, st, "m-2", "m", 2, "a")      // another correlation at a
	insertRouted(t, st, "l-3", "l", 3, "c")
	insertRouted(t, st, "l-6", "l", 6, "c")

	for _, c := range []struct {
		event, endpoint string
		held            int64
	}{
		{"l-1", "a", 0}, {"l-2", "a", 1}, {"l-2", "b", 0}, {"m-2", "a", 0}, {"l-3", "c", 0},
	} {
		start, err := st.DeliveryStartAttempt(ctx, c.event, c.endpoint)
		require.NoError(t, err)
		if c.held == 0 {
			require.Nil(t, start.HeldBy, "%s at %s", c.event, c.endpoint)
			continue
		}
		require.NotNil(t, start.HeldBy, "%s at %s", c.event, c.endpoint)
		require.Equal(t, c.held, start.HeldBy.Sequence, "%s at %s", c.event, c.endpoint)
	}
	// l-3 is delivering at c now: l-6 after it is held, and l-3 itself,
	// retried, is not.
	start, err := st.DeliveryStartAttempt(ctx, "l-6", "c")
	require.NoError(t, err)
	require.NotNil(t, start.HeldBy)
	require.Equal(t, int64(3), start.HeldBy.Sequence)
	start, err = st.DeliveryStartAttempt(ctx, "l-3", "c")
	require.NoError(t, err)
	require.Nil(t, start.HeldBy)
}

// TestTheLaneBackstopIsOneIndexProbe: the attempt's check of its lane reads
// deliveries_pending_idx, the lane's open deliveries in order, and stops at
// the first, whatever the lane's backlog and the table's size: no scan of
// deliveries.
func TestTheLaneBackstopIsOneIndexProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for seq := int64(1); seq <= 200; seq++ {
		insertRouted(t, st, corrSeq("deep", seq), "deep", seq, "a")
	}
	for c := range 100 {
		corr := fmt.Sprintf("wide-%d", c)
		for seq := int64(1); seq <= 10; seq++ {
			insertRouted(t, st, corrSeq(corr, seq), corr, seq, "a", "b")
		}
	}
	_, err := st.Pool().Exec(ctx, "ANALYZE deliveries")
	require.NoError(t, err)
	// The attempt's own statement, its update rolled back.
	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+dbsqlc.DeliveryStartAttempt, corrSeq("deep", 200), "a", store.DefaultTenant)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	text := strings.Join(plan, "\n")
	t.Log(text)
	require.Contains(t, text, "deliveries_pending_idx")
	require.NotContains(t, text, "Seq Scan on deliveries")
}
