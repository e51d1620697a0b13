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

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/relay"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/kit/outbox"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fakeStarter stands in for Temporal: it records each start and marks the
// event waiting in the ledger, as starter.Start does, or fails while down.
type fakeStarter struct {
	st *store.Store

	delay time.Duration

	mu      sync.Mutex
	down    error
	started map[string]int
	order   map[string][]int64 // correlation → sequences, in start order
	calls   int
}

func (f *fakeStarter) Start(ctx context.Context, ev store.Event) error {
	time.Sleep(f.delay)
	f.mu.Lock()
	f.calls++
	down := f.down
	if down == nil {
		f.started[ev.ID]++
		f.order[ev.CorrelationID] = append(f.order[ev.CorrelationID], ev.Sequence)
	}
	f.mu.Unlock()
	if down != nil {
		return fmt.Errorf("start workflow for event %s: %w", ev.ID, down)
	}
	return f.st.EventMarkStarted(ctx, ev.ID, "")
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
	st       *store.Store
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
	st, err := store.New(ledger)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointInsert(ctx, "ep_1", "https://example.com/hook", "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0", nil)
	require.NoError(t, err)
	return &bundle{t: t, producer: producer, src: src, st: st, endpoint: ep.ID,
		starter: &fakeStarter{st: st, started: map[string]int{}, order: map[string][]int64{}}}
}

func (b *bundle) relay(cfg relay.Config) *relay.Relay {
	b.t.Helper()
	r, err := relay.New(cfg, relay.Deps{Outbox: b.src, Ledger: b.st, Starter: b.starter, Logger: testenv.Logger(b.t)})
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

func (b *bundle) row(id string) (state string, failure, lastError *string, attempts int) {
	b.t.Helper()
	err := b.producer.QueryRow(context.Background(), "SELECT state, failure, last_error, attempts FROM outbox WHERE id = $1", id).
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
	b.enqueue(b.event("o-3", "order", 3))
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
		// The ledger judges it exactly as an API post of the same event.
		want, fe := intake.Validate(b.event(id, "order", seq).Request())
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
		_, inserted, err := b.st.EventInsertRouted(ctx, ev, []string{b.endpoint})
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
type byType struct{ *store.Store }

func (l byType) Route(ctx context.Context, e intake.Event, maxSubscribers int) (*store.Endpoint, []string, error) {
	e.EndpointID = ""
	return l.Store.Route(ctx, e, maxSubscribers)
}

// An event more endpoints subscribe to than HOOKFLOW_MAX_SUBSCRIBERS is
// held, not failed (issue 33 review, item 2): its sequence would never
// arrive, and its correlation would be stuck behind the gap, though the
// condition passes once an endpoint is unsubscribed. The row stays pending
// with the reason noted, its correlation waits out the backoff (a round
// within it does not try it), the other correlations go on, and once the
// subscribers are back under the cap it is relayed, in order.
func TestRelayHoldsTooManySubscribers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.st.EndpointInsert(ctx, "ep_2", "https://example.com/two", "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0", []string{"order.*"})
	require.NoError(t, err)
	free := b.event("free-1", "free", 1)
	free.Type = "invoice.paid" // one subscriber
	b.enqueue(b.event("h-1", "held", 1), b.event("h-2", "held", 2), free)
	newRelay := func(cfg relay.Config) *relay.Relay {
		r, err := relay.New(cfg, relay.Deps{Outbox: b.src, Ledger: byType{b.st}, Starter: b.starter, Logger: testenv.Logger(t)})
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
