package store_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestStats: a correlation missing its next sequence and one held by a
// dead letter are blocked; one merely in flight is not.
func TestStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "gap-2", "gap", 2)       // 1 never arrived
	insertEvent(t, st, "dl-1", "dl", 1)         // dead-lettered
	insertEvent(t, st, "dl-2", "dl", 2)         // held behind it
	insertEvent(t, st, "ok-1", "ok", 1)         // delivering
	insertEvent(t, st, "done-1", "done", 1)     // delivered
	insertEvent(t, st, "queued-1", "queued", 1) // still queued
	for _, id := range []string{"gap-2", "dl-1", "dl-2", "ok-1", "done-1"} {
		require.NoError(t, st.EventMarkStarted(ctx, id, ""))
	}
	_, err := st.DeliveryStartAttempt(ctx, "dl-1", "ep")
	require.NoError(t, err)
	_, err = st.DeadLetterUpsert(ctx, deadLetter("dl-1", "ep", "dl", 1), "window-1")
	require.NoError(t, err)
	_, err = st.DeliveryStartAttempt(ctx, "ok-1", "ep")
	require.NoError(t, err)
	_, err = st.DeliveryStartAttempt(ctx, "done-1", "ep")
	require.NoError(t, err)
	delivered(t, st, "done-1", "ep", "done", 1)

	sm, err := st.StatsSummary(ctx)
	require.NoError(t, err)
	require.Greater(t, sm.OldestLagSeconds, 0.0)
	require.Len(t, sm.ByEndpoint, 1)
	require.Equal(t, store.EndpointSummary{EndpointID: "ep", Waiting: 3, Delivering: 1, DeliveredRecently: 1, DeadLettersOpen: 1, LagSeconds: sm.OldestLagSeconds}, sm.ByEndpoint[0],
		"queued-1's delivery waits too")
	sm.ByEndpoint = nil
	require.Equal(t, store.Summary{Queued: 1, InFlight: 3, DeliveredLast5m: 1, DeadLettersOpen: 1, OldestLagSeconds: sm.OldestLagSeconds}, sm)

	blocked, total, err := st.StatsBlockedCorrelations(ctx, 10)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	byID := map[string]store.BlockedCorrelation{}
	for _, b := range blocked {
		byID[b.CorrelationID] = b
	}
	require.Equal(t, "missing", byID["gap"].BlockedBy)
	require.Nil(t, byID["gap"].BlockingEventID)
	require.EqualValues(t, 1, byID["gap"].NextSequence)
	require.Equal(t, "ep", byID["gap"].EndpointID)
	require.Equal(t, string(contract.StateDeadLettered), byID["dl"].BlockedBy)
	require.EqualValues(t, 1, byID["dl"].NextSequence)
	require.Equal(t, "dl-1", *byID["dl"].BlockingEventID)
	require.EqualValues(t, 1, byID["dl"].Parked)

	top, total, err := st.StatsBlockedCorrelations(ctx, 1)
	require.NoError(t, err)
	require.Len(t, top, 1)
	require.EqualValues(t, 2, total, "the count is of all blocked correlations, not the page")
}

// TestStatsPerLane: a dead letter in one lane blocks that lane only, and
// the summary counts deliveries per endpoint.
func TestStatsPerLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "f-1", "f", 1, "a", "b")
	insertRouted(t, st, "f-2", "f", 2, "a", "b")
	insertRouted(t, st, "f-3", "f", 3, "a", "b")
	for _, id := range []string{"f-1", "f-2", "f-3"} {
		require.NoError(t, st.EventMarkStarted(ctx, id, ""))
	}
	_, err := st.DeadLetterUpsert(ctx, deadLetter("f-1", "a", "f", 1), "w/1")
	require.NoError(t, err)
	delivered(t, st, "f-1", "b", "f", 1)
	_, err = st.DeliveryStartAttempt(ctx, "f-2", "b")
	require.NoError(t, err)

	blocked, total, err := st.StatsBlockedCorrelations(ctx, 10)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	require.Equal(t, "a", blocked[0].EndpointID)
	require.Equal(t, "dead_lettered", blocked[0].BlockedBy)
	require.Equal(t, "f-1", *blocked[0].BlockingEventID)
	require.EqualValues(t, 1, blocked[0].NextSequence)
	require.EqualValues(t, 2, blocked[0].Parked)
	require.Equal(t, "b", blocked[1].EndpointID)
	require.Equal(t, "delivering", blocked[1].BlockedBy)
	require.Equal(t, "f-2", *blocked[1].BlockingEventID)
	require.EqualValues(t, 2, blocked[1].NextSequence, "b's head is past the cursor, which a holds")
	require.EqualValues(t, 1, blocked[1].Parked)

	sm, err := st.StatsSummary(ctx)
	require.NoError(t, err)
	require.Len(t, sm.ByEndpoint, 2)
	a, b := sm.ByEndpoint[0], sm.ByEndpoint[1]
	require.Equal(t, []int64{2, 0, 0, 1}, []int64{a.Waiting, a.Delivering, a.DeliveredRecently, a.DeadLettersOpen})
	require.Equal(t, []int64{1, 1, 1, 0}, []int64{b.Waiting, b.Delivering, b.DeliveredRecently, b.DeadLettersOpen})
	require.EqualValues(t, 4, sm.InFlight)
	require.EqualValues(t, 1, sm.DeadLettersOpen)
}

// TestStatsReadOnlyThePendingRows: on a ledger of mostly delivered history
// the stats queries reach events through the partial indexes and
// correlations by primary key, never by scanning either table, so
// their cost follows the backlog rather than the history.
func TestStatsReadOnlyThePendingRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)

	// 20,000 delivered long ago over 2,000 correlations, 200 delivered just
	// now, 500 skipped, and a backlog of 120 (queued, waiting, delivering,
	// dead-lettered) across 30 correlations whose sequence 1 never came.
	_, err := pool.Exec(ctx, `
INSERT INTO endpoints (tenant_id, id, url, secret) VALUES ('default', 'ep', 'https://example.com/hook', 'whsec_x');
INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, delivered_at)
SELECT 'default', 'old-'||g, 'c'||(g % 2000), g / 2000 + 1, 't', '{}', '\x01', 'delivered', now() - interval '2 days', now() - interval '1 day'
FROM generate_series(1, 20000) g;
INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, delivered_at)
SELECT 'default', 'new-'||g, 'n'||(g % 50), g / 50 + 1, 't', '{}', '\x01', 'delivered', now() - interval '2 minutes', now() - interval '1 minute'
FROM generate_series(1, 200) g;
INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at)
SELECT 'default', 'skip-'||g, 's'||(g % 100), g / 100 + 1, 't', '{}', '\x01', 'skipped', now() - interval '1 day'
FROM generate_series(1, 500) g;
INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at)
SELECT 'default', 'pend-'||g, 'p'||(g % 30), g / 30 + 2, 't', '{}', '\x01',
       (ARRAY['queued', 'waiting', 'delivering', 'dead_lettered'])[g % 4 + 1], now() - g * interval '1 second'
FROM generate_series(1, 120) g;
INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, delivered_at)
SELECT 'default', id, 'ep', correlation_id, sequence, type, CASE WHEN state = 'queued' THEN 'waiting' ELSE state END, delivered_at FROM events;
INSERT INTO correlations (tenant_id, correlation_id, next_sequence)
SELECT 'default', correlation_id, max(sequence) + 1 FROM events WHERE state IN ('delivered', 'skipped') GROUP BY correlation_id;
ANALYZE events;
ANALYZE deliveries;
ANALYZE correlations;`)
	require.NoError(t, err)

	q := struct {
		StatsSummary             string
		StatsBlockedCorrelations string
	}{dbsqlc.StatsSummary, dbsqlc.StatsBlockedCorrelations}
	plan := func(sql string, args ...any) string {
		t.Helper()
		var out string
		require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&out))
		return out
	}
	// Of one tenant (the API's) and of every tenant (the gauges', the
	// status of every tenant).
	for _, tenant := range []*string{ptr(store.DefaultTenant), nil} {
		summary := plan(q.StatsSummary, tenant)
		require.Contains(t, summary, `"deliveries_pending_idx"`, summary)
		require.Contains(t, summary, `"deliveries_delivered_at_idx"`, summary)
		blocked := plan(q.StatsBlockedCorrelations, 10, tenant, nil)
		require.Contains(t, blocked, `"deliveries_pending_idx"`, blocked)
		for name, p := range map[string]string{"summary": summary, "blocked": blocked} {
			require.NotRegexp(t, `"Node Type": "Seq Scan",[^}]*"Relation Name": "(events|deliveries|correlations)"`, p, "%s scans a whole table", name)
		}
	}
	// The tenants' ranking reads the same backlog, once for every tenant.
	ranked := plan(dbsqlc.StatsTenants, 0, 20) // offset, limit
	require.Contains(t, ranked, `"deliveries_pending_idx"`, ranked)
	require.NotRegexp(t, `"Node Type": "Seq Scan",[^}]*"Relation Name": "(events|deliveries|correlations)"`, ranked, "the ranking scans a whole table")

	// The rewritten queries still answer what they did.
	st, err := store.New(pool)
	require.NoError(t, err)
	tenants, ranks, err := st.StatsTenants(ctx, 0, 20)
	require.NoError(t, err)
	require.EqualValues(t, 1, ranks)
	require.Len(t, tenants, 1)
	require.Positive(t, tenants[0].OldestLagSeconds)
	tenants[0].OldestLagSeconds = 0
	require.Equal(t, store.TenantSummary{TenantID: store.DefaultTenant, Waiting: 60, Delivering: 30}, tenants[0],
		"the queued and waiting deliveries wait; the dead-lettered ones (no dead letter row here) count nowhere")
	_, _, err = st.Tenant(store.DefaultTenant).StatsTenants(ctx, 0, 20)
	require.Error(t, err, "a tenant-bound store reads no other tenant")
	st = st.Tenant(store.DefaultTenant)
	sm, err := st.StatsSummary(ctx)
	require.NoError(t, err)
	sm.ByEndpoint = nil
	require.Equal(t, store.Summary{Queued: 30, InFlight: 60, DeliveredLast5m: 200, OldestLagSeconds: sm.OldestLagSeconds}, sm)
	// The oldest pending event was accepted 120 s before the seeding's
	// now(): the lag is at least that, and at most what the database says
	// after the summary (however long the seeding, ANALYZE and the plans
	// took on a busy machine).
	var after float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM now() - min(accepted_at))::float8 FROM events WHERE id LIKE 'pend-%'`).Scan(&after))
	require.GreaterOrEqual(t, sm.OldestLagSeconds, 119.0)
	require.LessOrEqual(t, sm.OldestLagSeconds, after+0.5)
	top, total, err := st.StatsBlockedCorrelations(ctx, 5)
	require.NoError(t, err)
	require.EqualValues(t, 30, total)
	require.Len(t, top, 5)
	for _, b := range top {
		require.Equal(t, "missing", b.BlockedBy)
		require.EqualValues(t, 1, b.NextSequence)
		require.EqualValues(t, 4, b.Parked)
	}
}

func ptr[T any](v T) *T { return &v }
