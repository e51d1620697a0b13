package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/hookflow/hookflow/internal/catalog"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/kit/outbox"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/services/relay"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const testSecret = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0"

// fakeStarter stands in for Temporal: it records each start and marks the
// event waiting in its tenant's ledger, as starter.Start does, or fails
// while down.
type fakeStarter struct {
	st *store.Store // unscoped

	delay time.Duration

	mu      sync.Mutex
	down    error
	started map[string]int
	order   map[string][]int64 // correlation (tenant/correlation but the default's) → sequences, in start order
	calls   int
}

func (f *fakeStarter) Start(ctx context.Context, ev store.Event) error {
	time.Sleep(f.delay)
	f.mu.Lock()
	f.calls++
	down := f.down
	if down == nil {
		key := ev.CorrelationID
		if ev.TenantID != store.DefaultTenant {
			key = ev.TenantID + "/" + key
			f.started[ev.TenantID+"/"+ev.ID]++
		} else {
			f.started[ev.ID]++
		}
		f.order[key] = append(f.order[key], ev.Sequence)
	}
	f.mu.Unlock()
	if down != nil {
		return fmt.Errorf("start workflow for event %s: %w", ev.ID, down)
	}
	return f.st.Tenant(ev.TenantID).EventMarkStarted(ctx, ev.ID, "")
}

func (f *fakeStarter) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
}

func (f *fakeStarter) snapshot() (map[string]int, map[string][]int64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	started := make(map[string]int, len(f.started))
	for k, v := range f.started {
		started[k] = v
	}
	order := make(map[string][]int64, len(f.order))
	for k, v := range f.order {
		order[k] = append([]int64(nil), v...)
	}
	return started, order, f.calls
}

type bundle struct {
	t        *testing.T
	producer *pgxpool.Pool
	src      *outbox.Source
	all      *store.Store // unscoped, as the relay holds it
	st       *store.Store // the default tenant's
	starter  *fakeStarter
	endpoint string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	producer, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	require.NoError(t, outbox.Migrate(ctx, producer))
	src, err := outbox.NewSource(producer)
	require.NoError(t, err)

	ledger := testenv.MigratedPool(t)
	all, err := store.New(ledger)
	require.NoError(t, err)
	st := all.Tenant(store.DefaultTenant)
	ep, err := st.EndpointInsert(ctx, "ep_1", "https://example.com/hook", testSecret, nil)
	require.NoError(t, err)
	return &bundle{t: t, producer: producer, src: src, all: all, st: st, endpoint: ep.ID,
		starter: &fakeStarter{st: all, started: map[string]int{}, order: map[string][]int64{}}}
}

func (b *bundle) relay(cfg relay.Config) *relay.Relay {
	b.t.Helper()
	r, err := relay.New(cfg, relay.Deps{Outbox: b.src, Ledgers: relay.StoreLedgers(b.all), Starter: b.starter, Logger: testenv.Logger(b.t)})
	require.NoError(b.t, err)
	return r
}

// run starts r.Run until the test ends.
func (b *bundle) run(r *relay.Relay) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	b.t.Cleanup(func() {
		cancel()
		require.NoError(b.t, <-done)
	})
}

func (b *bundle) event(id, corr string, seq int64) outbox.Event {
	return outbox.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: b.endpoint, Type: "order.updated",
		Data: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}
}

func (b *bundle) enqueue(evs ...outbox.Event) {
	b.t.Helper()
	err := pgx.BeginFunc(context.Background(), b.producer, func(tx pgx.Tx) error {
		for _, ev := range evs {
			if err := outbox.Enqueue(context.Background(), tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(b.t, err)
}

// row is the default tenant's outbox row id.
func (b *bundle) row(id string) (state string, failure, lastError *string, attempts int) {
	b.t.Helper()
	return b.rowOf(store.DefaultTenant, id)
}

func (b *bundle) rowOf(tenant, id string) (state string, failure, lastError *string, attempts int) {
	b.t.Helper()
	err := b.producer.QueryRow(context.Background(), "SELECT state, failure, last_error, attempts FROM outbox WHERE tenant_id = $1 AND id = $2", tenant, id).
		Scan(&state, &failure, &lastError, &attempts)
	require.NoError(b.t, err)
	return state, failure, lastError, attempts
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRelayMovesRowsIntoTheLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.enqueue(b.event("o-1", "order", 1), b.event("o-2", "order", 2))
	third := b.event("o-3", "order", 3)
	// 1e2 is kept as written (jsonb would read it back as 100, which
	// would no longer hash to the row's hash).
	third.Metadata = json.RawMessage(`{"amount":1e2,"region":"eu"}`)
	b.enqueue(third)
	r := b.relay(relay.Config{})

	n, err := r.RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for seq := int64(1); seq <= 3; seq++ {
		id := fmt.Sprintf("o-%d", seq)
		ev, err := b.st.EventGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contract.StateWaiting, ev.State)
		require.Equal(t, seq, ev.Sequence)
		require.JSONEq(t, fmt.Sprintf(`{"seq":%d}`, seq), string(ev.Data))
		sent := b.event(id, "order", seq)
		if seq == 3 {
			require.Equal(t, `{"amount":1e2,"region":"eu"}`, string(ev.Metadata), "the producer's metadata is relayed as written")
			sent = third
		}
		// The ledger judges it exactly as an API post of the same event.
		want, fe := intake.Validate(sent.Request())
		require.Nil(t, fe)
		require.Equal(t, want.PayloadHash, ev.PayloadHash)
		state, _, _, _ := b.row(id)
		require.Equal(t, "relayed", state)
	}
	_, order, _ := b.starter.snapshot()
	require.Equal(t, []int64{1, 2, 3}, order["order"])

	count, _, err := r.Lag(ctx)
	require.NoError(t, err)
	require.Zero(t, count)
	n, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// A row whose event is already in the ledger (posted to the API too, or
// relayed before a crash lost the mark) is fine; one hookflow would refuse
// is marked failed with the reason, and the rest of its correlation goes on.
func TestRelayConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	post := func(id, corr string, seq int64, data string) {
		ev, fe := intake.Validate(outbox.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: b.endpoint,
			Type: "order.updated", Data: json.RawMessage(data)}.Request())
		require.Nil(t, fe)
		_, inserted, err := b.st.EventInsertRouted(ctx, ev, []string{b.endpoint}, nil)
		require.NoError(t, err)
		require.True(t, inserted)
	}
	post("same", "c", 1, `{"seq":1}`)         // same content, still queued
	post("reused", "c", 2, `{"seq":"other"}`) // same id, other content
	post("holder", "c", 3, `{"seq":3}`)       // sequence 3 under another id
	post("started", "d", 1, `{"seq":1}`)      // same content, workflow started
	require.NoError(t, b.st.EventMarkStarted(ctx, "started", ""))

	b.enqueue(b.event("same", "c", 1), b.event("reused", "c", 2), b.event("taker", "c", 3), b.event("fine", "c", 4))
	ghost := b.event("ghost", "e", 1)
	ghost.EndpointID = "ep_unknown"
	b.enqueue(ghost, b.event("started", "d", 1))

	n, err := b.relay(relay.Config{}).RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n) // same, fine, started

	for id, want := range map[string]string{
		"reused": "event reused was accepted with different content",
		"taker":  "sequence 3 of correlation c is already taken by another event",
		"ghost":  "unknown endpoint ep_unknown",
	} {
		state, failure, _, _ := b.row(id)
		require.Equal(t, "failed", state, id)
		require.NotNil(t, failure, id)
		require.Contains(t, *failure, want)
	}
	for _, id := range []string{"same", "fine", "started"} {
		state, _, _, _ := b.row(id)
		require.Equal(t, "relayed", state, id)
	}
	started, _, _ := b.starter.snapshot()
	require.Equal(t, map[string]int{"same": 1, "fine": 1}, started, "an event already started is not started again")
	ev, err := b.st.EventGet(ctx, "reused")
	require.NoError(t, err)
	require.JSONEq(t, `{"seq":"other"}`, string(ev.Data), "the ledger keeps what it accepted first")
	_, err = b.st.EventGet(ctx, "ghost")
	require.ErrorIs(t, err, store.ErrNotFound)
	failed, err := b.src.FailedCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, failed)

	// Temporal refusing the input for good fails the row too.
	b.starter.setDown(serviceerror.NewInvalidArgument("blob too large"))
	b.enqueue(b.event("huge", "f", 1))
	_, err = b.relay(relay.Config{}).RelayOnce(ctx)
	require.NoError(t, err)
	state, failure, _, _ := b.row("huge")
	require.Equal(t, "failed", state)
	require.Contains(t, *failure, "workflow start rejected")

	// A sequence an operator voided is refused in the API's words.
	b.starter.setDown(nil)
	v, err := b.st.CorrelationVoid(ctx, "v", []int64{1}, "operator", "lost")
	require.NoError(t, err)
	require.Empty(t, v.Beyond)
	b.enqueue(b.event("voided", "v", 1))
	_, err = b.relay(relay.Config{}).RelayOnce(ctx)
	require.NoError(t, err)
	state, failure, _, _ = b.row("voided")
	require.Equal(t, "failed", state)
	require.Contains(t, *failure, "sequence 1 of correlation v was voided by an operator")
}

// While Temporal is unavailable rows stay pending (their events may already
// sit queued in the ledger); the relay backs off and catches up by itself.
func TestRelayBacksOffAndCatchesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.starter.setDown(serviceerror.NewUnavailable("connection refused"))
	r := b.relay(relay.Config{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	b.run(r)
	for c := 0; c < 3; c++ {
		for s := int64(1); s <= 5; s++ {
			b.enqueue(b.event(fmt.Sprintf("c%d-%d", c, s), fmt.Sprintf("c%d", c), s))
		}
	}
	// Several failed rounds, spaced by the backoff, not a busy loop.
	time.Sleep(1500 * time.Millisecond)
	_, _, calls := b.starter.snapshot()
	require.GreaterOrEqual(t, calls, 4)
	require.Less(t, calls, 40, "backoff must space the attempts")
	count, oldest, err := r.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, 15, count)
	require.GreaterOrEqual(t, oldest, time.Second)
	state, _, lastError, attempts := b.row("c0-1")
	require.Equal(t, "pending", state)
	require.GreaterOrEqual(t, attempts, 1)
	require.Contains(t, *lastError, "connection refused")
	// Stopped at the first failure of its correlation: nothing after it went
	// into the ledger ahead of it.
	for _, id := range []string{"c0-2", "c1-2", "c2-2"} {
		_, err := b.st.EventGet(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound, id)
	}

	b.starter.setDown(nil)
	waitFor(t, 5*time.Second, "outbox drained", func() bool {
		n, _, err := r.Lag(ctx)
		return err == nil && n == 0
	})
	started, order, _ := b.starter.snapshot()
	require.Len(t, started, 15)
	for id, n := range started {
		require.Equal(t, 1, n, id)
	}
	for c := 0; c < 3; c++ {
		require.Equal(t, []int64{1, 2, 3, 4, 5}, order[fmt.Sprintf("c%d", c)])
	}
}

// A slow Temporal does not stretch a claim (a producer transaction): it ends
// after its budget, and the next round goes on in order.
func TestRelayClaimBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.starter.delay = 50 * time.Millisecond
	for s := int64(1); s <= 10; s++ {
		b.enqueue(b.event(fmt.Sprintf("slow-%d", s), "slow", s))
	}
	r := b.relay(relay.Config{ClaimBudget: 120 * time.Millisecond})
	n, err := r.RelayOnce(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	require.Less(t, n, 10)
	total := n
	for total < 10 {
		n, err := r.RelayOnce(ctx)
		require.NoError(t, err)
		require.Positive(t, n)
		total += n
	}
	_, order, _ := b.starter.snapshot()
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, order["slow"])
}

// A notification wakes the relay at once; it does not wait for its poll.
func TestRelayWakesOnNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.relay(relay.Config{PollInterval: time.Hour})
	b.run(r)
	time.Sleep(300 * time.Millisecond) // the listener connects
	for i := int64(1); i <= 3; i++ {
		start := time.Now()
		b.enqueue(b.event(fmt.Sprintf("n-%d", i), "n", i))
		waitFor(t, 3*time.Second, "relayed on notify", func() bool {
			state, _, _, _ := b.row(fmt.Sprintf("n-%d", i))
			return state == "relayed"
		})
		t.Logf("notify to relayed: %s", time.Since(start))
	}
}

// Several relays over one outbox: every row started once, each correlation
// in sequence order, whatever the interleaving.
func TestRelaysRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const correlations, perCorrelation = 10, 30
	next := make([]int64, correlations)
	var pending []int
	for c := range correlations {
		for range perCorrelation {
			pending = append(pending, c)
		}
	}
	rand.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	var rs []*relay.Relay
	for range 3 {
		r := b.relay(relay.Config{BatchSize: 7, Concurrency: 3, PollInterval: 20 * time.Millisecond})
		rs = append(rs, r)
		b.run(r)
	}
	// The producer writes while the relays run, a few events per transaction.
	for len(pending) > 0 {
		k := min(len(pending), 1+rand.IntN(4))
		var evs []outbox.Event
		for _, c := range pending[:k] {
			next[c]++
			evs = append(evs, b.event(fmt.Sprintf("r%d-%d", c, next[c]), fmt.Sprintf("r%d", c), next[c]))
		}
		pending = pending[k:]
		b.enqueue(evs...)
	}
	waitFor(t, 20*time.Second, "outbox drained", func() bool {
		n, _, err := rs[0].Lag(ctx)
		return err == nil && n == 0
	})
	started, order, _ := b.starter.snapshot()
	require.Len(t, started, correlations*perCorrelation)
	for id, n := range started {
		require.Equal(t, 1, n, "%s started more than once", id)
	}
	for c := range correlations {
		seqs := order[fmt.Sprintf("r%d", c)]
		require.Len(t, seqs, perCorrelation)
		for i, s := range seqs {
			require.EqualValues(t, i+1, s, "correlation r%d out of order: %v", c, seqs)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := relay.New(relay.Config{}, relay.Deps{})
	require.Error(t, err)
}

// Relayed rows are pruned after the retention period; failed ones stay for
// an operator.
func TestRelayPrunesRelayedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ghost := b.event("ghost", "p", 2)
	ghost.EndpointID = "ep_unknown"
	b.enqueue(b.event("p-1", "p", 1), ghost)
	r := b.relay(relay.Config{Retention: time.Millisecond, LagLogInterval: 50 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	b.run(r)
	waitFor(t, 5*time.Second, "relayed row pruned", func() bool {
		var n int
		require.NoError(t, b.producer.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE id = 'p-1'").Scan(&n))
		return n == 0
	})
	state, _, _, _ := b.row("ghost")
	require.Equal(t, "failed", state)
	ev, err := b.st.EventGet(ctx, "p-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateWaiting, ev.State)
}

// byType routes every event by its type, as if it named no endpoint: an
// outbox row always names one (Enqueue requires endpoint_id), so the cap
// on subscribers is reached only through a ledger that routes so.
type byType struct{ relay.Ledger }

func (l byType) Route(ctx context.Context, e intake.Event, maxSubscribers int) (*store.Endpoint, []store.Subscriber, error) {
	e.EndpointID = ""
	return l.Ledger.Route(ctx, e, maxSubscribers)
}

// An event more endpoints subscribe to than HOOKFLOW_MAX_SUBSCRIBERS is
// held, not failed: its sequence would never
// arrive, and its correlation would be stuck behind the gap, though the
// condition passes once an endpoint is unsubscribed. The row stays pending
// with the reason noted, its correlation waits out the backoff (a round
// within it does not try it), the other correlations go on, and once the
// subscribers are back under the cap it is relayed, in order.
func TestRelayHoldsTooManySubscribers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.st.EndpointInsert(ctx, "ep_2", "https://example.com/two", testSecret, []string{"order.*"})
	require.NoError(t, err)
	free := b.event("free-1", "free", 1)
	free.Type = "invoice.paid" // one subscriber
	b.enqueue(b.event("h-1", "held", 1), b.event("h-2", "held", 2), free)
	newRelay := func(cfg relay.Config) *relay.Relay {
		ledgers := func(tenantID string) relay.Ledger { return byType{b.all.Tenant(tenantID)} }
		r, err := relay.New(cfg, relay.Deps{Outbox: b.src, Ledgers: ledgers, Starter: b.starter, Logger: testenv.Logger(t)})
		require.NoError(t, err)
		return r
	}

	r := newRelay(relay.Config{MaxSubscribers: 1, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	n, err := r.RelayOnce(ctx)
	require.NoError(t, err, "a held row is no failure of the round")
	require.Equal(t, 1, n, "the other correlation goes on")
	state, failure, lastError, attempts := b.row("h-1")
	require.Equal(t, "pending", state)
	require.Nil(t, failure)
	require.Contains(t, *lastError, "HOOKFLOW_MAX_SUBSCRIBERS")
	require.Equal(t, 1, attempts)
	n, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, _, _, attempts = b.row("h-1")
	require.Equal(t, 1, attempts, "not tried again within its backoff")
	for _, id := range []string{"h-1", "h-2"} {
		_, err := b.st.EventGet(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound, id)
		state, _, _, _ := b.row(id)
		require.Equal(t, "pending", state, id)
	}

	// Back under the cap: a relay past the backoff relays both, in order.
	require.NoError(t, b.st.EndpointDelete(ctx, "ep_2", "test"))
	r = newRelay(relay.Config{MaxSubscribers: 1})
	n, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, order, _ := b.starter.snapshot()
	require.Equal(t, []int64{1, 2}, order["held"])
	state, _, _, _ = b.row("h-2")
	require.Equal(t, "relayed", state)
}

// Each outbox row goes into its own tenant's ledger: tenants
// acme and globex, and the default tenant, write the same event ID in the
// same correlation, and each ledger holds its own event with its own data,
// started in its own order. A row naming another tenant's endpoint is
// refused as the API refuses it (unknown endpoint). A disabled tenant's row
// is accepted, as an operator key's post for it is (its deliveries wait). A
// row of a tenant that does not exist lands nowhere: it stays pending with
// the reason noted, its correlation is held with backoff, the rest go on,
// and once the tenant is created it is relayed into that tenant's ledger.
func TestRelayKeepsTheTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	endpoints := map[string]string{store.DefaultTenant: b.endpoint}
	for _, tenant := range []string{"acme", "globex", "frozen"} {
		_, _, err := b.all.TenantPut(ctx, store.Tenant{ID: tenant})
		require.NoError(t, err)
		ep, err := b.all.Tenant(tenant).EndpointInsert(ctx, "ep_"+tenant, "https://example.com/"+tenant, testSecret, nil)
		require.NoError(t, err)
		endpoints[tenant] = ep.ID
	}
	_, err := b.all.TenantSetDisabled(ctx, "frozen", true)
	require.NoError(t, err)
	ev := func(tenant string, seq int64) outbox.Event {
		return outbox.Event{TenantID: tenant, ID: fmt.Sprintf("evt-%d", seq), CorrelationID: "order-42", Sequence: seq,
			EndpointID: endpoints[tenant], Type: "order.updated", Data: json.RawMessage(fmt.Sprintf(`{"tenant":%q,"seq":%d}`, tenant, seq))}
	}
	def := ev(store.DefaultTenant, 1)
	def.TenantID = "" // a producer naming no tenant: the default's
	ghost := ev("ghost", 1)
	ghost.EndpointID = "ep_ghost"
	foreign := ev("acme", 3) // globex's endpoint, named from acme
	foreign.EndpointID = endpoints["globex"]
	b.enqueue(ev("acme", 2), ev("globex", 1), def, ghost, ev("acme", 1), ev("globex", 2), ev("frozen", 1), foreign)

	r := b.relay(relay.Config{MinBackoff: time.Hour, MaxBackoff: time.Hour})
	n, err := r.RelayOnce(ctx)
	require.NoError(t, err, "an unknown tenant is no failure of the round")
	require.Equal(t, 6, n, "acme's 2, globex's 2, the default's and the disabled tenant's")
	require.Equal(t, 1, r.Held())

	for tenant, seqs := range map[string]int64{"acme": 2, "globex": 2, store.DefaultTenant: 1, "frozen": 1} {
		for seq := int64(1); seq <= seqs; seq++ {
			got, err := b.all.Tenant(tenant).EventGet(ctx, fmt.Sprintf("evt-%d", seq))
			require.NoError(t, err, "%s evt-%d", tenant, seq)
			require.Equal(t, tenant, got.TenantID)
			require.Equal(t, contract.StateWaiting, got.State)
			require.JSONEq(t, fmt.Sprintf(`{"tenant":%q,"seq":%d}`, tenant, seq), string(got.Data), "%s's own event", tenant)
			require.Equal(t, []string{endpoints[tenant]}, got.Endpoints)
			state, _, _, _ := b.rowOf(tenant, fmt.Sprintf("evt-%d", seq))
			require.Equal(t, "relayed", state)
		}
	}
	_, order, _ := b.starter.snapshot()
	require.Equal(t, []int64{1, 2}, order["acme/order-42"])
	require.Equal(t, []int64{1, 2}, order["globex/order-42"])

	state, failure, _, _ := b.rowOf("acme", "evt-3")
	require.Equal(t, "failed", state)
	require.Contains(t, *failure, "unknown endpoint "+endpoints["globex"])
	_, err = b.all.Tenant("globex").EventGet(ctx, "evt-3")
	require.ErrorIs(t, err, store.ErrNotFound, "acme's row reached globex")

	// The unknown tenant's row: pending, noted, held, in no ledger.
	state, failure, lastError, attempts := b.rowOf("ghost", "evt-1")
	require.Equal(t, "pending", state)
	require.Nil(t, failure)
	require.Contains(t, *lastError, "unknown tenant ghost")
	require.Equal(t, 1, attempts)
	var ledgered int
	require.NoError(t, b.all.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE data->>'tenant' = 'ghost'`).Scan(&ledgered))
	require.Zero(t, ledgered, "the unknown tenant's event landed in a ledger")
	n, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, _, _, attempts = b.rowOf("ghost", "evt-1")
	require.Equal(t, 1, attempts, "not tried again within its backoff")
	count, _, err := r.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, count, "still pending: nothing lost")

	// Created (with its endpoint): a relay past the backoff puts it in.
	_, _, err = b.all.TenantPut(ctx, store.Tenant{ID: "ghost"})
	require.NoError(t, err)
	_, err = b.all.Tenant("ghost").EndpointInsert(ctx, "ep_ghost", "https://example.com/ghost", testSecret, nil)
	require.NoError(t, err)
	n, err = b.relay(relay.Config{}).RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := b.all.Tenant("ghost").EventGet(ctx, "evt-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"tenant":"ghost","seq":1}`, string(got.Data))
	state, _, _, _ = b.rowOf("ghost", "evt-1")
	require.Equal(t, "relayed", state)
}

// The outbox judges a tenant ID by intake.TenantIDPattern; the API judges
// it by api/openapi.json's TenantId schema and the ledger by its CHECK on
// tenants.id. One rule: this holds the two copies that are not Go to it.
func TestTenantIDRuleIsTheAPIs(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../api/openapi.json")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas struct {
				TenantID struct {
					Pattern string `json:"pattern"`
				} `json:"TenantId"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, intake.TenantIDPattern, doc.Components.Schemas.TenantID.Pattern)
	ddl, err := os.ReadFile("../../schema/migrations/025_tenants.up.sql")
	require.NoError(t, err)
	require.Contains(t, string(ddl), "id ~ '"+intake.TenantIDPattern+"'")
}

// A row whose data breaks its type's schema in the tenant's catalog is
// failed with the path and why, and stores nothing; a valid one of the
// same type is relayed.
func TestRelayFailsASchemaViolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, _, err := b.st.EventTypePut(ctx, catalog.Entry{Name: "order.updated",
		Schema: json.RawMessage(`{"type":"object","properties":{"seq":{"type":"integer","maximum":1}}}`)}, 0)
	require.NoError(t, err)
	b.enqueue(b.event("fits", "s", 1), b.event("breaks", "s", 2))

	n, err := b.relay(relay.Config{}).RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	state, _, _, _ := b.row("fits")
	require.Equal(t, "relayed", state)
	state, failure, _, _ := b.row("breaks")
	require.Equal(t, "failed", state)
	require.NotNil(t, failure)
	require.Contains(t, *failure, "schema violation: data.seq does not match the type's schema")
	require.Contains(t, *failure, "event type order.updated, catalog version 1")
	_, err = b.st.EventGet(ctx, "breaks")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A row whose data holds a number too large to compare with its type's
// bound (the outbox keeps numbers exactly, so 1e9999999 reaches the
// relay) is failed as a schema violation naming it, and the relay goes
// on: the validator's panic on such a number is not the relay's.
func TestRelayFailsANumberBeyondTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, _, err := b.st.EventTypePut(ctx, catalog.Entry{Name: "order.updated",
		Schema: json.RawMessage(`{"type":"object","properties":{"seq":{"maximum":10}}}`)}, 0)
	require.NoError(t, err)
	huge := b.event("huge", "h", 1)
	huge.Data = json.RawMessage(`{"seq":1e9999999}`)
	b.enqueue(huge, b.event("fits", "f", 1))

	n, err := b.relay(relay.Config{}).RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	state, failure, _, _ := b.row("huge")
	require.Equal(t, "failed", state)
	require.NotNil(t, failure)
	require.Contains(t, *failure, "data.seq is a number beyond what the type's schema can judge")
	state, _, _, _ = b.row("fits")
	require.Equal(t, "relayed", state)
}
