package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// backlog gives tenant a backlog of n correlations of one event each,
// routed to its endpoint <tenant>-ep, accepted (and their correlations and
// deliveries last changed) age ago, oldest first: state is the events'
// and the deliveries' ("queued" events' deliveries wait). Written in one
// statement each, as a bulk load would, rather than n API calls.
func backlog(t *testing.T, st *store.Store, tenant, state string, n int, age time.Duration) {
	t.Helper()
	ctx := context.Background()
	_, _, err := st.TenantPut(ctx, store.Tenant{ID: tenant, Name: tenant})
	require.NoError(t, err)
	_, err = st.Tenant(tenant).EndpointInsert(ctx, tenant+"-ep", "https://example.com/ep", "whsec_x", nil)
	require.NoError(t, err)
	delivery := state
	if state == "queued" {
		delivery = "waiting"
	}
	secs := age.Seconds()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at)
		  SELECT $1, $1 || '-' || i, $1 || '-c' || i, 1, 't', '{}', '\x01', $2, now() - make_interval(secs => $4 + $3 - i), now() - make_interval(secs => $4)
		  FROM generate_series(1, $3::int) i`, []any{tenant, state, n, secs}},
		{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, updated_at)
		  SELECT $1, $1 || '-' || i, $1 || '-ep', $1 || '-c' || i, 1, 't', $2, now() - make_interval(secs => $4)
		  FROM generate_series(1, $3::int) i`, []any{tenant, delivery, n, secs}},
		{`INSERT INTO correlations (tenant_id, correlation_id, high_water, updated_at)
		  SELECT $1, $1 || '-c' || i, 1, now() - make_interval(secs => $3 + $2 - i)
		  FROM generate_series(1, $2::int) i`, []any{tenant, n, secs}},
	} {
		_, err := st.Pool().Exec(ctx, q.sql, q.args...)
		require.NoError(t, err)
	}
}

// twoTenants is a store with tenant "big"'s backlog of 10,000 events in
// state, all due before tenant "small"'s one.
func twoTenants(t *testing.T, state string) *store.Store {
	t.Helper()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	backlog(t, st, "big", state, 10_000, 2*time.Hour)
	backlog(t, st, "small", state, 1, time.Hour)
	return st
}

// TestQueuedSweepServesTenantsInTurn: a tenant with a backlog of 10,000
// queued events, all due before another tenant's one, does not make the
// other wait behind it: the first pass of the queued sweep takes the other
// tenant's event and fills the rest of its batch from the backlog, oldest
// first.
func TestQueuedSweepServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	got, err := twoTenants(t, "queued").EventsQueuedClaim(context.Background(), 100, time.Minute)
	require.NoError(t, err)
	byTenant := map[string]int{}
	for _, e := range got {
		byTenant[e.TenantID]++
	}
	require.Equal(t, map[string]int{"big": 99, "small": 1}, byTenant)
	require.Contains(t, ids(got), "big-1")
}

// TestHeadsSweepServesTenantsInTurn: the repair sweep (stuck lanes' heads)
// serves a tenant with one stuck correlation in its first pass, although
// another tenant has 10,000 that became due before it.
func TestHeadsSweepServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	got, err := twoTenants(t, "waiting").LanesStuckHeadsClaim(context.Background(), 100, time.Minute)
	require.NoError(t, err)
	byTenant := map[string]int{}
	for _, h := range got {
		byTenant[h.Event.TenantID]++
	}
	require.Equal(t, map[string]int{"big": 99, "small": 1}, byTenant)
}

// circuitBacklog gives tenant n endpoints with auto_replay,
// <tenant>-ep-<i>, with their circuits' rows set by set (an UPDATE's SET
// list over x.i, the endpoint's number, and $2, an age in seconds: the
// lower i, the older), and with deadLetters one open dead letter each,
// their endpoints then deleted. In a few statements each, as a bulk load
// would, rather than n API calls.
func circuitBacklog(t *testing.T, st *store.Store, tenant string, n int, age time.Duration, set string, deadLetters bool) {
	t.Helper()
	ctx := context.Background()
	_, _, err := st.TenantPut(ctx, store.Tenant{ID: tenant, Name: tenant})
	require.NoError(t, err)
	ep := `$1 || '-ep-' || lpad(i::text, 6, '0')`
	type stmt struct {
		sql  string
		args []any
	}
	stmts := []stmt{
		{`INSERT INTO endpoints (tenant_id, id, url, secret, auto_replay)
		  SELECT $1, ` + ep + `, 'https://example.com/ep', 'whsec_x', true FROM generate_series(1, $2::int) i`, []any{tenant, n}},
		{`INSERT INTO endpoint_circuits (endpoint_id, tenant_id) SELECT ` + ep + `, $1 FROM generate_series(1, $2::int) i`, []any{tenant, n}},
		{`UPDATE endpoint_circuits c SET ` + set + `
		  FROM (SELECT ` + ep + ` AS id, i FROM generate_series(1, $3::int) i) x WHERE c.endpoint_id = x.id`, []any{tenant, age.Seconds(), n}},
	}
	if deadLetters {
		stmts = append(stmts,
			stmt{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state)
			      SELECT $1, $1 || '-' || i, $1 || '-c' || i, 1, 't', '{}', '\x01', 'dead_lettered' FROM generate_series(1, $2::int) i`, []any{tenant, n}},
			stmt{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state)
			      SELECT $1, $1 || '-' || i, ` + ep + `, $1 || '-c' || i, 1, 't', 'dead_lettered' FROM generate_series(1, $2::int) i`, []any{tenant, n}},
			stmt{`INSERT INTO dead_letters (tenant_id, event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, dead_lettered_at)
			      SELECT $1, $1 || '-' || i, $1 || '-c' || i, 1, ` + ep + `, '{}', '[]', 'endpoint deleted', now()
			      FROM generate_series(1, $2::int) i`, []any{tenant, n}},
			stmt{`UPDATE endpoints SET deleted_at = now(), deleted_by = 'op' WHERE tenant_id = $1`, []any{tenant}})
	}
	for _, q := range stmts {
		_, err := st.Pool().Exec(ctx, q.sql, q.args...)
		require.NoError(t, err, q.sql)
	}
}

// twoTenantsCircuits is a store with tenant "big"'s 1,000 endpoints, ten
// batches of a sweep, whose circuits are set by set and all due before
// tenant "small"'s one.
func twoTenantsCircuits(t *testing.T, set string, deadLetters bool) *store.Store {
	t.Helper()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	circuitBacklog(t, st, "big", 1_000, 2*time.Hour, set, deadLetters)
	circuitBacklog(t, st, "small", 1, time.Hour, set, deadLetters)
	return st
}

// inTurn asserts that a sweep's batch of 100 (got, or err) took small's
// one row and 99 of big's; tenant names a row's tenant.
func inTurn[T any](t *testing.T, got []T, err error, tenant func(T) string) {
	t.Helper()
	require.NoError(t, err)
	byTenant := map[string]int{}
	for _, row := range got {
		byTenant[tenant(row)]++
	}
	require.Equal(t, map[string]int{"big": 99, "small": 1}, byTenant)
}

// TestAutoReplaySweepServesTenantsInTurn: a tenant with 1,000 endpoints
// whose closed circuits wait for an auto-replay, all pending before
// another tenant's one, does not make the other wait behind them.
func TestAutoReplaySweepServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	st := twoTenantsCircuits(t, `auto_replay_pending_since = now() - make_interval(secs => $2 + $3 - x.i),
		auto_replay_requested_at = now()`, false)
	got, err := st.CircuitsAutoReplayPending(context.Background(), 100)
	inTurn(t, got, err, func(p store.AutoReplayPending) string { return p.TenantID })
	// Within a turn, in the order they became due: big's oldest, then small's.
	require.Equal(t, []string{"big-ep-000001", "small-ep-000001", "big-ep-000002"},
		[]string{got[0].EndpointID, got[1].EndpointID, got[2].EndpointID})
}

// TestProbeReplaySweepServesTenantsInTurn: the probe replays of open
// circuits serve a tenant with one due although another has 1,000 whose
// probes became due before it.
func TestProbeReplaySweepServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	st := twoTenantsCircuits(t, `state = 'open', opened_at = now() - make_interval(secs => $2 + $3),
		next_probe_at = now() - make_interval(secs => $2 + $3 - x.i)`, false)
	got, err := st.CircuitsProbeReplayClaim(context.Background(), 100, 10*time.Second)
	inTurn(t, got, err, func(p store.AutoReplayPending) string { return p.TenantID })
}

// TestWakeSweepServesTenantsInTurn: the wake of closed circuits' lanes
// serves a tenant with one circuit to wake although another has 1,000
// that closed before it.
func TestWakeSweepServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	st := twoTenantsCircuits(t, `wake_requested_at = now() - make_interval(secs => $2 + $3 - x.i)`, false)
	got, err := st.CircuitsWakePending(context.Background(), 100)
	inTurn(t, got, err, func(w store.CircuitWake) string { return w.TenantID })
}

// TestCircuitEventCatchUpServesTenantsInTurn: the catch-up of coalesced
// circuit events (part of the wake sweep) serves a tenant with one
// endpoint to tell about although another has 1,000 older ones.
func TestCircuitEventCatchUpServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	st := twoTenantsCircuits(t, `events_coalesced = 1, event_state = 'closed',
		event_at = now() - make_interval(secs => $2 + $3 - x.i)`, false)
	got, err := dbsqlc.New(st.Pool()).CircuitsEventCatchUp(context.Background(),
		dbsqlc.CircuitsEventCatchUpParams{Secs: store.CircuitEventEvery.Seconds(), Limit: 100})
	inTurn(t, got, err, func(r dbsqlc.CircuitsEventCatchUpRow) string { return r.TenantID })
}

// TestDeletedEndpointsSweepServesTenantsInTurn: the sweep of deleted
// endpoints' open dead letters serves a tenant with one such endpoint
// although another has 1,000 whose ids come first.
func TestDeletedEndpointsSweepServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	st := twoTenantsCircuits(t, `updated_at = now() - make_interval(secs => $2 + $3 - x.i)`, true)
	got, err := st.EndpointsDeletedOpen(context.Background(), 100)
	inTurn(t, got, err, func(ep store.DeletedEndpoint) string { return ep.TenantID })
}

// overlapping runs first, a sweep's claim of 100, in a transaction left
// open, as another API process's sweep still holding its batch, then
// second, the same sweep's next claim, and asserts that the second took a
// full batch of rows the first did not: a claim skips what another holds
// and takes the next rows rather than coming back short. Both name the
// rows they took.
func overlapping(t *testing.T, st *store.Store, first func(q *dbsqlc.Queries) ([]string, error), second func() ([]string, error)) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	held, err := first(dbsqlc.New(tx))
	require.NoError(t, err)
	require.Len(t, held, 100)
	next, err := second()
	require.NoError(t, err)
	require.Len(t, next, 100, "the overlapping claim came back short")
	require.Empty(t, intersect(held, next))
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range a {
		in[s] = true
	}
	var out []string
	for _, s := range b {
		if in[s] {
			out = append(out, s)
		}
	}
	return out
}

// named lists the rows a claim took by name.
func named[T any](got []T, err error, name func(T) string) ([]string, error) {
	out := make([]string, len(got))
	for i, row := range got {
		out[i] = name(row)
	}
	return out, err
}

// TestQueuedSweepsOverlap: two API processes' queued sweeps, the first's
// batch still held, take different full batches.
func TestQueuedSweepsOverlap(t *testing.T) {
	t.Parallel()
	st := twoTenants(t, "queued")
	overlapping(t, st, func(q *dbsqlc.Queries) ([]string, error) {
		got, err := q.EventsQueuedClaim(context.Background(), dbsqlc.EventsQueuedClaimParams{Limit: 100, Secs: time.Minute.Seconds()})
		return named(got, err, func(e dbsqlc.EventsRouted) string { return e.ID })
	}, func() ([]string, error) {
		got, err := st.EventsQueuedClaim(context.Background(), 100, time.Minute)
		return ids(got), err
	})
}

// TestHeadsSweepsOverlap: as TestQueuedSweepsOverlap, for the repair
// sweep's claim of stuck lanes' correlations.
func TestHeadsSweepsOverlap(t *testing.T) {
	t.Parallel()
	st := twoTenants(t, "waiting")
	overlapping(t, st, func(q *dbsqlc.Queries) ([]string, error) {
		got, err := q.LanesStuckHeadsClaim(context.Background(), dbsqlc.LanesStuckHeadsClaimParams{Limit: 100, Secs: time.Minute.Seconds()})
		return named(got, err, func(h dbsqlc.LanesStuckHeadsClaimRow) string { return h.CorrelationID })
	}, func() ([]string, error) {
		got, err := st.LanesStuckHeadsClaim(context.Background(), 100, time.Minute)
		return named(got, err, func(h store.StuckHead) string { return h.Event.CorrelationID })
	})
}

// TestProbeReplaySweepsOverlap: as TestQueuedSweepsOverlap, for the probe
// replays of open circuits.
func TestProbeReplaySweepsOverlap(t *testing.T) {
	t.Parallel()
	st := twoTenantsCircuits(t, `state = 'open', opened_at = now() - make_interval(secs => $2 + $3),
		next_probe_at = now() - make_interval(secs => $2 + $3 - x.i)`, false)
	overlapping(t, st, func(q *dbsqlc.Queries) ([]string, error) {
		got, err := q.CircuitsProbeReplayClaim(context.Background(), dbsqlc.CircuitsProbeReplayClaimParams{Limit: 100, Secs: 10})
		return named(got, err, func(c dbsqlc.CircuitsProbeReplayClaimRow) string { return c.EndpointID })
	}, func() ([]string, error) {
		got, err := st.CircuitsProbeReplayClaim(context.Background(), 100, 10*time.Second)
		return named(got, err, func(c store.AutoReplayPending) string { return c.EndpointID })
	})
}
