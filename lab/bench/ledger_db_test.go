package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/bench/internal/dbsqlc"
	"github.com/hookflow/hookflow/lab/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestLedgerSynthOnSchema writes a small synthetic history on hookflow's
// real, migrated schema, and reads it back through hookflow's own store, as
// the ledger bench's traffic and cleaner would: a history that hookflow
// cannot read as its own (an event without its delivery, a cursor without
// its lane) would measure something other than production. Outside
// TestBenchShortRun, which does not run the ledger bench, nothing else
// executes queries/ledger.sql.
func TestLedgerSynthOnSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointInsert(ctx, "ep_bench", "https://receiver.example/webhook", "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", nil)
	require.NoError(t, err)

	lb := &ledgerBench{pool: pool, conns: 2, s: &stack{endpointID: ep.ID}, p: &progress{w: io.Discard, began: time.Now()}}
	lb.ret, err = defaultRetentions()
	require.NoError(t, err)

	plan := newSynthPlan(1050, 100, 400)
	require.NoError(t, lb.exec(ctx, "empty the ledger", dbsqlc.LedgerTruncate))
	require.NoError(t, lb.synth(ctx, plan, time.Now().Add(-ledgerNewest-bytesSpan), bytesSpan))
	require.NoError(t, lb.settle(ctx))

	count := func(sql string) int64 {
		t.Helper()
		var n int64
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&n), sql)
		return n
	}
	require.Equal(t, plan.rows, count("SELECT count(*) FROM events WHERE state = 'delivered'"))
	require.Equal(t, plan.rows, count("SELECT count(*) FROM deliveries WHERE state = 'delivered' AND endpoint_id = 'ep_bench' AND delivered_at IS NOT NULL"),
		"one delivered delivery per event")
	require.Zero(t, count(`SELECT count(*) FROM deliveries d JOIN events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id
		WHERE d.accepted_at <> e.accepted_at`), "a delivery keeps its event's accepted_at, as EventInsertRouted writes it")
	require.Equal(t, plan.attempts(), count("SELECT count(*) FROM delivery_attempts WHERE endpoint_id = 'ep_bench'"))
	require.Equal(t, plan.correlations, count("SELECT count(*) FROM lanes WHERE endpoint_id = 'ep_bench'"), "one lane per correlation")

	// Each correlation reads as finished: its cursor and its lane past its
	// last event, nothing left to release, nothing for the heads sweep.
	for _, c := range []int64{0, 5, plan.correlations - 1} {
		corr := fmt.Sprintf("acct_%012d", c)
		load, err := st.CorrelationLoadOf(ctx, corr, 0)
		require.NoError(t, err)
		require.Equal(t, plan.eventsOf(c)+1, load.Next, corr)
		require.Equal(t, load.Next, load.Frontier, corr)
		require.Empty(t, load.Arrived, corr)
		require.Len(t, load.Lanes, 1, corr)
		require.Empty(t, load.Lanes[0].Open, corr)
		lane, err := st.LaneGet(ctx, corr, ep.ID)
		require.NoError(t, err)
		require.Equal(t, plan.eventsOf(c), lane.LastFinished, corr)
		require.Equal(t, plan.eventsOf(c), lane.Previous, corr)
		require.Empty(t, lane.Skipped, corr)
	}
	ev, err := st.EventGet(ctx, fmt.Sprintf("evt_%020d", 10))
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivered, ev.State)
	require.Equal(t, []string{ep.ID}, ev.Endpoints)
	require.Len(t, ev.Deliveries, 1)
	require.Equal(t, int32(2), ev.Deliveries[0].Attempts, "every tenth event was retried once")
	heads, err := st.LanesStuckHeadsClaim(ctx, 100, time.Second)
	require.NoError(t, err)
	require.Empty(t, heads)

	sz, err := lb.sizes(ctx)
	require.NoError(t, err)
	require.Positive(t, sz.deliveries)
	require.Positive(t, sz.correlations)
	for _, s := range lb.explain(ctx, "t") {
		require.Empty(t, s.Error, s.Name)
	}

	// Everything is past a 1 s retention: the cleaner's own code prunes the
	// whole history, deliveries with their events, and keeps every cursor.
	run, err := lb.clean(ctx, time.Second, time.Second, time.Second)
	require.NoError(t, err)
	require.Equal(t, plan.rows, run.PayloadsPruned)
	require.Equal(t, plan.rows, run.KeysDeleted)
	require.Zero(t, count("SELECT count(*) FROM deliveries"))
	require.Zero(t, count("SELECT count(*) FROM delivery_attempts"))
	require.Equal(t, plan.correlations, count("SELECT count(*) FROM lanes"))
	require.Equal(t, plan.correlations, count("SELECT count(*) FROM correlations"))
	var left LedgerLeft
	var payload float64
	require.NoError(t, pool.QueryRow(ctx, dbsqlc.LedgerCounts).Scan(&left.Events, &left.PayloadsPruned, &payload, &left.Attempts))
	require.Zero(t, left.Events)
}
