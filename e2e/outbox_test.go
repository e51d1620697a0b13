package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/temporaldev"
	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/kit/outbox"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/schema"
	"github.com/hookflow/hookflow/services/relay"
)

// producerDB is a producer's own database: an orders table standing for its
// state, and the outbox schema applied with outbox.Migrate.
func producerDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := migratedPool(t, outbox.Migrate)
	_, err := pool.Exec(context.Background(), `CREATE TABLE orders (id text PRIMARY KEY, amount integer NOT NULL)`)
	require.NoError(t, err)
	return pool
}

// ownPool opens another pool on p's database, sized like hookflow relay's.
func ownPool(t *testing.T, p *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	cfg := p.Config().Copy()
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// placeOrder is a producer's transaction: its own change and the event that
// tells of it commit (or roll back) together.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, ev outbox.Event, commit bool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ($1, $2)`, ev.ID, ev.Sequence); err != nil {
		return err
	}
	if err := outbox.Enqueue(ctx, tx, ev); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

func outboxEvent(id, corr string, seq int64, endpointID string) outbox.Event {
	return outbox.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: endpointID, Type: "order.updated",
		Data: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, seq))}
}

// startRelay runs a relay from the producer's pool into b's hookflow until
// the test ends.
func (b *bundle) startRelay(producer *pgxpool.Pool, c client.Client, cfg relay.Config) *relay.Relay {
	b.t.Helper()
	logger := testenv.Logger(b.t)
	strt, err := app.NewStarter(b.cfg, b.store, c, logger)
	require.NoError(b.t, err)
	src, err := outbox.NewSource(producer)
	require.NoError(b.t, err)
	// Each row into its own tenant's ledger, as hookflow relay does.
	r, err := relay.New(cfg, relay.Deps{Outbox: src, Ledgers: relay.StoreLedgers(b.store), Starter: strt, Logger: logger})
	require.NoError(b.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	b.t.Cleanup(func() {
		cancel()
		require.NoError(b.t, <-done)
	})
	return r
}

func (b *bundle) waitDrained(r *relay.Relay, timeout time.Duration) {
	b.t.Helper()
	waitFor(b.t, timeout, "outbox drained", func() bool {
		n, _, err := r.Lag(context.Background())
		return err == nil && n == 0
	})
}

// waitApplied waits until the receiver applied want events in all, then
// checks its ledger: each correlation 1..n in order, nothing twice, no
// contract breach.
func waitApplied(t *testing.T, rcv *ledgerReceiver, want map[string]int64, timeout time.Duration) {
	t.Helper()
	total := 0
	for _, n := range want {
		total += int(n)
	}
	count := func() int {
		applied, _ := rcv.snapshot()
		n := 0
		for _, seqs := range applied {
			n += len(seqs)
		}
		return n
	}
	start, lastLog := time.Now(), time.Now()
	for n := count(); n < total; n = count() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %d events applied (%d are)", timeout, total, n)
		}
		if time.Since(lastLog) > 30*time.Second {
			t.Logf("%d of %d events applied after %s", n, total, time.Since(start).Round(time.Second))
			lastLog = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Len(t, applied, len(want))
	for corr, n := range want {
		seqs := make([]int64, n)
		for i := range seqs {
			seqs[i] = int64(i + 1)
		}
		require.Equal(t, seqs, applied[corr], "correlation %s", corr)
	}
}

// TestOutboxDeliversCommittedOnly: an event enqueued in a producer
// transaction that rolls back is never delivered, nor stored anywhere; one
// that commits (and is enqueued again, a no-op) is delivered once.
func TestOutboxDeliversCommittedOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	ctx := context.Background()
	producer := producerDB(t)
	r := b.startRelay(ownPool(t, producer), b.client, relay.Config{})

	corr := b.id("order")
	rolledBack, committed := corr+"-rolled-back", corr+"-1"
	require.NoError(t, placeOrder(ctx, producer, outboxEvent(rolledBack, corr, 1, ep.ID), false))
	// The rolled-back event held sequence 1 only inside its transaction.
	require.NoError(t, placeOrder(ctx, producer, outboxEvent(committed, corr, 1, ep.ID), true))
	err := pgx.BeginFunc(ctx, producer, func(tx pgx.Tx) error {
		return outbox.Enqueue(ctx, tx, outboxEvent(committed, corr, 1, ep.ID))
	})
	require.NoError(t, err)

	waitApplied(t, rcv, map[string]int64{corr: 1}, time.Minute)
	b.waitState(committed, contract.StateDelivered, 30*time.Second)
	b.waitDrained(r, 10*time.Second)
	time.Sleep(2 * time.Second) // anything extra would show by now
	waitApplied(t, rcv, map[string]int64{corr: 1}, 0)
	require.Equal(t, 1, rcv.requestsFor(committed))
	require.Zero(t, rcv.requestsFor(rolledBack))
	_, err = b.store.EventGet(ctx, rolledBack)
	require.ErrorIs(t, err, store.ErrNotFound)
	var orders, rows int
	require.NoError(t, producer.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders))
	require.NoError(t, producer.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'relayed'`).Scan(&rows))
	require.Equal(t, 1, orders)
	require.Equal(t, 1, rows)
}

// TestOutboxKeepsTheTenant: tenants acme and globex write outbox
// rows with the same event IDs in the same correlation, in one producer
// transaction, out of order; the relay puts each into its own tenant's
// ledger and each tenant's receiver gets its own events, in order. A row of
// a tenant that does not exist, naming acme's endpoint, reaches no tenant:
// it stays pending in the outbox with the reason noted.
func TestOutboxKeepsTheTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	acme, globex := b.newTenantSide("outbox-acme"), b.newTenantSide("outbox-globex")
	ctx := context.Background()
	producer := producerDB(t)
	r := b.startRelay(ownPool(t, producer), b.client, relay.Config{})

	ev := func(tenant, endpointID string, seq int64) outbox.Event {
		return outbox.Event{TenantID: tenant, ID: fmt.Sprintf("evt-%d", seq), CorrelationID: "order-42", Sequence: seq,
			EndpointID: endpointID, Type: "order.updated", Data: json.RawMessage(fmt.Sprintf(`{"tenant":%q,"seq":%d}`, tenant, seq))}
	}
	err := pgx.BeginFunc(ctx, producer, func(tx pgx.Tx) error {
		for _, e := range []outbox.Event{
			ev("outbox-acme", acme.endpoint, 3), ev("outbox-globex", globex.endpoint, 2), ev("initech", acme.endpoint, 1),
			ev("outbox-globex", globex.endpoint, 3), ev("outbox-acme", acme.endpoint, 1), ev("outbox-globex", globex.endpoint, 1), ev("outbox-acme", acme.endpoint, 2),
		} {
			if err := outbox.Enqueue(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)

	want := []string{"order-42/1/evt-1", "order-42/2/evt-2", "order-42/3/evt-3"}
	for _, s := range []*tenantSide{acme, globex} {
		waitFor(t, 2*time.Minute, s.id+"'s deliveries", func() bool { return len(s.rcv.delivered()) >= len(want) })
	}
	time.Sleep(2 * time.Second) // anything extra would show by now
	for _, s := range []*tenantSide{acme, globex} {
		require.Equal(t, want, s.rcv.delivered(), "%s's own, in order", s.id)
		for i, data := range s.rcv.data() {
			require.JSONEq(t, fmt.Sprintf(`{"tenant":%q,"seq":%d}`, s.id, i+1), data, "%s's receiver got another tenant's event", s.id)
		}
		for seq := int64(1); seq <= 3; seq++ {
			got, err := b.store.Tenant(s.id).EventGet(ctx, fmt.Sprintf("evt-%d", seq))
			require.NoError(t, err)
			require.Equal(t, contract.StateDelivered, got.State)
			require.JSONEq(t, fmt.Sprintf(`{"tenant":%q,"seq":%d}`, s.id, seq), string(got.Data), "%s's ledger holds its own event", s.id)
		}
	}

	// The unknown tenant's row: in no ledger, still in the outbox, noted.
	var state string
	var lastError *string
	require.NoError(t, producer.QueryRow(ctx, `SELECT state, last_error FROM outbox WHERE tenant_id = 'initech'`).Scan(&state, &lastError))
	require.Equal(t, "pending", state)
	require.NotNil(t, lastError)
	require.Contains(t, *lastError, "unknown tenant initech")
	_, err = b.store.EventGet(ctx, "evt-1")
	require.ErrorIs(t, err, store.ErrNotFound, "the unknown tenant's row landed in default")
	var ledgered int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE data->>'tenant' = 'initech'`).Scan(&ledgered))
	require.Zero(t, ledgered, "the unknown tenant's row landed in a ledger")
	pending, _, err := r.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, pending)
	t.Logf("FIGURE outbox tenants: 6 rows of 2 tenants relayed and delivered in order; 1 row of an unknown tenant pending, %d correlation held", r.Held())
}

// TestOutboxRelaysRace: three relays race over 1,000 outbox rows in 20
// correlations, written by a producer in sequence order per correlation with
// the correlations interleaved at random. Each event is delivered once, and
// each correlation in order.
func TestOutboxRelaysRace(t *testing.T) {
	t.Parallel()
	b := setup(t, options{workers: 2})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	ctx := context.Background()
	producer := producerDB(t)

	const correlations, perCorrelation = 20, 50
	var order []int
	for c := range correlations {
		for range perCorrelation {
			order = append(order, c)
		}
	}
	rng := rand.New(rand.NewPCG(6, 1000))
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	// The relays run while the producer writes, one to five events per
	// transaction, so they race over rows as they appear.
	start := time.Now()
	var relays []*relay.Relay
	for range 3 {
		// Each relay on its own pool, as in its own process.
		relays = append(relays, b.startRelay(ownPool(t, producer), b.client, relay.Config{}))
	}
	next := make([]int64, correlations)
	want := map[string]int64{}
	for len(order) > 0 {
		k := min(len(order), 1+rng.IntN(5))
		err := pgx.BeginFunc(ctx, producer, func(tx pgx.Tx) error {
			for _, c := range order[:k] {
				next[c]++
				corr := b.id(fmt.Sprintf("acct-%d", c))
				want[corr] = next[c]
				if err := outbox.Enqueue(ctx, tx, outboxEvent(fmt.Sprintf("%s-%d", corr, next[c]), corr, next[c], ep.ID)); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, err)
		order = order[k:]
	}
	written := time.Since(start)
	b.waitDrained(relays[0], 10*time.Minute)
	relayed := time.Since(start)
	t.Logf("relay: %d rows written in %s, all relayed (workflows started) after %s: %.0f rows/s",
		correlations*perCorrelation, written.Round(time.Millisecond), relayed.Round(time.Millisecond),
		float64(correlations*perCorrelation)/relayed.Seconds())
	// Delivery is ordered per correlation: 50 events one after another in
	// each correlation. On a loaded 2-core machine that
	// takes minutes, hence the long timeout.
	waitApplied(t, rcv, want, 10*time.Minute)
	t.Logf("all %d delivered after %s", correlations*perCorrelation, time.Since(start).Round(time.Millisecond))

	var notRelayed int
	require.NoError(t, producer.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state <> 'relayed'`).Scan(&notRelayed))
	require.Zero(t, notRelayed)
}

// TestOutboxSurvivesTemporalOutage stops the Temporal server for 20 s while
// events arrive through the API and through the outbox. The API answers 202
// (queued), the relay keeps its rows pending and backs off; once Temporal is
// back every event is delivered once and in order, with no restart of the
// API, the worker or the relay.
func TestOutboxSurvivesTemporalOutage(t *testing.T) {
	t.Parallel()
	tmp := newStoppableTemporal(t, "outage")
	b := setupOn(t, tmp.address)
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	ctx := context.Background()
	// The relay uses hookflow's own database for its outbox, the default
	// when HOOKFLOW_OUTBOX_DATABASE_URL is empty, and a lazy client like
	// hookflow relay.
	producer := b.store.Pool()
	require.NoError(t, outbox.Migrate(ctx, producer))
	relayClient, err := app.TemporalClient(ctx, b.cfg, testenv.Logger(t), app.Lazy())
	require.NoError(t, err)
	t.Cleanup(relayClient.Close)
	r := b.startRelay(producer, relayClient, relay.Config{})

	const perSide = 3
	want := map[string]int64{}
	apiCorr := func(c int) string { return b.id(fmt.Sprintf("api-%d", c)) }
	boxCorr := func(c int) string { return b.id(fmt.Sprintf("box-%d", c)) }
	post := func(c int, seq int64) (int, contract.State) {
		code, st := b.postEvent(fmt.Sprintf("%s-%d", apiCorr(c), seq), apiCorr(c), seq, ep.ID, map[string]any{"amount": seq})
		return code, st.State
	}
	enqueue := func(c int, seq int64) {
		id := fmt.Sprintf("%s-%d", boxCorr(c), seq)
		err := pgx.BeginFunc(ctx, producer, func(tx pgx.Tx) error {
			return outbox.Enqueue(ctx, tx, outboxEvent(id, boxCorr(c), seq, ep.ID))
		})
		require.NoError(t, err)
	}

	// Before: both doors work.
	for c := range perSide {
		for s := int64(1); s <= 2; s++ {
			code, _ := post(c, s)
			require.Equal(t, http.StatusAccepted, code)
			enqueue(c, s)
		}
		want[apiCorr(c)], want[boxCorr(c)] = 2, 2
	}
	waitApplied(t, rcv, want, 2*time.Minute)

	// Temporal goes away for 20 s.
	tmp.stop()
	down := time.Now()
	t.Log("temporal stopped")

	// Each post waits out the API's bounded start attempt before it answers
	// "queued", so they go in parallel.
	var wg sync.WaitGroup
	var mu sync.Mutex
	states := map[string]string{}
	for c := range perSide {
		for s := int64(3); s <= 5; s++ {
			enqueue(c, s)
		}
		want[boxCorr(c)] = 5
		for s := int64(3); s <= 5; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, state := post(c, s)
				mu.Lock()
				states[fmt.Sprintf("%s-%d", apiCorr(c), s)] = fmt.Sprintf("%d %s", code, state)
				mu.Unlock()
			}()
		}
		want[apiCorr(c)] = 5
	}
	wg.Wait()
	t.Logf("posted during the outage in %s", time.Since(down).Round(time.Millisecond))
	for id, s := range states {
		// Stored in the ledger; its arrival at the sequencer and its
		// workflow wait for Temporal (the sweep).
		require.Equal(t, "202 queued", s, "API answer for %s while Temporal is down", id)
	}
	count, oldest, err := r.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, perSide*3, count, "outbox rows stay pending while Temporal is down")
	t.Logf("relay lag during the outage: %d rows, oldest %s", count, oldest.Round(time.Millisecond))
	applied, _ := rcv.snapshot()
	for c := range perSide {
		require.Len(t, applied[apiCorr(c)], 2)
		require.Len(t, applied[boxCorr(c)], 2)
	}
	if d := 20*time.Second - time.Since(down); d > 0 {
		time.Sleep(d)
	}

	restarted := time.Now()
	tmp.start()
	t.Logf("temporal back after %s (start took %s)", time.Since(down).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	waitApplied(t, rcv, want, 3*time.Minute)
	t.Logf("all delivered %s after Temporal returned", time.Since(restarted).Round(time.Millisecond))
	b.waitDrained(r, 30*time.Second)
	for corr, n := range want {
		for s := int64(1); s <= n; s++ {
			b.waitState(fmt.Sprintf("%s-%d", corr, s), contract.StateDelivered, 30*time.Second)
		}
	}
}

// setupOn is setup against a Temporal server of the test's own (one it can
// stop and start again). The API uses a lazy client as hookflow api does;
// the worker a client of its own, as in its own process.
// stoppableTemporal is a Temporal server of the test's own, on a port and
// databases that outlive it, which the test stops and starts again.
type stoppableTemporal struct {
	t       *testing.T
	cfg     temporaldev.Config
	address string
	mu      sync.Mutex
	srv     *temporaldev.Server
}

// newStoppableTemporal starts a Temporal server whose databases are named
// for prefix; the test's cleanup stops it.
func newStoppableTemporal(t *testing.T, prefix string) *stoppableTemporal {
	t.Helper()
	port, err := localpg.FreeLowPort()
	require.NoError(t, err)
	s := &stoppableTemporal{t: t, cfg: temporaldev.Config{
		Postgres: testenv.Postgres(t), Port: port, Namespace: "default", DatabasePrefix: prefix + "_" + randHex(4),
		LogFile: filepath.Join(testenv.Dir(t), "temporal-"+prefix+".log"),
	}}
	s.start()
	s.address = s.srv.Address()
	// A start that fails ends the test at once (require), so nothing holds
	// mu across one: the cleanup takes it.
	t.Cleanup(s.stop)
	return s
}

// start starts the server (again).
func (s *stoppableTemporal) start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := temporaldev.Start(ctx, s.cfg, testenv.Logger(s.t))
	require.NoError(s.t, err)
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// stop stops the server, if it runs.
func (s *stoppableTemporal) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Stop()
		s.srv = nil
	}
}

func setupOn(t *testing.T, temporalAddress string) *bundle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := testenv.Logger(t)
	cfg := config.Config{
		DatabaseURL: testenv.NewDatabase(t), TemporalAddress: temporalAddress, TemporalNamespace: "default",
		TaskQueue: testenv.TaskQueue(t), APIAddr: "127.0.0.1:0", APIToken: "test-token-" + randHex(16),
		RecoveryWindow: 5 * time.Minute, DeliveryTimeout: 5 * time.Second, MaxBodyBytes: 64 << 10, AllowPrivate: true,
	}
	pool, err := app.ConnectPostgres(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
	pool.Close()
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	workerClient, err := app.TemporalClient(ctx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(workerClient.Close)
	apiClient, err := app.TemporalClient(ctx, cfg, logger, app.Lazy())
	require.NoError(t, err)
	t.Cleanup(apiClient.Close)

	b := &bundle{t: t, cfg: cfg, store: st.Tenant(store.DefaultTenant), client: workerClient, prefix: randHex(4), logger: logger}
	b.startWorker()
	t.Cleanup(func() {
		for _, w := range b.workers {
			w.Stop()
		}
	})
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.ServeAPI(ctx, cfg, st, apiClient, logger, app.OnReady(func(a app.Addrs) { ready <- a.API }))
	}()
	select {
	case addr := <-ready:
		b.apiURL = "http://" + addr
	case err := <-done:
		t.Fatalf("api did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("api: %v", err)
		}
	})
	return b
}
