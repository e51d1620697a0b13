package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
)

// BenchmarkStuckHeadsClaim measures the stuck-heads sweep's claim, which
// every API process runs every second, against a backlog of 100,000 events
// that are not finished (over 1,000 correlations, then one correlation
// each) beside a history of 100,000 delivered events in 10,000 idle
// correlations. It prints the plan and timing of the claim (EXPLAIN
// ANALYZE, rolled back) when every head is due, and of the steady state,
// when every head has been taken in hand within the lease, and times the
// steady-state claim per call. It asserts no timing: the figures are for
// the reader.
//
//	go test -count=1 -run '^$' -bench BenchmarkStuckHeadsClaim -benchtime 20x -v ./internal/store/
func BenchmarkStuckHeadsClaim(b *testing.B) {
	ctx := context.Background()
	for _, corrs := range []int{1000, 100000} {
		st := newStore(b)
		seedBacklog(b, st, 100000, corrs)
		name := fmt.Sprintf("pending=100000/correlations=%d", corrs)
		b.Logf("%s, every head due:\n%s", name, explainClaim(b, st))
		// Every head taken in hand just now, as the sweep leaves them.
		_, err := st.Pool().Exec(ctx, `UPDATE correlations SET swept_at = now()`)
		require.NoError(b, err)
		b.Logf("%s, every head taken in hand within the lease:\n%s", name, explainClaim(b, st))
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				got, err := st.LanesStuckHeadsClaim(ctx, 100, time.Minute)
				require.NoError(b, err)
				require.Empty(b, got)
			}
		})
	}
}

// seedBacklog stores pending events (waiting, unchanged for an hour) spread
// over corrs correlations whose cursors are on their first, and a history
// of delivered events in idle correlations, as the API and the finishers
// leave them.
func seedBacklog(b *testing.B, st *store.Store, pending, corrs int) {
	b.Helper()
	ctx := context.Background()
	for _, s := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO correlations (tenant_id, correlation_id, next_sequence, high_water, updated_at)
		  SELECT 'default', 'p' || c, 1, $2::int / $1::int, now() - interval '1 hour' FROM generate_series(0, $1::int - 1) c`, []any{corrs, pending}},
		{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at)
		  SELECT 'default', 'p' || (i % $2) || '-' || (i / $2 + 1), 'p' || (i % $2), i / $2 + 1, 't', '{}', '\x01', 'waiting',
		         now() - interval '1 hour', now() - interval '1 hour'
		  FROM generate_series(0, $1::int - 1) i`, []any{pending, corrs}},
		{`INSERT INTO correlations (tenant_id, correlation_id, next_sequence, high_water, updated_at)
		  SELECT 'default', 'd' || c, 11, 10, now() - interval '1 day' FROM generate_series(0, 9999) c`, nil},
		{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at, delivered_at)
		  SELECT 'default', 'd' || (i % 10000) || '-' || (i / 10000 + 1), 'd' || (i % 10000), i / 10000 + 1, 't', '{}', '\x01', 'delivered',
		         now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
		  FROM generate_series(0, 99999) i`, nil},
		// One delivery each, to "ep", as the API routes them.
		{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, updated_at, delivered_at)
		  SELECT 'default', id, 'ep', correlation_id, sequence, type, state, updated_at, delivered_at FROM events`, nil},
		{`ANALYZE`, nil},
	} {
		_, err := st.Pool().Exec(ctx, s.q, s.args...)
		require.NoError(b, err, s.q)
	}
}

// explainClaim runs the claim under EXPLAIN ANALYZE in a transaction it
// rolls back, and returns the plan.
func explainClaim(b *testing.B, st *store.Store) string {
	b.Helper()
	ctx := context.Background()
	var out []string
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		// As LanesStuckHeadsClaim runs it.
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+store.StuckHeadsClaimQuery(st), time.Minute.Seconds(), 100)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		out = lines
		if err != nil {
			return err
		}
		return errRollback
	})
	require.ErrorIs(b, err, errRollback)
	return strings.Join(out, "\n")
}

var errRollback = fmt.Errorf("rolled back")
