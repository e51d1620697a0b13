package store_test

import (
	"context"
	"testing"
	"time"

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
	require.Eventually(t, func() bool {
		var waiting int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting)
		return err == nil && waiting > 0
	}, 10*time.Second, 20*time.Millisecond, "the void never waited for the correlation's lock")
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
