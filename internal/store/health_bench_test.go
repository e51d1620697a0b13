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

// BenchmarkEndpointHealth measures the health query (GET
// /v1/endpoints/{id}/stats, and every endpoint's at once for GET
// /v1/stats/endpoints) against 10,000 and then 1,000,000 attempts of one
// endpoint within the window, over 1,000 deliveries (and a tenth as many
// of another), beside 100 pending deliveries of 4 endpoints. It prints the plan and timing (EXPLAIN
// (ANALYZE, BUFFERS), rolled back) of each form and times each per call.
// It asserts no timing: the figures are for the reader
// (docs/performance.md). Seeding the million takes about a minute.
//
//	go test -count=1 -run '^$' -bench BenchmarkEndpointHealth -benchtime 20x -v ./internal/store/
func BenchmarkEndpointHealth(b *testing.B) {
	ctx := context.Background()
	for _, attempts := range []int{10000, 1000000} {
		st := newStore(b)
		seedAttempts(b, st, attempts)
		name := fmt.Sprintf("attempts=%d", attempts)
		b.Logf("%s, one endpoint:\n%s", name, explainHealth(b, st, "a"))
		b.Logf("%s, every endpoint:\n%s", name, explainHealth(b, st, nil))
		b.Run(name+"/one", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				h, err := st.EndpointHealth(ctx, "a", time.Hour)
				require.NoError(b, err)
				require.EqualValues(b, store.HealthSample, h.Attempts.Total)
				require.True(b, h.Sampled)
			}
		})
		b.Run(name+"/every", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				hs, err := st.EndpointsHealth(ctx, time.Hour, "", 100)
				require.NoError(b, err)
				require.Len(b, hs, 4)
			}
		})
	}
}

// seedAttempts stores 1,000 events delivered to endpoints "a" and "b",
// with n attempts to "a" among them, spread over the last 59 minutes, of
// every outcome (a tenth of them while disabled), and a tenth as many to
// "b"; and 100 events waiting for "ep", "a", "b" and "c", as the workers
// and the API leave them.
func seedAttempts(b *testing.B, st *store.Store, n int) {
	b.Helper()
	ctx := context.Background()
	for _, s := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at, delivered_at)
		  SELECT 'default', 'd-' || i, 'd-' || i, 1, 't', '{}', '\x01', 'delivered', now() - interval '1 hour', now(), now()
		  FROM generate_series(0, 999) i`, nil},
		{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, updated_at, delivered_at)
		  SELECT 'default', id, 'a', correlation_id, sequence, type, state, updated_at, delivered_at FROM events`, nil},
		{`INSERT INTO delivery_attempts (tenant_id, event_id, endpoint_id, attempt, started_at, latency_ms, status_code, outcome)
		  SELECT 'default', 'd-' || (i % 1000), 'a', i / 1000 + 1, now() - interval '59 minutes' * (1 - i::float8 / $1),
		         (i::bigint * 7919) % 2000, 200,
		         (ARRAY['delivered', 'delivered', 'delivered', 'delivered', 'delivered', 'retry', 'retry', 'permanent', 'gone', 'disabled'])[i % 10 + 1]
		  FROM generate_series(0, $1::int - 1) i`, []any{n}},
		// "b" is busy too, a tenth as much: the sample must not walk its
		// attempts to find a's.
		{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, updated_at, delivered_at)
		  SELECT 'default', id, 'b', correlation_id, sequence, type, state, updated_at, delivered_at FROM events`, nil},
		{`INSERT INTO delivery_attempts (tenant_id, event_id, endpoint_id, attempt, started_at, latency_ms, status_code, outcome)
		  SELECT 'default', 'd-' || (i % 1000), 'b', i / 1000 + 1, now() - interval '59 minutes' * (1 - i::float8 / $1), i % 100, 200, 'delivered'
		  FROM generate_series(0, $1::int - 1) i`, []any{n / 10}},
		{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at)
		  SELECT 'default', 'w-' || i, 'w-' || i, 1, 't', '{}', '\x01', 'waiting', now() - interval '1 minute', now()
		  FROM generate_series(0, 99) i`, nil},
		{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, updated_at)
		  SELECT 'default', e.id, ep, e.correlation_id, e.sequence, e.type, e.state, e.updated_at
		  FROM events e CROSS JOIN unnest(ARRAY['ep', 'a', 'b', 'c']) ep WHERE e.state = 'waiting'`, nil},
		{`ANALYZE`, nil},
	} {
		_, err := st.Pool().Exec(ctx, s.q, s.args...)
		require.NoError(b, err, s.q)
	}
}

// explainHealth runs the health query of endpointID (nil: of every
// endpoint) under EXPLAIN (ANALYZE, BUFFERS) in a transaction it rolls
// back, and returns the plan.
func explainHealth(b *testing.B, st *store.Store, endpointID any) string {
	b.Helper()
	ctx := context.Background()
	var out []string
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+store.EndpointHealthQuery(st), endpointID, time.Hour.Seconds(), store.HealthSample)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		return errRollback
	})
	require.ErrorIs(b, err, errRollback)
	return strings.Join(out, "\n")
}
