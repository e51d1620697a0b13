package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/kit/outbox"
)

// pg is the package's Postgres cluster, started on first use.
var pg localpg.Suite

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

// emptyDB is a fresh database with no outbox schema yet.
func emptyDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pg.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// producerDB is a fresh database with the outbox schema, as a producer has it.
func producerDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := emptyDB(t)
	require.NoError(t, outbox.Migrate(context.Background(), pool))
	return pool
}

func event(id, corr string, seq int64, data string) outbox.Event {
	return outbox.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: "ep_1", Type: "order.updated", Data: json.RawMessage(data)}
}

// withMetadata is ev with the producer's metadata.
func withMetadata(ev outbox.Event, metadata string) outbox.Event {
	ev.Metadata = json.RawMessage(metadata)
	return ev
}

// enqueue runs Enqueue in its own transaction and commits it when Enqueue
// succeeds.
func enqueue(t *testing.T, pool *pgxpool.Pool, ev outbox.Event) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		return outbox.Enqueue(context.Background(), tx, ev)
	})
}

func TestMigrateIsIdempotentAndChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDB(t)

	err := outbox.CheckMigrations(ctx, pool)
	require.ErrorIs(t, err, outbox.ErrMigrationsPending)
	require.ErrorContains(t, err, "001_outbox")

	// Concurrent and repeated runs agree.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = outbox.Migrate(ctx, pool) }()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, outbox.Migrate(ctx, pool))
	require.NoError(t, outbox.CheckMigrations(ctx, pool))

	// The files are there for the producer's own migration tool, down too.
	ups, err := fs.Glob(outbox.Migrations(), "*.up.sql")
	require.NoError(t, err)
	downs, err := fs.Glob(outbox.Migrations(), "*.down.sql")
	require.NoError(t, err)
	require.Equal(t, []string{"001_outbox.up.sql", "002_tenant.up.sql", "003_metadata.up.sql"}, ups)
	require.Equal(t, []string{"001_outbox.down.sql", "002_tenant.down.sql", "003_metadata.down.sql"}, downs)
	for _, name := range []string{"003_metadata.down.sql", "002_tenant.down.sql", "001_outbox.down.sql"} {
		down, err := fs.ReadFile(outbox.Migrations(), name)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, string(down))
		require.NoError(t, err, name)
	}
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('outbox') IS NOT NULL").Scan(&exists))
	require.False(t, exists)
}

func TestEnqueueFollowsTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := producerDB(t)
	src, err := outbox.NewSource(pool)
	require.NoError(t, err)

	// Rolled back with the producer's own change: no row.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, outbox.Enqueue(ctx, tx, event("evt-rolled-back", "order-1", 1, `{"a":1}`)))
	require.NoError(t, tx.Rollback(ctx))
	n, _, err := src.Lag(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// Committed: one pending row, data canonical.
	require.NoError(t, enqueue(t, pool, event("evt-1", "order-1", 1, `{ "b": [1, 2.50], "a": "x" }`)))
	n, oldest, err := src.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.GreaterOrEqual(t, oldest, time.Duration(0))
	var data string
	require.NoError(t, pool.QueryRow(ctx, "SELECT data::text FROM outbox WHERE id = 'evt-1'").Scan(&data))
	require.Equal(t, `{"a":"x","b":[1,2.50]}`, data)
}

func TestEnqueueIdempotencyAndConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := producerDB(t)
	require.NoError(t, enqueue(t, pool, event("evt-1", "order-1", 1, `{"a":1,"b":2}`)))

	// The same event again, formatted differently: a no-op.
	require.NoError(t, enqueue(t, pool, event("evt-1", "order-1", 1, `{"b":2, "a":1}`)))

	// None of the refusals aborts the producer's transaction.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	err = outbox.Enqueue(ctx, tx, event("evt-1", "order-1", 1, `{"a":1,"b":3}`))
	require.ErrorIs(t, err, outbox.ErrConflict)
	otherType := event("evt-1", "order-1", 1, `{"a":1,"b":2}`)
	otherType.Type = "order.created"
	err = outbox.Enqueue(ctx, tx, otherType)
	require.ErrorIs(t, err, outbox.ErrConflict)

	otherMetadata := event("evt-1", "order-1", 1, `{"a":1,"b":2}`)
	otherMetadata.Metadata = json.RawMessage(`{"region":"eu"}`)
	err = outbox.Enqueue(ctx, tx, otherMetadata)
	require.ErrorIs(t, err, outbox.ErrConflict, "metadata is part of the content, as in the API")

	err = outbox.Enqueue(ctx, tx, event("evt-other", "order-1", 1, `{"a":1,"b":2}`))
	require.ErrorIs(t, err, outbox.ErrSequenceTaken)

	for _, tc := range []struct {
		ev    outbox.Event
		field string
	}{
		{event("evt.dot", "order-1", 2, `{}`), "id"},
		{event("evt-2", "", 2, `{}`), "correlation_id"},
		{event("evt-2", "order-1", 0, `{}`), "sequence"},
		{event("evt-2", "order-1", 2, `[1]`), "data"},
		{event("evt-2", "order-1", 2, `{"a":`), "data"},
		{event("evt-2", "order-1", 2, ``), "data"},
		{withMetadata(event("evt-2", "order-1", 2, `{}`), `["eu"]`), "metadata"},
	} {
		err := outbox.Enqueue(ctx, tx, tc.ev)
		require.ErrorIs(t, err, outbox.ErrInvalid, "%+v", tc.ev)
		var fe *intake.FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, tc.field, fe.Field)
	}

	require.NoError(t, outbox.Enqueue(ctx, tx, event("evt-2", "order-1", 2, `{}`)))
	require.NoError(t, tx.Commit(ctx))
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n))
	require.Equal(t, 2, n)
}

func TestListenerWakesOnCommitOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := producerDB(t)
	src, err := outbox.NewSource(pool)
	require.NoError(t, err)
	l, err := src.Listen(ctx)
	require.NoError(t, err)
	defer l.Close(ctx)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, outbox.Enqueue(ctx, tx, event("evt-1", "order-1", 1, `{}`)))
	require.NoError(t, tx.Rollback(ctx))
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	require.ErrorIs(t, l.Wait(wctx), context.DeadlineExceeded, "a rolled-back enqueue must not notify")
	cancel()

	// The failed wait killed the connection (pgx closes it on a cancelled
	// read); a relay listens again, and so does this test.
	require.NoError(t, l.Close(ctx))
	l, err = src.Listen(ctx)
	require.NoError(t, err)
	require.NoError(t, enqueue(t, pool, event("evt-1", "order-1", 1, `{}`)))
	wctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, l.Wait(wctx))
}

func TestClaimIsPerCorrelation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := producerDB(t)
	src, err := outbox.NewSource(pool)
	require.NoError(t, err)
	for _, ev := range []outbox.Event{
		event("a-2", "a", 2, `{}`), event("a-1", "a", 1, `{}`), event("a-3", "a", 3, `{}`), event("b-1", "b", 1, `{}`),
	} {
		require.NoError(t, enqueue(t, pool, ev))
	}
	corrs, err := src.CorrelationsPending(ctx, 10)
	require.NoError(t, err)
	a, b := outbox.Correlation{TenantID: "default", CorrelationID: "a"}, outbox.Correlation{TenantID: "default", CorrelationID: "b"}
	require.ElementsMatch(t, []outbox.Correlation{a, b}, corrs)

	claimed, err := src.Claim(ctx, a, 2, func(ctx context.Context, c *outbox.Claim) error {
		require.Len(t, c.Rows, 2)
		require.Equal(t, []string{"a-1", "a-2"}, []string{c.Rows[0].Event.ID, c.Rows[1].Event.ID})
		// Held: another relay skips the correlation but may take another.
		other, err := src.Claim(ctx, a, 10, func(context.Context, *outbox.Claim) error {
			t.Error("a claimed twice")
			return nil
		})
		require.NoError(t, err)
		require.False(t, other)
		otherB, err := src.Claim(ctx, b, 10, func(ctx context.Context, c *outbox.Claim) error { return nil })
		require.NoError(t, err)
		require.True(t, otherB)

		require.NoError(t, c.MarkRelayed(ctx, c.Rows[0]))
		require.NoError(t, c.MarkFailed(ctx, c.Rows[1], "refused by test"))
		return errors.New("stop")
	})
	require.True(t, claimed)
	require.ErrorContains(t, err, "stop")

	// The marks made before the error were committed.
	var state, failure string
	require.NoError(t, pool.QueryRow(ctx, "SELECT state FROM outbox WHERE id = 'a-1'").Scan(&state))
	require.Equal(t, "relayed", state)
	require.NoError(t, pool.QueryRow(ctx, "SELECT state, failure FROM outbox WHERE id = 'a-2'").Scan(&state, &failure))
	require.Equal(t, "failed", state)
	require.Equal(t, "refused by test", failure)
	n, _, err := src.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n) // a-3, b-1
	failed, err := src.FailedCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, failed)
}

// An outbox row carries its tenant: two tenants may write the same id in the
// same correlation and sequence, each its own row, and claimed apart; a
// producer naming no tenant writes the default's. Within a tenant the id and
// the sequence stay one event's. A tenant ID the API would refuse is refused
// here, and a write that binds no tenant is refused by the table rather than
// put under the default.
func TestEnqueueKeepsTheTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := producerDB(t)
	src, err := outbox.NewSource(pool)
	require.NoError(t, err)
	of := func(tenant string, ev outbox.Event) outbox.Event { ev.TenantID = tenant; return ev }
	require.NoError(t, enqueue(t, pool, of("acme", event("evt-1", "order-42", 1, `{"t":"acme"}`))))
	require.NoError(t, enqueue(t, pool, of("globex", event("evt-1", "order-42", 1, `{"t":"globex"}`))))
	require.NoError(t, enqueue(t, pool, event("evt-1", "order-42", 1, `{"t":"default"}`)))
	require.NoError(t, enqueue(t, pool, of("default", event("evt-1", "order-42", 1, `{"t":"default"}`))), "the same event again")

	require.ErrorIs(t, enqueue(t, pool, of("acme", event("evt-1", "order-42", 1, `{"t":"other"}`))), outbox.ErrConflict)
	require.ErrorIs(t, enqueue(t, pool, of("globex", event("evt-2", "order-42", 1, `{}`))), outbox.ErrSequenceTaken)
	for _, bad := range []string{"a/b", "a.b", strings.Repeat("t", 201)} {
		err := enqueue(t, pool, of(bad, event("evt-3", "order-42", 3, `{}`)))
		require.ErrorIs(t, err, outbox.ErrInvalid, bad)
		var fe *intake.FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "tenant_id", fe.Field)
	}
	_, err = pool.Exec(ctx, `INSERT INTO outbox (id, correlation_id, sequence, endpoint_id, type, data, payload_hash)
		VALUES ('evt-9', 'order-9', 1, 'ep_1', 't', '{}', '\x00')`)
	require.ErrorContains(t, err, "tenant_id", "a row without its tenant")

	require.Equal(t, []string{`acme {"t":"acme"}`, `default {"t":"default"}`, `globex {"t":"globex"}`},
		texts(t, pool, `SELECT tenant_id || ' ' || data::text FROM outbox WHERE id = 'evt-1' ORDER BY tenant_id`))

	corrs, err := src.CorrelationsPending(ctx, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []outbox.Correlation{{TenantID: "acme", CorrelationID: "order-42"},
		{TenantID: "default", CorrelationID: "order-42"}, {TenantID: "globex", CorrelationID: "order-42"}}, corrs)
	acme := outbox.Correlation{TenantID: "acme", CorrelationID: "order-42"}
	claimed, err := src.Claim(ctx, acme, 10, func(ctx context.Context, c *outbox.Claim) error {
		require.Len(t, c.Rows, 1)
		require.Equal(t, "acme", c.Rows[0].Event.TenantID)
		require.JSONEq(t, `{"t":"acme"}`, string(c.Rows[0].Event.Data))
		// Another tenant's correlation of the same ID is another claim.
		other, err := src.Claim(ctx, outbox.Correlation{TenantID: "globex", CorrelationID: "order-42"}, 10,
			func(ctx context.Context, c *outbox.Claim) error {
				require.Equal(t, "globex", c.Rows[0].Event.TenantID)
				return nil
			})
		require.NoError(t, err)
		require.True(t, other)
		return c.MarkRelayed(ctx, c.Rows[0])
	})
	require.NoError(t, err)
	require.True(t, claimed)
	require.Equal(t, []string{"acme relayed", "default pending", "globex pending"},
		texts(t, pool, `SELECT tenant_id || ' ' || state FROM outbox WHERE id = 'evt-1' ORDER BY tenant_id`))
}

// texts runs a query of one text column and returns its rows.
func texts(t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// schemaOf describes the outbox table: its columns, constraints and indexes.
func schemaOf(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	return texts(t, pool, `
		SELECT 'column ' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '')
		FROM information_schema.columns WHERE table_name = 'outbox'
		UNION ALL
		SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'outbox'::regclass
		UNION ALL
		SELECT 'index ' || indexdef FROM pg_indexes WHERE tablename = 'outbox'
		ORDER BY 1`)
}

// The tenant migration's down migration restores 001's schema exactly, with
// the default tenant's rows; it refuses while another tenant has rows,
// which going down would put under the default.
func TestTenantMigrationGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDB(t)
	exec := func(name string) error {
		sql, err := fs.ReadFile(outbox.Migrations(), name)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, string(sql))
		return err
	}
	require.NoError(t, exec("001_outbox.up.sql"))
	before := schemaOf(t, pool)
	_, err := pool.Exec(ctx, `INSERT INTO outbox (id, correlation_id, sequence, endpoint_id, type, data, payload_hash)
		VALUES ('evt-old', 'order-1', 1, 'ep_1', 't', '{}', '\x00')`)
	require.NoError(t, err)
	require.NoError(t, exec("002_tenant.up.sql"))
	var tenant string
	require.NoError(t, pool.QueryRow(ctx, `SELECT tenant_id FROM outbox WHERE id = 'evt-old'`).Scan(&tenant))
	require.Equal(t, "default", tenant, "the rows from before are the default tenant's")
	require.NotEqual(t, before, schemaOf(t, pool))

	// Written as Enqueue wrote it at 002 (its later columns not there yet).
	_, err = pool.Exec(ctx, `INSERT INTO outbox (tenant_id, id, correlation_id, sequence, endpoint_id, type, data, payload_hash)
		VALUES ('acme', 'evt-new', 'order-1', 1, 'ep_1', 't', '{}', '\x00')`)
	require.NoError(t, err)
	require.ErrorContains(t, exec("002_tenant.down.sql"), "tenants other than default")
	_, err = pool.Exec(ctx, `DELETE FROM outbox WHERE tenant_id = 'acme'`)
	require.NoError(t, err)
	require.NoError(t, exec("002_tenant.down.sql"))
	require.Equal(t, before, schemaOf(t, pool))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id = 'evt-old'`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestCorrelationsPendingServesTenantsInTurn: a tenant whose producer
// wrote 10,000 correlations to the outbox, all before another tenant's
// one, does not make the other wait behind them: the relay's first round
// takes the other tenant's correlation, and fills the rest from the
// backlog, the longest waiting first.
func TestCorrelationsPendingServesTenantsInTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := producerDB(t)
	// Written in one statement each, as a bulk import would, rather than
	// 10,000 Enqueue calls; the hash is not read here.
	for _, q := range []struct {
		tenant string
		n      int
		age    time.Duration
	}{{"big", 10_000, 2 * time.Hour}, {"small", 1, time.Hour}} {
		_, err := pool.Exec(ctx, `INSERT INTO outbox (tenant_id, id, correlation_id, sequence, endpoint_id, type, data, payload_hash, created_at)
			SELECT $1, $1 || '-' || i, $1 || '-c' || lpad(i::text, 5, '0'), 1, 'ep_1', 't', '{}', '\x01', now() - make_interval(secs => $3 + $2 - i)
			FROM generate_series(1, $2::int) i`, q.tenant, q.n, q.age.Seconds())
		require.NoError(t, err)
	}
	src, err := outbox.NewSource(pool)
	require.NoError(t, err)
	corrs, err := src.CorrelationsPending(ctx, 100)
	require.NoError(t, err)
	byTenant := map[string]int{}
	for _, c := range corrs {
		byTenant[c.TenantID]++
	}
	require.Equal(t, map[string]int{"big": 99, "small": 1}, byTenant)
	require.Equal(t, outbox.Correlation{TenantID: "big", CorrelationID: "big-c00001"}, corrs[0], "the longest waiting first")
}
