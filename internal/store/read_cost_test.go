package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// seedLog loads a tenant's history in bulk, as years of traffic leave it:
// events events over events/10 correlations of ten, of 20 types and one
// rare type (one event in a thousand); each delivered to one of ten busy
// endpoints, and one in a thousand to a rare endpoint as well; one event in
// fifty with a dead letter (a third open, the rest replayed or skipped).
// hookflow's own events are there too: a test event sent to each endpoint
// (98 more endpoints of the default tenant have one and nothing else), and
// an operators' endpoint subscribed to hookflow.* that was sent five
// dead-letter notices about each endpoint but itself.
// Another tenant holds a fifth as much, so the tenant is a real condition.
// Every table is analyzed, as autovacuum would have.
func seedLog(tb testing.TB, pool *pgxpool.Pool, events int) {
	tb.Helper()
	ctx := context.Background()
	for _, tenant := range []struct {
		id string
		n  int
	}{{"default", events}, {"neighbour", events / 5}} {
		for _, s := range []struct {
			q    string
			args []any
		}{
			{`INSERT INTO tenants (id, name) VALUES ($1, $1) ON CONFLICT DO NOTHING`, []any{tenant.id}},
			{`INSERT INTO endpoints (tenant_id, id, url, secret)
			  SELECT $1, $1 || '-ep-' || x, 'https://example.com/' || x, 'whsec_x'
			  FROM unnest(ARRAY['0','1','2','3','4','5','6','7','8','9','rare','ops']) x`, []any{tenant.id}},
			{`INSERT INTO endpoints (tenant_id, id, url, secret)
			  SELECT $1, $1 || '-ep-none-' || x, 'https://example.com/none', 'whsec_x' FROM generate_series(2, 99) x`, []any{tenant.id}},
			{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at, delivered_at)
			  SELECT $1, $1 || '-e' || i, $1 || '-c' || (i % ($2::int / 10)), i / ($2::int / 10) + 1,
			         CASE WHEN i % 1000 = 0 THEN 'rare.type' ELSE 'order.t' || (i % 20) END,
			         '{"n":1}', '\x01', 'delivered', now() - make_interval(secs => ($2::int - i) / 100.0), now(), now()
			  FROM generate_series(0, $2::int - 1) i`, []any{tenant.id, tenant.n}},
			{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, accepted_at, delivered_at)
			  SELECT e.tenant_id, e.id, e.tenant_id || '-ep-' || x, e.correlation_id, e.sequence, e.type, 'delivered', e.accepted_at, now()
			  FROM events e CROSS JOIN LATERAL (
			      SELECT (e.sequence * 7 + length(e.correlation_id)) % 10 || '' AS x
			      UNION ALL SELECT 'rare' WHERE e.type = 'rare.type') r
			  WHERE e.tenant_id = $1`, []any{tenant.id}},
			{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at, delivered_at)
			  SELECT $1, $1 || '-test-' || p.id, 'hookflow:test:' || p.id, 1, 'hookflow.test', '{}', '\x01', 'delivered', now(), now(), now()
			  FROM endpoints p WHERE p.tenant_id = $1 AND p.id <> $1 || '-ep-ops'`, []any{tenant.id}},
			{`INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, updated_at, delivered_at)
			  SELECT $1, $1 || '-notice-' || p.id || '-' || n, 'hookflow:' || p.id, n, 'hookflow.dead_letter.created', '{}', '\x01', 'delivered', now(), now(), now()
			  FROM endpoints p CROSS JOIN generate_series(1, 5) n WHERE p.tenant_id = $1 AND p.id <> $1 || '-ep-ops'`, []any{tenant.id}},
			{`INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, accepted_at, delivered_at)
			  SELECT e.tenant_id, e.id, CASE WHEN e.type = 'hookflow.test' THEN substr(e.correlation_id, length('hookflow:test:') + 1) ELSE e.tenant_id || '-ep-ops' END,
			         e.correlation_id, e.sequence, e.type, 'delivered', e.accepted_at, now()
			  FROM events e WHERE e.tenant_id = $1 AND starts_with(e.correlation_id, 'hookflow:')`, []any{tenant.id}},
			{`INSERT INTO dead_letters (tenant_id, event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, dead_lettered_at, status)
			  SELECT d.tenant_id, d.event_id, d.correlation_id, d.sequence, d.endpoint_id, '{}', '[]', '400', d.accepted_at,
			         (ARRAY['open','replayed','skipped'])[1 + (hashtext(d.event_id) & 2147483647) % 3]
			  FROM deliveries d WHERE d.tenant_id = $1 AND hashtext(d.event_id || d.endpoint_id) % 50 = 0`, []any{tenant.id}},
		} {
			_, err := pool.Exec(ctx, s.q, s.args...)
			require.NoError(tb, err, s.q)
		}
	}
	_, err := pool.Exec(ctx, `ANALYZE`)
	require.NoError(tb, err)
}

// readCase is one list the API offers, with the filters a request sets,
// and the index its plan must read.
type readCase struct {
	name  string
	index string
	run   func(ctx context.Context, q *dbsqlc.Queries) error
}

// readBounds bounds the buffers some of readCases' plans touch, run
// (EXPLAIN ANALYZE) at seedLog's 50,000 events: reads whose index alone
// does not keep them from walking the tenant's history. A limited
// session's event types read along each type's events, probing each for
// a delivery to the session's endpoints, touched 23,190 buffers here
// (1,344 with a busy endpoint too).
var readBounds = map[string]int{
	"event-types, a session limited to <rare>":            100,
	"event-types, a session limited to <rare> and <busy>": 1000,
	// At the API's cap of 100 endpoints a session, each endpoint sent a
	// test event: walking every endpoint's operational correlations at
	// every endpoint would be 20,100 streams (about 41,000 buffers); only
	// the correlations each endpoint was sent are walked.
	"event-types, a session limited to 100 endpoints": 4000,
	// The operators' endpoint was sent notices about every endpoint, none
	// of them about itself: it walks what it was sent, not their types.
	"event-types, a session limited to the operators' endpoint": 1000,
}

func str(s string) *string { return &s }

// readCases are GET /v1/events and GET /v1/dead-letters with each filter
// they offer, and GET /v1/event-types, on seedLog's default tenant.
func readCases() []readCase {
	const page = 51 // the API's largest page and one
	t := "default"
	return []readCase{
		{"events", "events_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventList(ctx, dbsqlc.EventListParams{TenantID: t, MaxRows: page})
			return err
		}},
		{"events?type=rare.type", "events_log_type_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventList(ctx, dbsqlc.EventListParams{TenantID: t, Type: str("rare.type"), MaxRows: page})
			return err
		}},
		{"events?correlation_id=", "events_correlation_sequence_key", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventList(ctx, dbsqlc.EventListParams{TenantID: t, CorrelationID: str("default-c7"), MaxRows: page})
			return err
		}},
		{"events?endpoint_id=<busy>", "deliveries_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventListByEndpoints(ctx, dbsqlc.EventListByEndpointsParams{TenantID: t, Endpoints: []string{"default-ep-3"}, MaxRows: page})
			return err
		}},
		{"events?endpoint_id=<rare>", "deliveries_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventListByEndpoints(ctx, dbsqlc.EventListByEndpointsParams{TenantID: t, Endpoints: []string{"default-ep-rare"}, MaxRows: page})
			return err
		}},
		{"events, a session limited to <rare>", "deliveries_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventListByEndpoints(ctx, dbsqlc.EventListByEndpointsParams{TenantID: t, Endpoints: []string{"default-ep-rare"},
				OnlyEndpoints: []string{"default-ep-rare"}, MaxRows: page})
			return err
		}},
		{"events, a session limited to <rare> and <busy>", "deliveries_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			only := []string{"default-ep-rare", "default-ep-3"}
			_, err := q.EventListByEndpoints(ctx, dbsqlc.EventListByEndpointsParams{TenantID: t, Endpoints: only,
				OnlyEndpoints: only, MaxRows: page})
			return err
		}},
		{"events?endpoint_id=<busy>, second page", "deliveries_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			before := time.Now().Add(-time.Hour)
			_, err := q.EventListByEndpoints(ctx, dbsqlc.EventListByEndpointsParams{TenantID: t, Endpoints: []string{"default-ep-3"},
				BeforeTime: &before, BeforeID: "default-e9", MaxRows: page})
			return err
		}},
		{"event-types", "events_log_type_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventTypeList(ctx, dbsqlc.EventTypeListParams{TenantID: t, SampleMax: 4096, MaxRows: 101})
			return err
		}},
		// A session's types are walked along its endpoints' deliveries: a
		// handful of probes a type, not a walk of each type's events.
		{"event-types, a session limited to <rare>", "deliveries_type_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventTypeListByEndpoints(ctx, dbsqlc.EventTypeListByEndpointsParams{TenantID: t,
				Endpoints: []string{"default-ep-rare"}, SampleMax: 4096, MaxRows: 101})
			return err
		}},
		{"event-types, a session limited to <rare> and <busy>", "deliveries_type_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventTypeListByEndpoints(ctx, dbsqlc.EventTypeListByEndpointsParams{TenantID: t,
				Endpoints: []string{"default-ep-rare", "default-ep-3"}, SampleMax: 4096, MaxRows: 101})
			return err
		}},
		{"event-types, a session limited to 100 endpoints", "deliveries_type_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			eps := []string{"default-ep-rare", "default-ep-3"}
			for i := len(eps); i < 100; i++ {
				eps = append(eps, fmt.Sprintf("default-ep-none-%d", i))
			}
			_, err := q.EventTypeListByEndpoints(ctx, dbsqlc.EventTypeListByEndpointsParams{TenantID: t,
				Endpoints: eps, SampleMax: 4096, MaxRows: 101})
			return err
		}},
		{"event-types, a session limited to the operators' endpoint", "deliveries_operational_type_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.EventTypeListByEndpoints(ctx, dbsqlc.EventTypeListByEndpointsParams{TenantID: t,
				Endpoints: []string{"default-ep-ops"}, SampleMax: 4096, MaxRows: 101})
			return err
		}},
		{"dead-letters", "dead_letters_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.DeadLetterList(ctx, dbsqlc.DeadLetterListParams{TenantID: t, MaxRows: page})
			return err
		}},
		{"dead-letters?status=open", "dead_letters_tenant_open_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.DeadLetterList(ctx, dbsqlc.DeadLetterListParams{TenantID: t, Status: str("open"), MaxRows: page})
			return err
		}},
		{"dead-letters?endpoint_id=<busy>", "dead_letters_endpoint_log_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.DeadLetterList(ctx, dbsqlc.DeadLetterListParams{TenantID: t, EndpointID: str("default-ep-3"), MaxRows: page})
			return err
		}},
		{"dead-letters?correlation_id=", "dead_letters_lane_idx", func(ctx context.Context, q *dbsqlc.Queries) error {
			_, err := q.DeadLetterList(ctx, dbsqlc.DeadLetterListParams{TenantID: t, CorrelationID: str("default-c7"), MaxRows: page})
			return err
		}},
	}
}

// explainer runs each query it is given as EXPLAIN options of it, with
// the query's own arguments (so the plan is the one made for those
// values, as the API's sessions make them: plan_cache_mode), and keeps
// the plan; the query itself answers no rows.
type explainer struct {
	conn    *pgx.Conn
	options string
	plans   []string
}

func (e *explainer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, fmt.Errorf("explainer: no statements")
}

func (e *explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := e.conn.Query(ctx, "EXPLAIN ("+e.options+") "+sql, args...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	e.plans = append(e.plans, strings.Join(lines, "\n"))
	return e.conn.Query(ctx, "SELECT WHERE false")
}

func (e *explainer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := e.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rows
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// planNode is what an EXPLAIN (FORMAT JSON) plan says of each node.
type planNode struct {
	Type     string     `json:"Node Type"`
	Index    string     `json:"Index Name"`
	Relation string     `json:"Relation Name"`
	Hit      int        `json:"Shared Hit Blocks"`
	Read     int        `json:"Shared Read Blocks"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// TestListFiltersReadTheirIndexes: at 50,000 events (with deliveries and
// dead letters to match, analyzed), every filter GET /v1/events,
// GET /v1/event-types and GET /v1/dead-letters offer is planned along its
// index, and none reads a whole table of the ledger: a page costs the
// page, not the tenant's history. It asserts plan nodes, not times, and
// the buffers of some (readBounds); BenchmarkListPlans
// prints the same plans run at a million events.
func TestListFiltersReadTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	seedLog(t, pool, 50_000)
	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer held.Release()
	conn := held.Conn()
	bounded := 0
	for _, c := range readCases() {
		e := &explainer{conn: conn, options: "FORMAT JSON"}
		maxBuffers, bound := readBounds[c.name]
		if bound {
			e.options = "ANALYZE, BUFFERS, FORMAT JSON"
			bounded++
		}
		require.NoError(t, c.run(ctx, dbsqlc.New(e)), c.name)
		require.Len(t, e.plans, 1)
		var plans []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.plans[0]), &plans), c.name)
		var indexed bool
		plans[0].Plan.walk(func(n planNode) {
			switch n.Type {
			case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
				indexed = indexed || n.Index == c.index
			case "Seq Scan":
				require.NotContains(t, []string{"events", "deliveries", "dead_letters"}, n.Relation,
					"%s reads all of %s:\n%s", c.name, n.Relation, e.plans[0])
			}
		})
		require.True(t, indexed, "%s does not read %s:\n%s", c.name, c.index, e.plans[0])
		if bound {
			// The root's buffers count every node's under it, subplans too.
			t.Logf("%s: %d buffers", c.name, plans[0].Plan.Hit+plans[0].Plan.Read)
			require.LessOrEqual(t, plans[0].Plan.Hit+plans[0].Plan.Read, maxBuffers, "%s:\n%s", c.name, e.plans[0])
		}
	}
	require.Equal(t, len(readBounds), bounded, "a bound names no read case")
}

// BenchmarkListPlans loads a million events (and their deliveries and dead
// letters: seedLog) and prints EXPLAIN (ANALYZE, BUFFERS) of every list
// filter the API offers (readCases); docs/operability.md ("What a read
// costs") quotes it. It asserts nothing: TestListFiltersReadTheirIndexes
// holds the plans.
//
//	go test -count=1 -run '^$' -bench BenchmarkListPlans -benchtime 1x -timeout 30m -v ./internal/store/
func BenchmarkListPlans(b *testing.B) {
	ctx := context.Background()
	pool := testenv.MigratedPool(b)
	start := time.Now()
	seedLog(b, pool, 1_000_000)
	b.Logf("seeded in %s", time.Since(start).Round(time.Second))
	held, err := pool.Acquire(ctx)
	require.NoError(b, err)
	defer held.Release()
	conn := held.Conn()
	for i := 0; i < b.N; i++ {
		for _, c := range readCases() {
			e := &explainer{conn: conn, options: "ANALYZE, BUFFERS"}
			require.NoError(b, c.run(ctx, dbsqlc.New(e)), c.name)
			b.Logf("%s:\n%s", c.name, e.plans[0])
		}
	}
}

// TestEventLogOfSeveralEndpoints: a session limited to two endpoints reads
// its log along both endpoints' deliveries, merged: newest first, an event
// routed to both once, the other endpoint's not at all, and the next page
// from the cursor on, as the whole log pages.
func TestEventLogOfSeveralEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i, to := range [][]string{{"a"}, {"b"}, {"a", "b"}, {"c"}, {"b", "c"}, {"a"}} {
		insertRouted(t, st, fmt.Sprintf("x-%d", i+1), "x", int64(i+1), to...)
		age(t, st, fmt.Sprintf("x-%d", i+1), time.Duration(10-i)*time.Minute)
	}
	session := st.OnlyEndpoints([]string{"a", "b"})
	var pages [][]string
	f := store.EventFilter{Limit: 2}
	for {
		got, err := session.EventList(ctx, f)
		require.NoError(t, err)
		if len(got) == 0 {
			break
		}
		pages = append(pages, ids(got))
		last := got[len(got)-1]
		f.Before, f.BeforeID = &last.AcceptedAt, last.ID
	}
	require.Equal(t, [][]string{{"x-6", "x-5"}, {"x-3", "x-2"}, {"x-1"}}, pages)
	got, err := session.EventList(ctx, store.EventFilter{EndpointID: "c", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"x-5"}, ids(got), "c's events the session sees: those routed to a or b too")
	require.Equal(t, []string{"b"}, got[0].Endpoints, "shown with its routing to the session's endpoints only")
}

// TestEventTypesOfALimitedSession: a session limited to some endpoints
// sees the types of the events routed to one of them, each with the latest
// such event, and of hookflow's own only those about one of them, whoever
// they were delivered to: read along its endpoints' deliveries, it answers
// what the tenant's log filtered by them answers.
func TestEventTypesOfALimitedSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i, e := range []struct {
		typ, corr string
		to        []string
	}{
		{"order.a", "k1", []string{"a"}},
		{"order.a", "k2", []string{"a", "b"}},
		{"order.b", "k3", []string{"b"}},
		{"order.c", "k4", []string{"a"}},
		{"order.c", "k5", []string{"c"}},
		{"hookflow.dead_letter.created", contract.OperationalCorrelation("a"), []string{"a"}},
		{"hookflow.dead_letter.created", contract.OperationalCorrelation("c"), []string{"a"}},
		{"hookflow.test", "hookflow:test:a", []string{"a"}},
		{"hookflow.test", "hookflow:test:b", []string{"b"}},
		{"hookflow.endpoint.disabled", contract.OperationalCorrelation("a"), []string{"b"}},
	} {
		id := fmt.Sprintf("x-%d", i+1)
		ev := event(id, e.corr, int64(i+1))
		ev.Type = e.typ
		_, ok, err := st.EventInsertRouted(ctx, ev, e.to, nil)
		require.NoError(t, err)
		require.True(t, ok)
		age(t, st, id, time.Duration(20-i)*time.Minute)
	}
	latest := func(s *store.Store) map[string]string {
		types, err := s.EventTypeList(ctx, "", 4096, 100)
		require.NoError(t, err)
		out := map[string]string{}
		for _, ty := range types {
			out[ty.Type] = ty.LastEventID
			require.JSONEq(t, `{}`, string(ty.Sample), ty.Type)
		}
		return out
	}
	require.Equal(t, map[string]string{
		"order.a": "x-2", "order.c": "x-4",
		"hookflow.dead_letter.created": "x-6", "hookflow.test": "x-8",
	}, latest(st.OnlyEndpoints([]string{"a"})), "of hookflow's own, only those about a")
	require.Equal(t, map[string]string{
		"order.a": "x-2", "order.b": "x-3", "order.c": "x-4",
		"hookflow.dead_letter.created": "x-6", "hookflow.test": "x-9", "hookflow.endpoint.disabled": "x-10",
	}, latest(st.OnlyEndpoints([]string{"a", "b"})), "about a, delivered to b")
	require.Empty(t, latest(st.OnlyEndpoints(nil)))
	require.Equal(t, map[string]string{
		"order.a": "x-2", "order.b": "x-3", "order.c": "x-5",
		"hookflow.dead_letter.created": "x-7", "hookflow.test": "x-9", "hookflow.endpoint.disabled": "x-10",
	}, latest(st))
}
