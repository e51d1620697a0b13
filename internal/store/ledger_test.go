package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/kit/intake"
)

func newStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	_, err = st.EndpointInsert(context.Background(), "ep", "https://example.com/hook", "whsec_x", nil)
	require.NoError(t, err)
	return st
}

// insertEvent stores id as sequence seq of corr, for endpoint "ep".
func insertEvent(t *testing.T, st *store.Store, id, corr string, seq int64) store.Event {
	t.Helper()
	e, ok, err := st.EventInsert(context.Background(), intake.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}})
	require.NoError(t, err)
	require.True(t, ok)
	return e
}

// age moves an event's timestamps back, as if it had sat still for d.
func age(t *testing.T, st *store.Store, id string, d time.Duration) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(),
		"UPDATE events SET accepted_at = accepted_at - make_interval(secs => $2), updated_at = updated_at - make_interval(secs => $2) WHERE id = $1", id, d.Seconds())
	require.NoError(t, err)
}

func ids(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
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
	for _, again := range []intake.Event{
		{ID: "a-1", CorrelationID: "a", Sequence: 1, EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}},
		{ID: "other", CorrelationID: "a", Sequence: 1, EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{2}},
	} {
		_, ok, err := st.EventInsert(context.Background(), again)
		require.NoError(t, err)
		require.False(t, ok, again.ID)
	}
}

// TestQueuedClaimLeases: the sweep takes queued events older than the lease,
// and another sweep within the lease does not take them again; an event
// whose workflow started is not taken.
func TestQueuedClaimLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "old", "q", 1)
	insertEvent(t, st, "started", "q", 2)
	insertEvent(t, st, "fresh", "q", 3)
	age(t, st, "old", time.Hour)
	age(t, st, "started", time.Hour)
	require.NoError(t, st.EventMarkStarted(ctx, "started", ""))

	got, err := st.EventsQueuedClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, ids(got))
	got, err = st.EventsQueuedClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got, "a claimed event is left alone for the lease")
}

// TestStuckHeadsClaim: only a correlation's next event is a head, only when
// unfinished, started, unchanged and at the head of its line for the lease.
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
	require.NoError(t, st.EventFinish(ctx, "d-1", "d", 1, contract.StateDelivered, time.Now()))
	age(t, st, "d-1", time.Hour)

	got, err := st.EventsStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"h-1"}, ids(got), "d-2 waited in line for an hour, but the cursor reached it just now")
	_, err = st.Pool().Exec(ctx, `UPDATE correlations SET updated_at = updated_at - interval '1 hour' WHERE correlation_id = 'd'`)
	require.NoError(t, err)
	got, err = st.EventsStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"d-2"}, ids(got), "once the cursor has been on it for the lease, it is")
	got, err = st.EventsStuckHeadsClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got, "a head looked at is left alone for the lease")

	require.NoError(t, st.EventRestarted(ctx, "h-1", "its workflow was terminated; started again", "run-2"))
	e, err := st.EventGet(ctx, "h-1")
	require.NoError(t, err)
	require.EqualValues(t, 1, e.Restarts)
	require.NotNil(t, e.RestartedAt)
	require.Equal(t, "its workflow was terminated; started again", *e.RestartReason)
}

// TestCursorMovesOnceAndOnlyForward: finishing an event moves its
// correlation's cursor past it; a repeat, or a finish of an older event,
// does not move it.
func TestCursorMovesOnceAndOnlyForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "c-1", "c", 1)
	insertEvent(t, st, "c-2", "c", 2)
	require.NoError(t, st.EventDelivered(ctx, "c-1", "c", 1, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	require.NoError(t, st.EventFinish(ctx, "c-2", "c", 2, contract.StateSkipped, time.Now()))
	require.NoError(t, st.EventDelivered(ctx, "c-1", "c", 1, store.Attempt{Attempt: 2, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	next, err := st.CorrelationNext(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 3, next)
	skipped, err := st.CorrelationSkippedTail(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, []int64{2}, skipped)
}

// TestDeadLetterGenerations: each dead-lettering of an event is a new
// generation; a replay or skip claims one generation once, so a second
// click, or a late mark of an earlier generation, changes nothing.
func TestDeadLetterGenerations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "g-1", "g", 1)
	dl := store.DeadLetter{EventID: "g-1", CorrelationID: "g", Sequence: 1, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}
	gen, err := st.DeadLetterUpsert(ctx, dl, "run/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen)

	ok, err := st.DeadLetterMarkReplayed(ctx, "g-1", 1, "alice")
	require.NoError(t, err)
	require.True(t, ok, "the first replay claims it")
	ok, err = st.DeadLetterMarkReplayed(ctx, "g-1", 1, "bob")
	require.NoError(t, err)
	require.False(t, ok, "a second replay of the same dead letter is refused")
	ok, err = st.DeadLetterMarkSkipped(ctx, "g-1", 1, "carol", "")
	require.NoError(t, err)
	require.False(t, ok, "and so is a skip of it")

	gen, err = st.DeadLetterUpsert(ctx, dl, "run/2")
	require.NoError(t, err)
	require.EqualValues(t, 2, gen, "dead-lettered again: the next generation, open")
	ok, err = st.DeadLetterMarkReplayed(ctx, "g-1", 1, "late")
	require.NoError(t, err)
	require.False(t, ok, "a late mark of generation 1 leaves generation 2 open")
	d, err := st.DeadLetterGet(ctx, "g-1")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterOpen, d.Status)
	require.EqualValues(t, 1, d.ReplayCount)

	ok, err = st.DeadLetterMarkSkipped(ctx, "g-1", 2, "carol", "superseded")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, st.DeadLetterReopen(ctx, "g-1", 2))
	d, err = st.DeadLetterGet(ctx, "g-1")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterOpen, d.Status, "an undone claim is open again")
	require.Nil(t, d.SkippedBy)
}

// TestDeadLetterWriteRetriedForItsWindow (issue 22, defect 6): the write of
// a dead letter is retried after its first try committed and its result was
// lost, and an operator claimed a replay of it in between. The retry, for
// the same window, is a no-op: it answers the generation the operator
// claimed and leaves the claim, so the workflow still takes the operator's
// signal. The next window's write is the next generation.
func TestDeadLetterWriteRetriedForItsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "w-1", "w", 1)
	dl := store.DeadLetter{EventID: "w-1", CorrelationID: "w", Sequence: 1, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}
	gen, err := st.DeadLetterUpsert(ctx, dl, "run-a/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen)
	ok, err := st.DeadLetterMarkReplayed(ctx, "w-1", 1, "alice")
	require.NoError(t, err)
	require.True(t, ok)

	gen, err = st.DeadLetterUpsert(ctx, dl, "run-a/1")
	require.NoError(t, err)
	require.EqualValues(t, 1, gen, "a retry of the same window's write is the same dead letter")
	d, err := st.DeadLetterGet(ctx, "w-1")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterReplayed, d.Status, "the operator's claim stands")
	require.Equal(t, "alice", *d.ReplayedBy)

	gen, err = st.DeadLetterUpsert(ctx, dl, "run-a/2")
	require.NoError(t, err)
	require.EqualValues(t, 2, gen, "the replayed window's own dead letter is the next generation")
	_, err = st.DeadLetterUpsert(ctx, dl, "")
	require.Error(t, err, "a write names its window")
}

// TestFinishedEventsStayFinished: a delivered event gets no dead letter (the
// workflow saw its window run out, the attempt's result was lost), and a
// later skip does not turn it into skipped.
func TestFinishedEventsStayFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "f-1", "f", 1)
	require.NoError(t, st.EventDelivered(ctx, "f-1", "f", 1, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))

	_, err := st.DeadLetterUpsert(ctx, store.DeadLetter{EventID: "f-1", CorrelationID: "f", Sequence: 1, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "window spent", DeadLetteredAt: time.Now()}, "run/1")
	require.ErrorIs(t, err, store.ErrEventFinished)
	_, err = st.DeadLetterGet(ctx, "f-1")
	require.ErrorIs(t, err, store.ErrNotFound, "no dead letter is written")

	require.NoError(t, st.EventFinish(ctx, "f-1", "f", 1, contract.StateSkipped, time.Now()))
	e, err := st.EventGet(ctx, "f-1")
	require.NoError(t, err)
	require.Equal(t, contract.StateDelivered, e.State)
	require.NotNil(t, e.DeliveredAt)
}

// TestSkippedTailOutlivesPrunedKeys: the skipped tail a fresh sequencer
// loads is what was skipped since the last delivered event, also once the
// cleaner has deleted that event's row (HOOKFLOW_KEY_RETENTION): an old skip
// is never sent again in skipped_sequences.
func TestSkippedTailOutlivesPrunedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	skip := func(id string, seq int64) {
		t.Helper()
		_, err := st.DeadLetterUpsert(ctx, store.DeadLetter{EventID: id, CorrelationID: "p", Sequence: seq, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}, "run/1")
		require.NoError(t, err)
		require.NoError(t, st.EventFinish(ctx, id, "p", seq, contract.StateSkipped, time.Now()))
	}
	tail := func() []int64 {
		t.Helper()
		got, err := st.CorrelationSkippedTail(ctx, "p")
		require.NoError(t, err)
		return got
	}
	for s := int64(1); s <= 5; s++ {
		insertEvent(t, st, corrSeq("p", s), "p", s)
	}
	skip("p-1", 1)
	require.Equal(t, []int64{1}, tail())
	require.NoError(t, st.EventDelivered(ctx, "p-2", "p", 2, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	require.Empty(t, tail(), "2 was delivered after the skip of 1")

	// The cleaner deletes delivered 2's key; skipped 1 keeps its row (it has
	// a dead letter).
	age(t, st, "p-2", time.Hour)
	_, err := st.EventsPrunePayloads(ctx, time.Minute, 100)
	require.NoError(t, err)
	keys, _, err := st.EventsPruneKeys(ctx, time.Minute, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, keys)
	require.Empty(t, tail(), "1 was skipped before 2, delivered, although 2's row is gone")

	skip("p-3", 3)
	skip("p-4", 4)
	require.Equal(t, []int64{3, 4}, tail())
	require.NoError(t, st.EventDelivered(ctx, "p-5", "p", 5, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	require.Empty(t, tail())
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
	got, err = st.EventsStuckHeadsClaim(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"q1-1"}, ids(got))
	require.NoError(t, st.CorrelationSweepDeferred(ctx, "q1"))
	leaseUp()
	got, err = st.EventsStuckHeadsClaim(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"q2-1"}, ids(got))
}
