package accept_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const testSecret = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0"

// fakeStarter stands in for Temporal: it marks the event waiting, as
// starter.Start does, or fails with down. sweepFirst makes it fail after
// marking, as a start does whose mark timed out while the starter's sweep
// started the same event.
type fakeStarter struct {
	st *store.Store

	mu         sync.Mutex
	down       error
	sweepFirst bool
	started    []string
}

func (f *fakeStarter) Start(ctx context.Context, ev store.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, ev.ID)
	if f.sweepFirst {
		if err := f.st.EventMarkStarted(ctx, ev.ID, ""); err != nil {
			return err
		}
		return context.DeadlineExceeded
	}
	if f.down != nil {
		return f.down
	}
	return f.st.EventMarkStarted(ctx, ev.ID, "")
}

func (f *fakeStarter) set(down error, sweepFirst bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.sweepFirst = down, sweepFirst
}

func (f *fakeStarter) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.started...)
}

type bundle struct {
	t       *testing.T
	st      *store.Store
	starter *fakeStarter
}

// setup gives a default tenant with two endpoints subscribed to order.*.
func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	all, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	st := all.Tenant(store.DefaultTenant)
	for _, id := range []string{"ep_1", "ep_2"} {
		_, err := st.EndpointInsert(ctx, id, "https://example.com/"+id, testSecret, []string{"order.*"})
		require.NoError(t, err)
	}
	return &bundle{t: t, st: st, starter: &fakeStarter{st: st}}
}

func (b *bundle) acceptor(cfg accept.Config) *accept.Acceptor {
	b.t.Helper()
	cfg.StartTimeout = time.Minute
	a, err := accept.New(cfg, b.starter)
	require.NoError(b.t, err)
	return a
}

func request(id, corr string, seq int64, endpoint, data string) accept.Request {
	raw, _ := json.Marshal(seq)
	typ := "order.updated"
	r := intake.Request{ID: &id, CorrelationID: &corr, Sequence: raw, Type: &typ, Data: json.RawMessage(data)}
	if endpoint != "" {
		r.EndpointID = &endpoint
	}
	return accept.Request{Event: r}
}

func (b *bundle) offer(a *accept.Acceptor, req accept.Request) accept.Outcome {
	b.t.Helper()
	o, err := a.Accept(context.Background(), b.st, req)
	require.NoError(b.t, err)
	return o
}

// stored says whether the ledger holds the event id.
func (b *bundle) stored(id string) bool {
	b.t.Helper()
	_, err := b.st.EventGet(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	require.NoError(b.t, err)
	return true
}

// A new event is routed to its type's subscribers, or to the one endpoint
// it names, stored, and started.
func TestAcceptRoutesStoresAndStarts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.acceptor(accept.Config{})

	o := b.offer(a, request("e-1", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.True(t, o.Started)
	require.NoError(t, o.StartErr)
	require.ElementsMatch(t, []string{"ep_1", "ep_2"}, o.Stored.Endpoints)
	require.Equal(t, contract.StateWaiting, o.Stored.State)

	o = b.offer(a, request("e-2", "c", 2, "ep_2", `{"n":2}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.Equal(t, []string{"ep_2"}, o.Stored.Endpoints)
	ev, err := b.st.EventGet(context.Background(), "e-2")
	require.NoError(t, err)
	require.Equal(t, contract.StateWaiting, ev.State)
	require.Equal(t, []string{"e-1", "e-2"}, b.starter.calls())
}

// A start that fails leaves the event stored and queued for the sweep; the
// same event offered again is a repost, started again while it is queued
// and not once it has left queued.
func TestAcceptQueuesWhenTheStartFailsAndARepostStartsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.acceptor(accept.Config{})
	down := errors.New("temporal unavailable")
	b.starter.set(down, false)

	o := b.offer(a, request("e-1", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.False(t, o.Started)
	require.ErrorIs(t, o.StartErr, down)
	ev, err := b.st.EventGet(context.Background(), "e-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateQueued, ev.State)

	o = b.offer(a, request("e-1", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.Repost, o.Kind)
	require.False(t, o.Started, "still down")
	require.ErrorIs(t, o.StartErr, down)

	b.starter.set(nil, false)
	o = b.offer(a, request("e-1", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.Repost, o.Kind)
	require.True(t, o.Started)
	require.Equal(t, contract.StateWaiting, o.Stored.State)

	o = b.offer(a, request("e-1", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.Repost, o.Kind)
	require.True(t, o.Started)
	require.Len(t, b.starter.calls(), 3, "a started event is not started again")
}

// A start that fails because the starter's sweep started the same event
// meanwhile is no failure: the ledger says its workflow exists.
func TestAcceptCountsAStartTheSweepMade(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.acceptor(accept.Config{})
	b.starter.set(nil, true)

	o := b.offer(a, request("e-1", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.True(t, o.Started)
	require.NoError(t, o.StartErr)
	require.NotEqual(t, contract.StateQueued, o.Stored.State)
}

// Every refusal stores nothing, and says why.
func TestAcceptRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.acceptor(accept.Config{})
	require.Equal(t, accept.Accepted, b.offer(a, request("first", "c", 1, "", `{"n":1}`)).Kind)

	o := b.offer(a, request("bad", "c", 0, "", `{}`))
	require.Equal(t, accept.Invalid, o.Kind)
	require.Equal(t, "sequence", o.Invalid.Field)
	require.False(t, o.Invalid.Reserved)

	o = b.offer(a, request("hookflow-mine", "c", 2, "", `{}`))
	require.Equal(t, accept.Invalid, o.Kind)
	require.True(t, o.Invalid.Reserved)

	req := request("tampered", "c", 2, "", `{"n":2}`)
	req.PayloadHash = []byte("not the hash of it")
	require.Equal(t, accept.PayloadMismatch, b.offer(a, req).Kind)

	require.Equal(t, accept.UnknownEndpoint, b.offer(a, request("ghost", "c", 2, "ep_none", `{}`)).Kind)

	capped := b.acceptor(accept.Config{MaxSubscribers: 1})
	require.Equal(t, accept.TooManySubscribers, b.offer(capped, request("crowded", "c", 2, "", `{}`)).Kind)
	require.Equal(t, accept.Accepted, b.offer(capped, request("addressed", "c", 2, "ep_1", `{}`)).Kind, "the cap is on subscribers, not on an addressed event")

	o = b.offer(a, request("first", "c", 1, "", `{"n":"other"}`))
	require.Equal(t, accept.KeyReused, o.Kind)
	require.Contains(t, o.Detail(), "event first was accepted with different content")

	o = b.offer(a, request("taker", "c", 1, "", `{"n":1}`))
	require.Equal(t, accept.SequenceTaken, o.Kind)
	require.Equal(t, "sequence 1 of correlation c is already taken by another event", o.Detail())
	require.Equal(t, int64(2), o.Taken.HighWater)

	_, err := b.st.CorrelationVoid(ctx, "c", []int64{3}, "operator", "lost")
	require.NoError(t, err)
	o = b.offer(a, request("late", "c", 3, "", `{"n":3}`))
	require.Equal(t, accept.SequenceTaken, o.Kind)
	require.Contains(t, o.Detail(), "was voided by an operator")

	for _, id := range []string{"bad", "hookflow-mine", "tampered", "ghost", "crowded", "taker", "late"} {
		require.False(t, b.stored(id), id)
	}
	require.Equal(t, []string{"first", "addressed"}, b.starter.calls())
}

// A new event naming a disabled endpoint is refused when the caller says
// so (the API), and waits in the paused lane when not (the relay); the same
// event again, accepted before the endpoint was disabled, is a repost
// either way.
func TestAcceptDisabledEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	refuse := b.acceptor(accept.Config{RefuseDisabledEndpoint: true})
	require.Equal(t, accept.Accepted, b.offer(refuse, request("before", "c", 1, "ep_1", `{}`)).Kind)
	require.NoError(t, b.st.EndpointDisable(ctx, "ep_1", "test"))

	require.Equal(t, accept.EndpointDisabled, b.offer(refuse, request("after", "c", 2, "ep_1", `{}`)).Kind)
	require.False(t, b.stored("after"))
	require.Equal(t, accept.Repost, b.offer(refuse, request("before", "c", 1, "ep_1", `{}`)).Kind)
	require.Equal(t, accept.KeyReused, b.offer(refuse, request("before", "c", 1, "ep_1", `{"other":1}`)).Kind)

	wait := b.acceptor(accept.Config{})
	o := b.offer(wait, request("after", "c", 2, "ep_1", `{}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.Equal(t, []string{"ep_1"}, o.Stored.Endpoints)
}

// Start starts an event stored another way, as Accept starts a new one.
func TestAcceptStartsAnEventStoredElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.acceptor(accept.Config{})
	down := errors.New("temporal unavailable")
	b.starter.set(down, false)
	stored, err := b.st.TestEventInsert(ctx, "ep_1", []byte(`{"message":"test"}`))
	require.NoError(t, err)
	o := a.Start(ctx, b.st, stored)
	require.Equal(t, accept.Accepted, o.Kind)
	require.False(t, o.Started)
	require.ErrorIs(t, o.StartErr, down)

	b.starter.set(nil, false)
	o = a.Start(ctx, b.st, stored)
	require.True(t, o.Started)
	require.Equal(t, contract.StateWaiting, o.Stored.State)
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := accept.New(accept.Config{StartTimeout: time.Second}, nil)
	require.Error(t, err)
	_, err = accept.New(accept.Config{}, &fakeStarter{})
	require.Error(t, err, "a start with no bound")
	_, err = accept.New(accept.Config{StartTimeout: time.Second, MaxSubscribers: -1}, &fakeStarter{})
	require.Error(t, err)
}
