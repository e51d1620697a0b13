package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// TestCorrelationVoidWaitingOnAnAcceptanceSeesItsEvent: a void of sequence
// 3 that waits for the correlation's lock while the post of 3 is being
// accepted (its transaction holds the lock, its event stored) sees the
// event once the post commits, and is refused (Arrived), storing nothing.
// The operator model's race of a void with the post of its sequence found
// both answered as accepted: the void 200 voided [3], the post 202 and its
// event delivered, while the void's tombstone went unstored.
func TestCorrelationVoidWaitingOnAnAcceptanceSeesItsEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool := newStoreOnPool(t)
	insertRouted(t, st, "c-1", "c", 1, "ep")

	// The acceptance of 3, its transaction open: the event is stored and
	// the correlation's row locked (its high-water mark raised).
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = dbsqlc.New(tx).EventInsertRouted(ctx, dbsqlc.EventInsertRoutedParams{TenantID: store.DefaultTenant, ID: "c-3", CorrelationID: "c",
		Sequence: 3, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}, Endpoints: []string{"ep"}})
	require.NoError(t, err)

	type result struct {
		v   store.Void
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := st.CorrelationVoid(ctx, "c", []int64{3}, "op", "lost")
		done <- result{v, err}
	}()
	// The void waits for the lock the acceptance holds.
	awaitLockWaiter(t, pool, "the void never waited for the correlation's lock")
	require.NoError(t, tx.Commit(ctx))

	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, []int64{3}, r.v.Arrived, "3 arrived before the void could act: the void must be refused")
	require.Empty(t, r.v.Voided)
	e, err := st.EventGet(ctx, "c-3")
	require.NoError(t, err)
	require.Equal(t, "t", e.Type)
	_, err = st.EventGet(ctx, contract.VoidedID("c", 3))
	require.ErrorIs(t, err, store.ErrNotFound, "no tombstone beside the event")
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM events WHERE correlation_id = 'c' AND sequence = 3").Scan(&n))
	require.Equal(t, 1, n)
}

// TestCorrelationVoidHoldingTheLockBeforeAnAcceptance: the other order of
// that race. The void's first check holds the correlation's lock when the
// post of 3 is accepted; the acceptance waits for the lock before it stores
// anything, so the void's tombstone is stored and the post is refused as a
// sequence taken. Before, the acceptance stored its event and only then
// waited for the lock, the tombstone's insert waited on that event's unique
// key, and Postgres aborted one of the two (deadlock detected), which the
// API answered 500. A brand-new correlation (the void's check makes its
// row) took the same cycle.
func TestCorrelationVoidHoldingTheLockBeforeAnAcceptance(t *testing.T) {
	t.Parallel()
	for _, existing := range []bool{true, false} {
		name := "new correlation"
		if existing {
			name = "existing correlation"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, pool := newStoreOnPool(t)
			if existing {
				insertRouted(t, st, "c-1", "c", 1, "ep")
			}

			// The void, its first check run: it holds the correlation's lock.
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			var arrived, already []int64
			require.NoError(t, tx.QueryRow(ctx, dbsqlc.CorrelationVoidCheck, "c", []int64{3}, store.DefaultTenant).Scan(&arrived, &already))

			type result struct {
				inserted bool
				err      error
			}
			done := make(chan result, 1)
			go func() {
				_, inserted, err := st.EventInsertRouted(ctx, event("c-3", "c", 3), []string{"ep"}, nil)
				done <- result{inserted, err}
			}()
			awaitLockWaiter(t, pool, "the acceptance never waited for the correlation's lock")

			// The void's check again under the lock, then its tombstone.
			require.NoError(t, tx.QueryRow(ctx, dbsqlc.CorrelationVoidCheck, "c", []int64{3}, store.DefaultTenant).Scan(&arrived, &already))
			require.Empty(t, arrived, "nothing of 3 is stored while the void holds the lock")
			var stored int64
			require.NoError(t, tx.QueryRow(ctx, dbsqlc.CorrelationVoidInsert, "c", []int64{3}, []string{contract.VoidedID("c", 3)}, `{}`, store.DefaultTenant).Scan(&stored),
				"the void's tombstone must not wait on the acceptance's event")
			require.Equal(t, int64(1), stored)
			require.NoError(t, tx.Commit(ctx))

			r := <-done
			require.NoError(t, r.err)
			require.False(t, r.inserted, "3 was voided first: the post is refused")
			var typ string
			require.NoError(t, pool.QueryRow(ctx, "SELECT type FROM events WHERE correlation_id = 'c' AND sequence = 3").Scan(&typ))
			require.Equal(t, "hookflow.voided", typ)
		})
	}
}

// TestCorrelationVoidInsertCountsWhatItStored: the tombstones' insert
// answers how many it stored, not counting one a unique key dropped, which
// CorrelationVoid checks against what it answers as voided.
func TestCorrelationVoidInsertCountsWhatItStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool := newStoreOnPool(t)
	insertRouted(t, st, "c-3", "c", 3, "ep")
	var stored int64
	require.NoError(t, pool.QueryRow(ctx, dbsqlc.CorrelationVoidInsert, "c", []int64{3, 4}, []string{contract.VoidedID("c", 3), contract.VoidedID("c", 4)},
		`{}`, store.DefaultTenant).Scan(&stored))
	require.Equal(t, int64(1), stored, "3's tombstone is dropped (3 is an event), 4's stored")
}

// awaitLockWaiter returns once a session of the test's database waits for a
// lock (the other side of a race, parked where the test wants it).
func awaitLockWaiter(t *testing.T, pool *pgxpool.Pool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting int
		err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting)
		return err == nil && waiting > 0
	}, 10*time.Second, 20*time.Millisecond, msg)
}
