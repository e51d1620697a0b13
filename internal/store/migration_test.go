package store_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/schema"
)

// poolBefore is a fresh database migrated up to version, and the SQL of
// the migration after it, whose comment must begin with opening.
func poolBefore(t *testing.T, version int64, opening string) (*pgxpool.Pool, string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	up := migrateTo(t, pool, version)
	require.True(t, strings.HasPrefix(up, opening), "the migration after %d begins %q", version, opening)
	return pool, up
}

// migrateTo applies the embedded up-migrations whose version is at most
// version, their SQL as it is, without the migration runner's bookkeeping,
// and returns the SQL of the next one.
func migrateTo(t *testing.T, pool *pgxpool.Pool, version int64) string {
	t.Helper()
	ms, err := schema.Migrations()
	require.NoError(t, err)
	for _, m := range ms {
		if m.Version > version {
			return m.SQL
		}
		_, err := pool.Exec(context.Background(), m.SQL)
		require.NoError(t, err, m.Name)
	}
	t.Fatalf("no migration after %d", version)
	return ""
}

// migrateRest applies the embedded up-migrations after version, in order:
// today's store reads every one of them.
func migrateRest(t *testing.T, pool *pgxpool.Pool, version int64) {
	t.Helper()
	ms, err := schema.Migrations()
	require.NoError(t, err)
	for _, m := range ms {
		if m.Version > version {
			require.NoError(t, execInTx(context.Background(), pool, m.SQL), m.Name)
		}
	}
}

// undoRest applies the down-migrations of every migration after version,
// newest first.
func undoRest(t *testing.T, pool *pgxpool.Pool, version int64) {
	t.Helper()
	ms, err := schema.Migrations()
	require.NoError(t, err)
	for i := len(ms) - 1; i >= 0 && ms[i].Version > version; i-- {
		sql, err := os.ReadFile("../../schema/migrations/" + ms[i].Name + ".down.sql")
		require.NoError(t, err)
		require.NoError(t, execInTx(context.Background(), pool, string(sql)), ms[i].Name)
	}
}

func execInTx(ctx context.Context, pool *pgxpool.Pool, sql string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql)
		return err
	})
}

// TestMigration009MovesSingleEndpointRows: a ledger written before fan-out
// (every event naming its one endpoint, some delivered rows pruned) comes
// out of 009 with one delivery per event in the event's state, its dead
// letters, attempts and lanes where they belong, and works on from there;
// while it is still one delivery per event, 009's down migration takes it
// back.
func TestMigration009MovesSingleEndpointRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 8, "-- Fan-out")

	// s: one endpoint; 1 delivered and pruned, 2 skipped, 3 delivered, 4
	// skipped, 5 dead-lettered, 6 queued. p: one endpoint, everything
	// finished pruned, 3 waiting. m: two endpoints taking turns.
	_, err := pool.Exec(ctx, `
INSERT INTO endpoints (id, url, secret) VALUES ('a', 'https://a', 'whsec_a'), ('b', 'https://b', 'whsec_b');
INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, released_at, delivered_at, has_dead_letter) VALUES
  ('s-2', 's', 2, 'a', 't', NULL, '\x01', 'skipped', now(), NULL, true),
  ('s-3', 's', 3, 'a', 't', '{}', '\x01', 'delivered', now(), now(), false),
  ('s-4', 's', 4, 'a', 't', '{}', '\x01', 'skipped', now(), NULL, true),
  ('s-5', 's', 5, 'a', 't', '{}', '\x01', 'dead_lettered', now(), NULL, true),
  ('s-6', 's', 6, 'a', 't', '{}', '\x01', 'queued', NULL, NULL, false),
  ('p-3', 'p', 3, 'a', 't', '{}', '\x01', 'waiting', NULL, NULL, false),
  ('m-1', 'm', 1, 'a', 't', '{}', '\x01', 'delivered', now(), now(), false),
  ('m-2', 'm', 2, 'b', 't', '{}', '\x01', 'skipped', now(), NULL, true),
  ('m-3', 'm', 3, 'b', 't', '{}', '\x01', 'delivered', now(), now(), false),
  ('m-4', 'm', 4, 'a', 't', '{}', '\x01', 'skipped', now(), NULL, true);
INSERT INTO correlations (correlation_id, next_sequence, skipped_tail, high_water) VALUES
  ('s', 5, '{4}', 6), ('p', 3, '{}', 3), ('m', 5, '{4}', 4);
INSERT INTO delivery_attempts (event_id, attempt, started_at, latency_ms, status_code, outcome) VALUES
  ('s-3', 1, now(), 5, 200, 'delivered'), ('s-5', 1, now(), 5, 400, 'rejected'), ('m-1', 1, now(), 5, 200, 'delivered');
INSERT INTO dead_letters (event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, dead_lettered_at, generation, status, window_key) VALUES
  ('s-2', 's', 2, 'a', '{}', '[]', '400', now(), 1, 'skipped', 'r/1'),
  ('s-4', 's', 4, 'a', '{}', '[]', '400', now(), 1, 'skipped', 'r/1'),
  ('s-5', 's', 5, 'a', '{}', '[]', '400', now(), 2, 'open', 'r/2'),
  ('m-2', 'm', 2, 'b', '{}', '[]', '400', now(), 1, 'skipped', 'r/1'),
  ('m-4', 'm', 4, 'a', '{}', '[]', '400', now(), 1, 'skipped', 'r/1');`)
	require.NoError(t, err)

	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 9)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	for id, want := range map[string][2]contract.State{
		"s-2": {contract.StateSkipped, contract.StateSkipped},
		"s-3": {contract.StateDelivered, contract.StateDelivered},
		"s-5": {contract.StateDeadLettered, contract.StateDeadLettered},
		"s-6": {contract.StateQueued, contract.StateWaiting},
		"p-3": {contract.StateWaiting, contract.StateWaiting},
		"m-2": {contract.StateSkipped, contract.StateSkipped},
	} {
		e, err := st.EventGet(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, want[0], e.State, id)
		require.Len(t, e.Deliveries, 1, id)
		require.Equal(t, want[1], e.Deliveries[0].State, id)
	}
	e, err := st.EventGet(ctx, "s-5")
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, e.Endpoints)
	require.EqualValues(t, 1, e.Deliveries[0].Attempts)
	require.EqualValues(t, 2, e.Deliveries[0].DeadLetterGeneration)
	require.Equal(t, store.DeadLetterOpen, e.Deliveries[0].DeadLetterStatus)
	attempts, err := st.AttemptsList(ctx, "m-1", "a")
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	d, err := st.DeadLetterGet(ctx, "m-2", "b")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterSkipped, d.Status)

	for _, c := range []struct {
		corr, endpoint string
		want           store.Lane
	}{
		{"s", "a", store.Lane{EndpointID: "a", LastFinished: 4, Previous: 3, Skipped: []int64{4}}},
		{"p", "a", store.Lane{EndpointID: "a", LastFinished: 2, Previous: 2}},
		{"m", "a", store.Lane{EndpointID: "a", LastFinished: 4, Previous: 1, Skipped: []int64{4}}},
		{"m", "b", store.Lane{EndpointID: "b", LastFinished: 3, Previous: 3}},
	} {
		require.Equal(t, c.want, lane(t, st, c.corr, c.endpoint), c.corr+"/"+c.endpoint)
	}
	var column bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'events' AND column_name = 'endpoint_id')`).Scan(&column))
	require.False(t, column, "events.endpoint_id is gone")

	// The ledger goes on from there: s-5's operator skips it, and the
	// cursor moves to queued 6.
	ok, err := st.DeadLetterMarkSkipped(ctx, "s-5", "a", 2, "op", "")
	require.NoError(t, err)
	require.True(t, ok)
	skipped(t, st, "s-5", "a", "s", 5)
	require.EqualValues(t, 6, cursor(t, st, "s"))
	require.Equal(t, []int64{4, 5}, lane(t, st, "s", "a").Skipped)

	// Still one delivery per event: the down migration takes it back, with
	// the correlations' tails.
	undoRest(t, pool, 8)
	var endpoint string
	require.NoError(t, pool.QueryRow(ctx, `SELECT endpoint_id FROM events WHERE id = 'm-2'`).Scan(&endpoint))
	require.Equal(t, "b", endpoint)
	var tail []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT skipped_tail FROM correlations WHERE correlation_id = 's'`).Scan(&tail))
	require.Equal(t, []int64{4, 5}, tail)
	require.NoError(t, pool.QueryRow(ctx, `SELECT skipped_tail FROM correlations WHERE correlation_id = 'm'`).Scan(&tail))
	require.Equal(t, []int64{4}, tail)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE event_id = 's-3'`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestMigration009DownRefusesFanOut: once an event has two deliveries, or
// none, the down migration refuses rather than drop one.
func TestMigration009DownRefusesFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	down, err := os.ReadFile("../../schema/migrations/009_fanout.down.sql")
	require.NoError(t, err)
	for _, endpoints := range [][]string{{"a", "b"}, nil} {
		id := "e-" + strings.Join(endpoints, "")
		_, ok, err := st.EventInsertRouted(ctx, event(id, id, 1), endpoints, nil)
		require.NoError(t, err)
		require.True(t, ok)
		err = execInTx(ctx, st.Pool(), string(down))
		require.ErrorContains(t, err, "cannot undo 009_fanout")
		_, err = st.Pool().Exec(ctx, `DELETE FROM deliveries WHERE event_id = $1`, id)
		require.NoError(t, err)
		_, err = st.Pool().Exec(ctx, `DELETE FROM events WHERE id = $1`, id)
		require.NoError(t, err)
	}
}

// TestMigration010KeepsEndpointsAndGoesBack: the endpoints and deliveries
// of before 010 come out of it with the server's settings (every new column
// NULL) and still route; its constraints refuse what the API refuses; and
// its down migration takes it back, the settings dropped, the rest kept.
func TestMigration010KeepsEndpointsAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 9, "-- Per-endpoint delivery settings")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret) VALUES ('a', 'https://a', 'whsec_a')`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 10)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, store.Settings{}, ep.Settings, "the server's, as before")
	ev, ok, err := st.EventInsertRouted(ctx, event("e1", "c", 1), []string{"a"}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, ev.Deliveries[0].RecoveryWindow())
	for _, bad := range []string{`recovery_window_ms = 0`, `recovery_window_ms = 259200001`, `timeout_ms = 999`, `timeout_ms = 60001`,
		`rate_limit = 0`, `rate_limit = -1`, `headers = '[]'`} {
		_, err := pool.Exec(ctx, `UPDATE endpoints SET `+bad+` WHERE id = 'a'`)
		require.ErrorContains(t, err, "violates check constraint", bad)
	}
	_, err = pool.Exec(ctx, `UPDATE endpoints SET headers = '{"X-K":"v"}', rate_limit = 5, timeout_ms = 2000 WHERE id = 'a'`)
	require.NoError(t, err)
	// The limiter's row as 010 has it (the store's reservation reads
	// migration 012's counter).
	_, err = pool.Exec(ctx, `INSERT INTO endpoint_rate_slots (endpoint_id, next_slot) VALUES ('a', now())`)
	require.NoError(t, err)

	undoRest(t, pool, 9)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name IN ('endpoints', 'deliveries') AND column_name IN ('headers', 'recovery_window_ms', 'timeout_ms', 'rate_limit')`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events_routed WHERE id = 'e1'`).Scan(&n))
	require.Equal(t, 1, n, "the view is back as 009 had it")
}

// TestMigration012CountsFromZeroAndGoesBack: a limiter row of before 012
// starts counting throttles at 0 and keeps its slot; the down migration
// drops the count and keeps the row.
func TestMigration012CountsFromZeroAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 11, "-- The rate limiter counts the attempts it held back")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret, rate_limit) VALUES ('a', 'https://a', 'whsec_a', 1)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO endpoint_rate_slots (endpoint_id, next_slot) VALUES ('a', now() + interval '1 hour')`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 12)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	// Read from the row: the health query reads later migrations' columns.
	throttled := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT throttled FROM endpoint_rate_slots WHERE endpoint_id = 'a'`).Scan(&n))
		return n
	}
	require.Zero(t, throttled(), "nothing was counted before 012")
	slot, err := st.EndpointRateReserve(ctx, "a", 1)
	require.NoError(t, err)
	require.Greater(t, slot.Wait, 59*time.Minute, "the slot of before is kept")
	require.Equal(t, int64(1), throttled())

	undoRest(t, pool, 11)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM endpoint_rate_slots WHERE endpoint_id = 'a'`).Scan(&n))
	require.Equal(t, 1, n, "the limiter's row is kept")
}

// TestMigration015KeepsCircuitsAndGoesBack: an endpoint and a circuit of
// before 015 come out of it with the failure rate's defaults and no close
// recorded, and the breaker goes on from the failures it counted; its
// constraints refuse what the API refuses; and its down migration takes it
// back, the circuit's row kept.
func TestMigration015KeepsCircuitsAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 14, "-- The circuit breaker's failure rate")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret, circuit_failure_threshold) VALUES ('a', 'https://a', 'whsec_a', 3);
INSERT INTO endpoint_circuits (endpoint_id, consecutive_failures, failing_since) VALUES ('a', 2, now())`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 15)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, store.Settings{CircuitFailureThreshold: 3}, ep.Settings, "the defaults, as before")
	c, err := st.CircuitGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 2, c.ConsecutiveFailures)
	require.Nil(t, c.ClosedAt)
	tr, err := st.CircuitFailed(ctx, "a", "x", ep.Settings)
	require.NoError(t, err)
	require.True(t, tr.Opened, "the third consecutive failure opens it, as it would have before")
	require.Equal(t, store.TriggerConsecutiveFailures, tr.Trigger)
	for _, bad := range []string{`circuit_failure_rate = 0`, `circuit_failure_rate = 101`, `circuit_window_ms = 9999`,
		`circuit_window_ms = 3600001`, `circuit_min_attempts = 0`, `circuit_min_attempts = 10001`} {
		_, err := pool.Exec(ctx, `UPDATE endpoints SET `+bad+` WHERE id = 'a'`)
		require.ErrorContains(t, err, "violates check constraint", bad)
	}
	_, err = pool.Exec(ctx, `UPDATE endpoints SET circuit_failure_rate = 100, circuit_window_ms = 10000, circuit_min_attempts = 1 WHERE id = 'a'`)
	require.NoError(t, err)

	undoRest(t, pool, 14)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name = 'endpoints' AND column_name IN ('circuit_failure_rate', 'circuit_window_ms', 'circuit_min_attempts'))
		   OR (table_name = 'endpoint_circuits' AND column_name = 'rate_counted_at')`).Scan(&n))
	require.Zero(t, n)
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM endpoint_circuits WHERE endpoint_id = 'a'`).Scan(&state))
	require.Equal(t, store.CircuitOpen, state, "the circuit's row is kept")
}

// TestMigration016WakesTheLanesOfACircuitOpenBeforeIt: a circuit open
// before 016 asks to wake its lanes when it closes after it, as one opened
// after would; its down migration takes the column and indexes back, the
// circuit's row kept.
func TestMigration016WakesTheLanesOfACircuitOpenBeforeIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 15, "-- Waking the lanes an open circuit holds")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret) VALUES ('a', 'https://a', 'whsec_a');
INSERT INTO endpoint_circuits (endpoint_id, state, consecutive_failures, failing_since, opened_at, next_probe_at)
VALUES ('a', 'open', 5, now(), now(), now() + interval '5 minutes')`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 16)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	tr, err := st.CircuitSucceeded(ctx, "a", false, 1)
	require.NoError(t, err)
	require.True(t, tr.Closed)
	wakes, err := st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, wakes, 1)
	require.Equal(t, "a", wakes[0].EndpointID)

	undoRest(t, pool, 15)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'endpoint_circuits' AND column_name = 'wake_requested_at'`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes
		WHERE indexname IN ('endpoint_circuits_wake_idx', 'deliveries_delivering_idx')`).Scan(&n))
	require.Zero(t, n)
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM endpoint_circuits WHERE endpoint_id = 'a'`).Scan(&state))
	require.Equal(t, store.CircuitClosed, state, "the circuit's row is kept")
}

// TestMigration019CapsAttemptsInFlightAndGoesBack: an endpoint of before
// 019 gets the default cap; the constraint refuses what the API refuses;
// the down migration takes the column and the lease tables back.
func TestMigration019CapsAttemptsInFlightAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 18, "-- A cap on an endpoint's attempts in flight")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret) VALUES ('a', 'https://a', 'whsec_a')`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 19)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, store.DefaultMaxInFlight, ep.Settings.InFlightCap(), "the default, as if uncapped before")
	for _, bad := range []string{`max_in_flight = 0`, `max_in_flight = 10001`} {
		_, err := pool.Exec(ctx, `UPDATE endpoints SET `+bad+` WHERE id = 'a'`)
		require.ErrorContains(t, err, "violates check constraint", bad)
	}
	l, err := st.EndpointLeaseAcquire(ctx, "a", "x", 1, time.Minute)
	require.NoError(t, err)
	require.True(t, l.Taken)

	undoRest(t, pool, 18)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name = 'endpoints' AND column_name = 'max_in_flight') OR table_name IN ('endpoint_leases', 'endpoint_in_flight')`).Scan(&n))
	require.Zero(t, n)
}

// TestMigration020KeepsEndpointsAndGoesBack: an endpoint of before 020 has
// a path that is not public (redacted, the safe reading) and no URL change
// recorded; a change of URL made after it is recorded; the down migration
// takes the column and the table back.
func TestMigration020KeepsEndpointsAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 19, "-- An endpoint's URL and what follows it")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret) VALUES ('a', 'https://a.example/hook/t0ken-in-path', 'whsec_a')`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 20)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointGet(ctx, "a")
	require.NoError(t, err)
	require.False(t, ep.Settings.URLPathPublic)
	to := "https://a.example/other"
	_, err = st.EndpointUpdate(ctx, "a", store.EndpointChange{URL: &to, By: store.Actor{ID: "key_x", Name: "ops"}})
	require.NoError(t, err)
	changes, err := st.EndpointURLChanges(ctx, "a", 10)
	require.NoError(t, err)
	require.Len(t, changes, 1)
	require.Equal(t, "https://a.example/[redacted]", changes[0].OldURL)
	require.Equal(t, store.Actor{ID: "key_x", Name: "ops"}, changes[0].By)

	undoRest(t, pool, 19)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name = 'endpoints' AND column_name = 'url_path_public') OR table_name = 'endpoint_url_changes'`).Scan(&n))
	require.Zero(t, n)
}

// TestMigration021HalfOpensAndGoesBack: a circuit of before 021 works on
// after it (half-open at an answer, K answers closing it); 024 keeps the
// opening of the outage a close ended. Their down migrations take the
// columns back, and a half-open circuit goes back open (the state 020
// knows), its row kept.
func TestMigration021HalfOpensAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 20, "-- A flapping receiver rests")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (id, url, secret) VALUES ('a', 'https://a', 'whsec_a'), ('b', 'https://b', 'whsec_b');
INSERT INTO endpoint_circuits (endpoint_id, state, consecutive_failures, failing_since, opened_at, next_probe_at)
VALUES ('a', 'open', 5, now(), now(), now()), ('b', 'open', 5, now(), now(), now())`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 21)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	tr, err := st.CircuitSucceeded(ctx, "a", false, 2)
	require.NoError(t, err)
	require.Equal(t, store.CircuitHalfOpen, tr.Circuit.State)
	for range 2 {
		tr, err = st.CircuitSucceeded(ctx, "b", false, 2)
		require.NoError(t, err)
	}
	require.True(t, tr.Closed)
	require.NotNil(t, tr.Circuit.OutageOpenedAt)

	undoRest(t, pool, 20)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name = 'endpoint_circuits' AND column_name IN ('probe_successes', 'outage_failing_since', 'outage_backoff_ms',
		       'outage_opened_at', 'event_state', 'event_at', 'events_coalesced', 'wake_after', 'wake_after_stamp', 'wake_turn_at',
		       'auto_replay_turn_at'))
		   OR (table_name = 'dead_letters' AND column_name = 'last_attempt_id')`).Scan(&n))
	require.Zero(t, n)
	var a, b string
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT state FROM endpoint_circuits WHERE endpoint_id = 'a'),
		(SELECT state FROM endpoint_circuits WHERE endpoint_id = 'b')`).Scan(&a, &b))
	require.Equal(t, store.CircuitOpen, a, "half-open goes back open")
	require.Equal(t, store.CircuitClosed, b)
	_, err = pool.Exec(ctx, `UPDATE endpoint_circuits SET state = 'half_open' WHERE endpoint_id = 'a'`)
	require.ErrorContains(t, err, "violates check constraint")
}

// TestMigration032MakesEveryEndpointAWebhook: an endpoint of before
// endpoints had types comes out of 032 a webhook, and its deliveries'
// attempts read that type; the check keeps a type a plain name; the down
// migration takes the column back.
func TestMigration032MakesEveryEndpointAWebhook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 31, "-- An endpoint's type names the transport")
	_, err := pool.Exec(ctx, `INSERT INTO endpoints (tenant_id, id, url, secret) VALUES ('default', 'a', 'https://a.example/hook', 'whsec_a')`)
	require.NoError(t, err)
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 32)

	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "webhook", ep.Type)
	made, err := st.EndpointInsert(ctx, "b", "https://b.example/hook", "whsec_b", nil)
	require.NoError(t, err)
	require.Equal(t, "webhook", made.Type, "an endpoint made with no type is a webhook")
	_, err = pool.Exec(ctx, `UPDATE endpoints SET type = 'Web Hook' WHERE id = 'a'`)
	require.ErrorContains(t, err, "violates check constraint")

	undoRest(t, pool, 31)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'endpoints' AND column_name = 'type'`).Scan(&n))
	require.Zero(t, n)
}

// TestMigration033GivesEveryDeliveryItsEventsType: deliveries stored before
// they kept their event's type come out of 033 with it, so a limited
// session's event types, read along the deliveries, still see them; the
// column is NOT NULL from then on, and the down migration takes it back.
func TestMigration033GivesEveryDeliveryItsEventsType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 32, "-- The event types a portal session limited")
	for _, s := range []string{
		`INSERT INTO endpoints (tenant_id, id, url, secret) VALUES ('default', 'a', 'https://a.example/hook', 'whsec_a'),
		  ('default', 'b', 'https://b.example/hook', 'whsec_b')`,
		`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash)
		  VALUES ('default', 'e1', 'k', 1, 'order.created', '{}', '\x01'), ('default', 'e2', 'k', 2, 'order.paid', '{}', '\x01')`,
		`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence)
		  VALUES ('default', 'e1', 'a', 'k', 1), ('default', 'e1', 'b', 'k', 1), ('default', 'e2', 'b', 'k', 2)`,
	} {
		_, err := pool.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 33)

	var typed []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(event_id || '@' || endpoint_id || '=' || type ORDER BY event_id, endpoint_id) FROM deliveries`).Scan(&typed))
	require.Equal(t, []string{"e1@a=order.created", "e1@b=order.created", "e2@b=order.paid"}, typed)
	st, err := store.New(pool)
	require.NoError(t, err)
	types, err := st.Tenant(store.DefaultTenant).OnlyEndpoints([]string{"a"}).EventTypeList(ctx, "", 4096, 10)
	require.NoError(t, err)
	require.Len(t, types, 1)
	require.Equal(t, "order.created", types[0].Type)
	_, err = pool.Exec(ctx, `INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence) VALUES ('default', 'e2', 'a', 'k', 2)`)
	require.ErrorContains(t, err, "not-null constraint")

	undoRest(t, pool, 32)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'deliveries' AND column_name = 'type'`).Scan(&n))
	require.Zero(t, n)
}

// TestMigration036HoldsTheCatalogAndGoesBack: the catalog's table takes an
// entry of a tenant that exists, with a schema that is an object or a
// boolean, and nothing else; its down migration drops it.
func TestMigration036HoldsTheCatalogAndGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, up := poolBefore(t, 35, "-- The event-type catalog")
	require.NoError(t, execInTx(ctx, pool, up))
	migrateRest(t, pool, 36)
	for _, c := range []struct{ stmt, want string }{
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('default', 'a', '{"type":"object"}')`, ""},
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('default', 'b', 'true')`, ""},
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('default', 'c', '"object"')`, "check constraint"},
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('default', 'e', '{"default":"` + strings.Repeat("x", 65536) + `"}')`, "check constraint"},
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('nobody', 'd', '{}')`, "foreign key"},
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('default', '', '{}')`, "check constraint"},
		{`INSERT INTO event_types (tenant_id, name, schema) VALUES ('default', 'a', '{}')`, "duplicate key"},
	} {
		_, err := pool.Exec(ctx, c.stmt)
		if c.want == "" {
			require.NoError(t, err, c.stmt)
		} else {
			require.ErrorContains(t, err, c.want, c.stmt)
		}
	}
	var version int
	require.NoError(t, pool.QueryRow(ctx, `SELECT version FROM event_types WHERE name = 'a'`).Scan(&version))
	require.Equal(t, 1, version)

	undoRest(t, pool, 35)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_name = 'event_types'`).Scan(&n))
	require.Zero(t, n)
}
