package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/testenv"
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
		{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, state, updated_at)
		  SELECT $1, $1 || '-' || i, $1 || '-ep', $1 || '-c' || i, 1, $2, now() - make_interval(secs => $4)
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
