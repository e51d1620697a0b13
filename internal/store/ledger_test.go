package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
)

// newStore is a store on a fresh database with endpoints "ep", "a", "b" and
// "c".
func newStore(t testing.TB) *store.Store {
	t.Helper()
	st, _ := newStoreOnPool(t)
	return st
}

// newStoreOnPool is newStore with its pool, for a test that holds a
// transaction of its own beside the store's.
func newStoreOnPool(t testing.TB) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool := testenv.MigratedPool(t)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	for _, id := range []string{"ep", "a", "b", "c"} {
		_, err = st.EndpointInsert(context.Background(), id, "https://example.com/"+id, "whsec_x", nil)
		require.NoError(t, err)
	}
	return st, pool
}

func event(id, corr string, seq int64) intake.Event {
	return intake.Event{ID: id, CorrelationID: corr, Sequence: seq, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}
}

// insertEvent stores id as sequence seq of corr, routed to endpoint "ep".
func insertEvent(t *testing.T, st *store.Store, id, corr string, seq int64) store.Event {
	t.Helper()
	return insertRouted(t, st, id, corr, seq, "ep")
}

// insertRouted stores id as sequence seq of corr, routed to endpoints.
func insertRouted(t *testing.T, st *store.Store, id, corr string, seq int64, endpoints ...string) store.Event {
	t.Helper()
	e, ok, err := st.EventInsertRouted(context.Background(), event(id, corr, seq), endpoints, nil)
	require.NoError(t, err)
	require.True(t, ok)
	return e
}

func delivered(t *testing.T, st *store.Store, id, endpoint, corr string, seq int64) {
	t.Helper()
	require.NoError(t, st.DeliveryDelivered(context.Background(), id, endpoint, corr, seq, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
}

func skipped(t *testing.T, st *store.Store, id, endpoint, corr string, seq int64) {
	t.Helper()
	require.NoError(t, st.DeliverySkipped(context.Background(), id, endpoint, corr, seq, time.Now()))
}

func deadLetter(id, endpoint, corr string, seq int64) store.DeadLetter {
	return store.DeadLetter{EventID: id, CorrelationID: corr, Sequence: seq, EndpointID: endpoint, Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}
}

func stateOf(t *testing.T, st *store.Store, id string) contract.State {
	t.Helper()
	e, err := st.EventGet(context.Background(), id)
	require.NoError(t, err)
	return e.State
}

func cursor(t *testing.T, st *store.Store, corr string) int64 {
	t.Helper()
	l, err := st.CorrelationLoadOf(context.Background(), corr, 0)
	require.NoError(t, err)
	return l.Next
}

func lane(t *testing.T, st *store.Store, corr, endpoint string) store.Lane {
	t.Helper()
	l, err := st.LaneGet(context.Background(), corr, endpoint)
	require.NoError(t, err)
	return l
}

// age moves an event's timestamps, and its deliveries', back, as if it had
// sat still for d.
func age(t *testing.T, st *store.Store, id string, d time.Duration) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), `
		UPDATE events SET accepted_at = accepted_at - make_interval(secs => $2), updated_at = updated_at - make_interval(secs => $2) WHERE id = $1;`, id, d.Seconds())
	require.NoError(t, err)
	_, err = st.Pool().Exec(context.Background(), `
		UPDATE deliveries SET updated_at = updated_at - make_interval(secs => $2), accepted_at = accepted_at - make_interval(secs => $2) WHERE event_id = $1`, id, d.Seconds())
	require.NoError(t, err)
}

func ids(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// headsOf lists the claimed heads as "event/endpoint".
func headsOf(hs []store.StuckHead) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Event.ID + "/" + h.EndpointID
	}
	return out
}

// TestEventInsertRefusesTakenKeysAndSequences: a key is stored once, and a
// sequence belongs to one key.
func TestEventInsertRefusesTakenKeysAndSequences(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	e := insertEvent(t, st, "a-1", "a", 1)
	require.Equal(t, contract.StateQueued, e.State)
	for _, again := range []intake.Event{event("a-1", "a", 1), event("other", "a", 1)} {
		_, ok, err := st.EventInsertRouted(context.Background(), again, []string{"ep"}, nil)
		require.NoError(t, err)
		require.False(t, ok, again.ID)
	}
}

// TestEventInsertRoutes: an event is stored with one waiting delivery per
// endpoint it is routed to, none, one or several, and reads back so; the
// intake's EndpointID is not stored.
func TestEventInsertRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, c := range []struct {
		id        string
		endpoints []string
		want      []string
	}{
		{"none", nil, nil},
		{"one", []string{"b"}, []string{"b"}},
		{"three", []string{"c", "a", "b", "a"}, []string{"a", "b", "c"}},
	} {
		in := event(c.id, c.id, 1)
		in.EndpointID = "ep"
		got, ok, err := st.EventInsertRouted(ctx, in, c.endpoints, nil)
		require.NoError(t, err)
		require.True(t, ok)
		for _, e := range []store.Event{got, must(st.EventGet(ctx, c.id))} {
			require.Equal(t, c.want, e.Endpoints, c.id)
			require.Len(t, e.Deliveries, len(c.want), c.id)
			require.Empty(t, e.EndpointID, "the routing is the deliveries")
			require.Equal(t, contract.StateQueued, e.State)
			for i, d := range e.Deliveries {
				require.Equal(t, c.want[i], d.EndpointID)
				require.Equal(t, c.id, d.EventID)
				require.Equal(t, contract.StateWaiting, d.State)
				require.False(t, d.UpdatedAt.IsZero())
			}
		}
	}
	_, _, err := st.EventInsertRouted(ctx, event("nowhere", "nowhere", 1), []string{"no-such-endpoint"}, nil)
	require.Error(t, err, "a delivery names a registered endpoint")
	_, err = st.EventGet(ctx, "nowhere")
	require.ErrorIs(t, err, store.ErrNotFound, "and the event is not stored without it")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEventAggregateState: the event's state follows its deliveries': queued
// until started, then the most pressing of theirs (dead-lettered, then
// delivering, then waiting), and delivered once each is delivered or
// skipped, skipped only when all are.
func TestEventAggregateState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "x-1", "x", 1, "a", "b", "c")
	require.NoError(t, st.EventMarkStarted(ctx, "x-1", "run-1"))
	e, err := st.EventGet(ctx, "x-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateWaiting, e.State)
	require.Equal(t, "run-1", *e.RunID)

	_, err = st.DeliveryStartAttempt(ctx, "x-1", "a")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivering, stateOf(t, st, "x-1"))
	_, err = st.DeadLetterUpsert(ctx, deadLetter("x-1", "b", "x", 1), "w/1")
	require.NoError(t, err)
	require.Equal(t, contract.StateDeadLettered, stateOf(t, st, "x-1"), "a dead letter outranks a delivery under way")
	delivered(t, st, "x-1", "a", "x", 1)
	require.Equal(t, contract.StateDeadLettered, stateOf(t, st, "x-1"))
	skipped(t, st, "x-1", "b", "x", 1)
	require.Equal(t, contract.StateWaiting, stateOf(t, st, "x-1"), "c still waits")
	require.EqualValues(t, 1, cursor(t, st, "x"), "the event is not finished while c waits")
	skipped(t, st, "x-1", "c", "x", 1)
	e, err = st.EventGet(ctx, "x-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivered, e.State, "delivered to a, skipped elsewhere")
	require.NotNil(t, e.DeliveredAt)
	require.NotNil(t, e.ReleasedAt)
	require.EqualValues(t, 2, cursor(t, st, "x"))
	byEndpoint := map[string]store.Delivery{}
	for _, d := range e.Deliveries {
		byEndpoint[d.EndpointID] = d
	}
	require.Equal(t, contract.StateDelivered, byEndpoint["a"].State)
	require.EqualValues(t, 1, byEndpoint["a"].Attempts)
	require.NotNil(t, byEndpoint["a"].DeliveredAt)
	require.Equal(t, contract.StateSkipped, byEndpoint["b"].State)
	require.EqualValues(t, 1, byEndpoint["b"].DeadLetterGeneration)
	require.Equal(t, store.DeadLetterOpen, byEndpoint["b"].DeadLetterStatus)
	require.Equal(t, contract.StateSkipped, byEndpoint["c"].State)

	insertRouted(t, st, "x-2", "x", 2, "a", "b")
	require.NoError(t, st.EventMarkStarted(ctx, "x-2", ""))
	skipped(t, st, "x-2", "a", "x", 2)
	skipped(t, st, "x-2", "b", "x", 2)
	require.Equal(t, contract.StateSkipped, stateOf(t, st, "x-2"), "skipped everywhere")

	// A delivery that starts before its event is marked started (the
	// workflow ran first) takes the event out of queued; the late mark
	// does not put it back to waiting.
	insertRouted(t, st, "x-3", "x", 3, "a", "b")
	_, err = st.DeliveryStartAttempt(ctx, "x-3", "b")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivering, stateOf(t, st, "x-3"))
	require.NoError(t, st.EventMarkStarted(ctx, "x-3", "run-3"))
	require.Equal(t, contract.StateDelivering, stateOf(t, st, "x-3"))
}

// TestQueuedClaimLeases: the sweep takes queued events older than the lease,
// with their routing, and another sweep within the lease does not take them
// again; an event whose workflow started is not taken.
func TestQueuedClaimLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "old", "q", 1, "b", "a")
	insertEvent(t, st, "started", "q", 2)
	insertEvent(t, st, "fresh", "q", 3)
	age(t, st, "old", time.Hour)
	age(t, st, "started", time.Hour)
	require.NoError(t, st.EventMarkStarted(ctx, "started", ""))

	got, err := st.EventsQueuedClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, ids(got))
	require.Equal(t, []string{"a", "b"}, got[0].Endpoints)
	require.Len(t, got[0].Deliveries, 2)
	got, err = st.EventsQueuedClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got, "a claimed event is left alone for the lease")
}

// TestStuckHeadsClaim: only a lane's lowest unfinished delivery is a head,
// only when started, unchanged and its correlation's cursor unmoved for the
// lease.
func TestStuckHeadsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, e := range []struct {
		id   string
		corr string
		seq  int64
	}{{"h-1", "h", 1}, {"h-2", "h", 2}, {"d-1", "d", 1}, {"d-2", "d", 2}, {"fresh-1", "fresh", 1}, {"queued-1", "queued", 1}} {
		insertEvent(t, st, e.id, e.corr, e.seq)
		if e.id != "queued-1" {
			require.NoError(t, st.EventMarkStarted(ctx, e.id, ""))
		}
		if e.id != "fresh-1" {
			age(t, st, e.id, time.Hour)
		}
	}
	// Every correlation's cursor has been on its first event for an hour.
	_, err := st.Pool().Exec(ctx, `UPDATE correlations SET updated_at = updated_at - interval '1 hour'`)
	require.NoError(t, err)
	// d-1 is delivered, so d-2 is d's head.
	delivered(t, st, "d-1", "ep", "d", 1)
	age(t, st, "d-1", time.Hour)

	got, err := st.LanesStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"h-1/ep"}, headsOf(got), "d-2 waited in line for an hour, but the cursor reached it just now")
	require.Equal(t, contract.StateWaiting, got[0].State)
	require.Equal(t, []string{"ep"}, got[0].Event.Endpoints)
	_, err = st.Pool().Exec(ctx, `UPDATE correlations SET updated_at = updated_at - interval '1 hour' WHERE correlation_id = 'd'`)
	require.NoError(t, err)
	got, err = st.LanesStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"d-2/ep"}, headsOf(got), "once the cursor has been on it for the lease, it is")
	got, err = st.LanesStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got, "a head looked at is left alone for the lease")

	require.NoError(t, st.EventRestarted(ctx, "h-1", "its workflow was terminated; started again", "run-2"))
	e, err := st.EventGet(ctx, "h-1")
	require.NoError(t, err)
	require.EqualValues(t, 1, e.Restarts)
	require.NotNil(t, e.RestartedAt)
	require.Equal(t, "its workflow was terminated; started again", *e.RestartReason)
}

// TestStuckHeadsOnePerLane: a correlation's heads sweep returns the head of
// each of its lanes, not the backlog behind them, and not a head held
// behind a sequence that has not arrived.
func TestStuckHeadsOnePerLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "m-1", "m", 1, "a", "b")
	insertRouted(t, st, "m-2", "m", 2, "a", "b", "c")
	insertRouted(t, st, "m-3", "m", 3, "b", "c")
	insertRouted(t, st, "m-5", "m", 5, "a", "ep") // 4 has not arrived
	for _, id := range []string{"m-1", "m-2", "m-3", "m-5"} {
		require.NoError(t, st.EventMarkStarted(ctx, id, ""))
	}
	delivered(t, st, "m-1", "b", "m", 1)
	for _, id := range []string{"m-1", "m-2", "m-3", "m-5"} {
		age(t, st, id, time.Hour)
	}
	_, err := st.Pool().Exec(ctx, `UPDATE correlations SET updated_at = updated_at - interval '1 hour'`)
	require.NoError(t, err)

	got, err := st.LanesStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"m-1/a", "m-2/b", "m-2/c"}, headsOf(got),
		"a's head is 1, b finished 1 so its head is 2, c's is 2; ep's head 5 waits for 4")
}

// TestLaneMoves: a lane's previous sequence is its last delivered, its
// skipped tail the skips since; a repeated or late finish changes neither.
func TestLaneMoves(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	for s := int64(1); s <= 4; s++ {
		insertRouted(t, st, corrSeq("l", s), "l", s, "a", "b")
	}
	require.Equal(t, store.Lane{EndpointID: "a"}, lane(t, st, "l", "a"), "nothing finished yet")
	delivered(t, st, "l-1", "a", "l", 1)
	skipped(t, st, "l-2", "a", "l", 2)
	skipped(t, st, "l-3", "a", "l", 3)
	require.Equal(t, store.Lane{EndpointID: "a", LastFinished: 3, Previous: 1, Skipped: []int64{2, 3}}, lane(t, st, "l", "a"))
	// Repeats, and a finish of an earlier sequence, do not move it.
	skipped(t, st, "l-3", "a", "l", 3)
	delivered(t, st, "l-1", "a", "l", 1)
	skipped(t, st, "l-2", "a", "l", 2)
	require.Equal(t, store.Lane{EndpointID: "a", LastFinished: 3, Previous: 1, Skipped: []int64{2, 3}}, lane(t, st, "l", "a"))
	delivered(t, st, "l-4", "a", "l", 4)
	require.Equal(t, store.Lane{EndpointID: "a", LastFinished: 4, Previous: 4}, lane(t, st, "l", "a"), "a delivery empties the tail")
	require.Equal(t, store.Lane{EndpointID: "b"}, lane(t, st, "l", "b"), "lanes move apart")

	// A finish for a delivery the event does not have moves no lane: a
	// delivered one is refused (its attempt names no delivery), a skipped
	// one changes nothing.
	require.Error(t, st.DeliveryDelivered(context.Background(), "l-2", "c", "l", 2, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	skipped(t, st, "l-2", "c", "l", 2)
	require.Equal(t, store.Lane{EndpointID: "c"}, lane(t, st, "l", "c"))
	attempts, err := st.AttemptsList(context.Background(), "l-1", "a")
	require.NoError(t, err)
	require.Len(t, attempts, 2, "a repeat records its attempt again")
}

// TestCursorMovesOnceAndOnlyForward: finishing an event moves its
// correlation's cursor past it; a repeat, or a finish of an older event,
// does not move it.
func TestCursorMovesOnceAndOnlyForward(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	insertEvent(t, st, "c-1", "c", 1)
	insertEvent(t, st, "c-2", "c", 2)
	delivered(t, st, "c-1", "ep", "c", 1)
	skipped(t, st, "c-2", "ep", "c", 2)
	delivered(t, st, "c-1", "ep", "c", 1)
	require.EqualValues(t, 3, cursor(t, st, "c"))
	require.Equal(t, []int64{2}, lane(t, st, "c", "ep").Skipped)
}

// TestCursorOverGapsAndLanes: the cursor stops at a sequence that has not
// arrived and at one not finished in every lane, and jumps over every
// sequence finished out of order once the one holding it finishes.
func TestCursorOverGapsAndLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "o-1", "o", 1, "a", "b")
	insertRouted(t, st, "o-2", "o", 2, "b")
	insertRouted(t, st, "o-4", "o", 4, "a")
	insertRouted(t, st, "o-5", "o", 5, "b")
	delivered(t, st, "o-1", "b", "o", 1)
	delivered(t, st, "o-2", "b", "o", 2) // b is ahead of a, which holds 1
	require.EqualValues(t, 1, cursor(t, st, "o"))
	delivered(t, st, "o-1", "a", "o", 1)
	require.EqualValues(t, 3, cursor(t, st, "o"), "1 and 2 are finished; 3 has not arrived")
	delivered(t, st, "o-4", "a", "o", 4)
	delivered(t, st, "o-5", "b", "o", 5)
	require.EqualValues(t, 3, cursor(t, st, "o"), "the gap holds it")
	insertRouted(t, st, "o-3", "o", 3, "a", "b")
	require.NoError(t, st.EventMarkStarted(ctx, "o-3", ""))
	skipped(t, st, "o-3", "b", "o", 3)
	require.EqualValues(t, 3, cursor(t, st, "o"))
	delivered(t, st, "o-3", "a", "o", 3)
	require.EqualValues(t, 6, cursor(t, st, "o"), "4 and 5 finished while 3 was missing")
	_, ok, err := st.EventInsertRouted(ctx, event("late", "o", 5), []string{"a"}, nil)
	require.NoError(t, err)
	require.False(t, ok, "a sequence behind the cursor is refused")
}

// TestUnroutedEventMovesCursor: an event routed nowhere is finished once
// its workflow has started, and the cursor moves past it then (not before:
// the sequencer releases it like any other).
func TestUnroutedEventMovesCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "u-1", "u", 1)
	insertRouted(t, st, "u-2", "u", 2, "a")
	insertRouted(t, st, "u-3", "u", 3)
	require.EqualValues(t, 1, cursor(t, st, "u"))
	require.NoError(t, st.EventMarkStarted(ctx, "u-3", "run-3"))
	require.Equal(t, contract.StateDelivered, stateOf(t, st, "u-3"))
	require.EqualValues(t, 1, cursor(t, st, "u"), "1 is still queued")
	require.NoError(t, st.EventMarkStarted(ctx, "u-1", "run-1"))
	e, err := st.EventGet(ctx, "u-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivered, e.State)
	require.NotNil(t, e.DeliveredAt)
	require.Equal(t, "run-1", *e.RunID)
	require.EqualValues(t, 2, cursor(t, st, "u"))
	require.NoError(t, st.EventMarkStarted(ctx, "u-1", "again"), "a repeat is harmless")
	delivered(t, st, "u-2", "a", "u", 2)
	require.EqualValues(t, 4, cursor(t, st, "u"), "3 finished before 2")
	require.NoError(t, st.EventMarkStarted(ctx, "no-such-event", ""))
}

// TestDeadLetterGenerations: each dead-lettering of a delivery is a new
// generation; a replay or skip claims one generation once, so a second
// click, or a late mark of an earlier generation, changes nothing.
func TestDeadLetterGenerations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "g-1", "g", 1)
	dl := deadLetter("g-1", "ep", "g", 1)
	gen, err := st.DeadLetterUpsert(ctx, dl, "run/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen)

	ok, err := st.DeadLetterMarkReplayed(ctx, "g-1", "ep", 1, "alice")
	require.NoError(t, err)
	require.True(t, ok, "the first replay claims it")
	ok, err = st.DeadLetterMarkReplayed(ctx, "g-1", "ep", 1, "bob")
	require.NoError(t, err)
	require.False(t, ok, "a second replay of the same dead letter is refused")
	ok, err = st.DeadLetterMarkSkipped(ctx, "g-1", "ep", 1, "carol", "")
	require.NoError(t, err)
	require.False(t, ok, "and so is a skip of it")

	gen, err = st.DeadLetterUpsert(ctx, dl, "run/2")
	require.NoError(t, err)
	require.EqualValues(t, 2, gen, "dead-lettered again: the next generation, open")
	ok, err = st.DeadLetterMarkReplayed(ctx, "g-1", "ep", 1, "late")
	require.NoError(t, err)
	require.False(t, ok, "a late mark of generation 1 leaves generation 2 open")
	d, err := st.DeadLetterGet(ctx, "g-1", "ep")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterOpen, d.Status)
	require.EqualValues(t, 1, d.ReplayCount)

	ok, err = st.DeadLetterMarkSkipped(ctx, "g-1", "ep", 2, "carol", "superseded")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, st.DeadLetterReopen(ctx, "g-1", "ep", 2))
	d, err = st.DeadLetterGet(ctx, "g-1", "ep")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterOpen, d.Status, "an undone claim is open again")
	require.Nil(t, d.SkippedBy)
}

// TestDeadLettersPerDelivery: two endpoints of one event are dead-lettered
// independently: each its own generations and claims, each held only in its
// own lane, and a replay claimed for one lets only that one be sent again.
func TestDeadLettersPerDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "p-1", "p", 1, "a", "b", "c")
	insertRouted(t, st, "p-2", "p", 2, "a", "b", "c")
	require.NoError(t, st.EventMarkStarted(ctx, "p-1", ""))
	for _, ep := range []string{"a", "b"} {
		_, err := st.DeliveryStartAttempt(ctx, "p-1", ep)
		require.NoError(t, err)
	}
	gen, err := st.DeadLetterUpsert(ctx, deadLetter("p-1", "a", "p", 1), "a/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen)
	gen, err = st.DeadLetterUpsert(ctx, deadLetter("p-1", "a", "p", 1), "a/2")
	require.NoError(t, err)
	require.EqualValues(t, 2, gen)
	gen, err = st.DeadLetterUpsert(ctx, deadLetter("p-1", "b", "p", 1), "b/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen, "b's generations are its own")
	gen, err = st.DeadLetterUpsert(ctx, deadLetter("p-1", "b", "p", 1), "a/2")
	require.NoError(t, err)
	require.EqualValues(t, 2, gen, "and so are its windows")
	delivered(t, st, "p-1", "c", "p", 1)

	ok, err := st.DeadLetterMarkReplayed(ctx, "p-1", "a", 2, "alice")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.DeadLetterMarkReplayed(ctx, "p-1", "b", 2, "bob")
	require.NoError(t, err)
	require.True(t, ok, "a's claim does not take b's")
	ok, err = st.DeadLetterMarkReplayed(ctx, "p-1", "a", 2, "again")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, st.DeadLetterReopen(ctx, "p-1", "b", 2))
	a, err := st.DeadLetterGet(ctx, "p-1", "a")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterReplayed, a.Status, "reopening b leaves a's claim")

	// a's replay is claimed, so a is sent again; b's is not, so it is not.
	start, err := st.DeliveryStartAttempt(ctx, "p-1", "a")
	require.NoError(t, err)
	require.Equal(t, contract.StateDeadLettered, start.State)
	require.Equal(t, store.DeadLetterReplayed, start.DeadLetterStatus)
	require.EqualValues(t, 2, start.Generation)
	start, err = st.DeliveryStartAttempt(ctx, "p-1", "b")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterOpen, start.DeadLetterStatus)
	e, err := st.EventGet(ctx, "p-1")
	require.NoError(t, err)
	require.Equal(t, []contract.State{contract.StateDelivering, contract.StateDeadLettered, contract.StateDelivered},
		[]contract.State{e.Deliveries[0].State, e.Deliveries[1].State, e.Deliveries[2].State})
	require.Equal(t, contract.StateDeadLettered, e.State)

	// c's lane moves on past the event b and a hold; theirs do not.
	delivered(t, st, "p-2", "c", "p", 2)
	require.EqualValues(t, 2, lane(t, st, "p", "c").Previous)
	require.EqualValues(t, 0, lane(t, st, "p", "a").LastFinished)
	require.EqualValues(t, 1, cursor(t, st, "p"))

	// A dead letter for a finished delivery is refused; for one the event
	// does not have, not found.
	_, err = st.DeadLetterUpsert(ctx, deadLetter("p-1", "c", "p", 1), "c/1")
	require.ErrorIs(t, err, store.ErrEventFinished)
	_, err = st.DeadLetterUpsert(ctx, deadLetter("p-1", "ep", "p", 1), "ep/1")
	require.ErrorIs(t, err, store.ErrNotFound)

	dls, err := st.DeadLettersOfEvent(ctx, "p-1")
	require.NoError(t, err)
	require.Len(t, dls, 2)
	require.Equal(t, []string{"a", "b"}, []string{dls[0].EndpointID, dls[1].EndpointID})
	require.Equal(t, store.DeadLetterReplayed, dls[0].Status)
	require.Equal(t, store.DeadLetterOpen, dls[1].Status)
	require.NotNil(t, dls[0].Envelope)
	dls, err = st.DeadLettersOfEvent(ctx, "p-2")
	require.NoError(t, err)
	require.Empty(t, dls)

	page, err := st.DeadLetterList(ctx, store.DeadLetterFilter{EventID: "p-1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page, 2)
}

// TestDeadLetterWriteRetriedForItsWindow (a retried write once bumped the
// generation past an operator's claim and dropped its signal): the write
// of a dead letter is retried after its first try committed and its result was
// lost, and an operator claimed a replay of it in between. The retry, for
// the same window, is a no-op: it answers the generation the operator
// claimed and leaves the claim, so the workflow still takes the operator's
// signal. The next window's write is the next generation.
func TestDeadLetterWriteRetriedForItsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "w-1", "w", 1)
	dl := deadLetter("w-1", "ep", "w", 1)
	gen, err := st.DeadLetterUpsert(ctx, dl, "run-a/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen)
	ok, err := st.DeadLetterMarkReplayed(ctx, "w-1", "ep", 1, "alice")
	require.NoError(t, err)
	require.True(t, ok)

	gen, err = st.DeadLetterUpsert(ctx, dl, "run-a/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen, "a retry of the same window's write is the same dead letter")
	d, err := st.DeadLetterGet(ctx, "w-1", "ep")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterReplayed, d.Status, "the operator's claim stands")
	require.Equal(t, "alice", *d.ReplayedBy)

	gen, err = st.DeadLetterUpsert(ctx, dl, "run-a/2")
	require.NoError(t, err)
	require.EqualValues(t, 2, gen, "the replayed window's own dead letter is the next generation")
	_, err = st.DeadLetterUpsert(ctx, dl, "")
	require.Error(t, err, "a write names its window")
}

// TestFinishedEventsStayFinished: a delivered delivery gets no dead letter
// (the workflow saw its window run out, the attempt's result was lost), and
// a later skip does not turn it into skipped.
func TestFinishedEventsStayFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "f-1", "f", 1)
	delivered(t, st, "f-1", "ep", "f", 1)

	_, err := st.DeadLetterUpsert(ctx, deadLetter("f-1", "ep", "f", 1), "run/1")
	require.ErrorIs(t, err, store.ErrEventFinished)
	_, err = st.DeadLetterGet(ctx, "f-1", "ep")
	require.ErrorIs(t, err, store.ErrNotFound, "no dead letter is written")

	skipped(t, st, "f-1", "ep", "f", 1)
	e, err := st.EventGet(ctx, "f-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivered, e.State)
	require.NotNil(t, e.DeliveredAt)
	require.Equal(t, contract.StateDelivered, e.Deliveries[0].State)
	require.Equal(t, store.Lane{EndpointID: "ep", LastFinished: 1, Previous: 1}, lane(t, st, "f", "ep"))
}

// TestSkippedTailOutlivesPrunedKeys: the skipped tail a fresh sequencer
// loads is what was skipped in the lane since its last delivered event,
// also once the cleaner has deleted that event's row
// (HOOKFLOW_KEY_RETENTION): an old skip is never sent again in
// skipped_sequences.
func TestSkippedTailOutlivesPrunedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	skip := func(id string, seq int64) {
		t.Helper()
		_, err := st.DeadLetterUpsert(ctx, deadLetter(id, "ep", "p", seq), "run/1")
		require.NoError(t, err)
		skipped(t, st, id, "ep", "p", seq)
	}
	tail := func() []int64 { return lane(t, st, "p", "ep").Skipped }
	for s := int64(1); s <= 5; s++ {
		insertEvent(t, st, corrSeq("p", s), "p", s)
	}
	skip("p-1", 1)
	require.Equal(t, []int64{1}, tail())
	delivered(t, st, "p-2", "ep", "p", 2)
	require.Empty(t, tail(), "2 was delivered after the skip of 1")

	// The cleaner deletes delivered 2's key, with its delivery; skipped 1
	// keeps its row (it has a dead letter).
	age(t, st, "p-2", time.Hour)
	_, err := st.EventsPrunePayloads(ctx, time.Minute, 100)
	require.NoError(t, err)
	keys, attempts, err := st.EventsPruneKeys(ctx, time.Minute, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, keys)
	require.EqualValues(t, 1, attempts)
	_, err = st.EventGet(ctx, "p-2")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Empty(t, tail(), "1 was skipped before 2, delivered, although 2's row is gone")
	require.EqualValues(t, 2, lane(t, st, "p", "ep").Previous)

	skip("p-3", 3)
	skip("p-4", 4)
	require.Equal(t, []int64{3, 4}, tail())
	delivered(t, st, "p-5", "ep", "p", 5)
	require.Empty(t, tail())
}

// TestPruneKeepsEventsAheadOfTheCursor: an event finished in every lane
// while an earlier one is held in another lane is not pruned: the cursor
// would read its sequence as one that has not arrived, and stop there for
// good.
func TestPruneKeepsEventsAheadOfTheCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertRouted(t, st, "k-1", "k", 1, "a")
	insertRouted(t, st, "k-2", "k", 2, "b")
	delivered(t, st, "k-2", "b", "k", 2)
	age(t, st, "k-2", time.Hour)
	_, err := st.EventsPrunePayloads(ctx, time.Minute, 100)
	require.NoError(t, err)
	keys, _, err := st.EventsPruneKeys(ctx, time.Minute, 100)
	require.NoError(t, err)
	require.Zero(t, keys)
	delivered(t, st, "k-1", "a", "k", 1)
	require.EqualValues(t, 3, cursor(t, st, "k"))
	_, err = st.Pool().Exec(ctx, `UPDATE events SET updated_at = updated_at - interval '1 hour'`)
	require.NoError(t, err)
	keys, _, err = st.EventsPruneKeys(ctx, time.Minute, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, keys, "behind the cursor now, 2 goes (1 has its payload still)")
	require.Equal(t, store.Lane{EndpointID: "b", LastFinished: 2, Previous: 2}, lane(t, st, "k", "b"), "its lane's row stays")
}

func corrSeq(corr string, seq int64) string { return corr + "-" + strconv.FormatInt(seq, 10) }

// TestSweepsPutDeferredRowsLast: a row a sweep could not handle goes to the
// back of its line; the rows behind it come first once the leases are up.
func TestSweepsPutDeferredRowsLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, id := range []string{"q1-1", "q2-1"} {
		insertEvent(t, st, id, id[:2], 1)
	}
	age(t, st, "q1-1", 2*time.Hour)
	age(t, st, "q2-1", time.Hour)
	leaseUp := func() {
		t.Helper()
		_, err := st.Pool().Exec(ctx, `UPDATE events SET swept_at = swept_at - interval '10 minutes';
			UPDATE correlations SET swept_at = swept_at - interval '10 minutes'`)
		require.NoError(t, err)
	}

	got, err := st.EventsQueuedClaim(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"q1-1"}, ids(got), "the oldest first")
	require.NoError(t, st.EventSweepDeferred(ctx, "q1-1"))
	leaseUp()
	got, err = st.EventsQueuedClaim(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"q2-1"}, ids(got), "the one that failed goes after the one behind it")

	for _, id := range []string{"q1-1", "q2-1"} {
		require.NoError(t, st.EventMarkStarted(ctx, id, ""))
		age(t, st, id, time.Hour)
	}
	_, err = st.Pool().Exec(ctx, `UPDATE correlations SET updated_at = updated_at - interval '1 hour', swept_at = NULL;
		UPDATE correlations SET updated_at = updated_at - interval '1 hour' WHERE correlation_id = 'q1'`)
	require.NoError(t, err)
	heads, err := st.LanesStuckHeadsClaim(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"q1-1/ep"}, headsOf(heads))
	require.NoError(t, st.CorrelationSweepDeferred(ctx, "q1"))
	leaseUp()
	heads, err = st.LanesStuckHeadsClaim(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"q2-1/ep"}, headsOf(heads))
}

// TestCorrelationLoadOf: the sequencer's load is the cursor, the runs of
// sequences that have arrived from it on, and every lane (with a row or an
// open delivery) with its position and first open deliveries, bounded per
// lane; LanesLoad reads a lane's next ones after a sequence.
func TestCorrelationLoadOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	got, err := st.CorrelationLoadOf(ctx, "never", 2)
	require.NoError(t, err)
	require.Equal(t, store.CorrelationLoad{Next: 1, Frontier: 1}, got, "a correlation never seen")

	insertRouted(t, st, "r-1", "r", 1, "a")
	insertRouted(t, st, "r-2", "r", 2, "b", "a")
	insertRouted(t, st, "r-3", "r", 3)
	insertRouted(t, st, "r-5", "r", 5, "b")
	insertRouted(t, st, "r-6", "r", 6, "b", "c")
	insertRouted(t, st, "r-7", "r", 7, "b")
	insertRouted(t, st, "r-9", "r", 9, "c")
	delivered(t, st, "r-1", "a", "r", 1)
	skipped(t, st, "r-2", "b", "r", 2)
	got, err = st.CorrelationLoadOf(ctx, "r", 2)
	require.NoError(t, err)
	waiting := func(id string, seq int64) contract.QueuedEvent {
		return contract.QueuedEvent{Sequence: seq, EventID: id, State: contract.StateWaiting}
	}
	require.Equal(t, store.CorrelationLoad{
		Next: 2, Frontier: 4,
		Arrived: []contract.SequenceRange{{From: 5, To: 7}, {From: 9, To: 9}},
		Lanes: []store.LaneLoad{
			{Lane: store.Lane{EndpointID: "a", LastFinished: 1, Previous: 1}, Open: []contract.QueuedEvent{waiting("r-2", 2)}},
			{Lane: store.Lane{EndpointID: "b", LastFinished: 2, Skipped: []int64{2}}, Open: []contract.QueuedEvent{waiting("r-5", 5), waiting("r-6", 6)}, More: true},
			{Lane: store.Lane{EndpointID: "c"}, Open: []contract.QueuedEvent{waiting("r-6", 6), waiting("r-9", 9)}},
		},
	}, got)

	lanes, err := st.LanesLoad(ctx, "r", []string{"b", "c"}, []int64{5, 6}, 2)
	require.NoError(t, err)
	require.Equal(t, []store.LaneLoad{
		{Lane: store.Lane{EndpointID: "b", LastFinished: 2, Skipped: []int64{2}}, Open: []contract.QueuedEvent{waiting("r-6", 6), waiting("r-7", 7)}},
		{Lane: store.Lane{EndpointID: "c"}, Open: []contract.QueuedEvent{waiting("r-9", 9)}},
	}, lanes)
}
