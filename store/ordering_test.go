package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/store"
)

// TestLedgerOrdering: Claim releases exactly the correlation's next event,
// EventFinish moves the cursor to its successor, and EventSuccessor names a
// successor only while it still waits.
func TestLedgerOrdering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	claim := func(id string, seq int64) store.Claim {
		t.Helper()
		c, err := st.CorrelationClaim(ctx, "c", seq, id)
		require.NoError(t, err)
		return c
	}
	successor := func(seq int64) string {
		t.Helper()
		e, err := st.EventSuccessor(ctx, "c", seq)
		require.NoError(t, err)
		if e == nil {
			return ""
		}
		return e.ID
	}

	e1, e2, e3 := insertEvent(t, st, "c-1", "c", 1), insertEvent(t, st, "c-2", "c", 2), insertEvent(t, st, "c-3", "c", 3)
	for _, e := range []store.Event{e1, e2, e3} {
		require.Equal(t, store.ProtocolLedger, e.Protocol, "a new correlation is ordered by the ledger")
		require.NoError(t, st.EventMarkStarted(ctx, e.ID))
	}
	require.Equal(t, store.Claim{Next: 1, State: store.StateWaiting, Skipped: []int64{}}, claim("c-1", 1))
	require.Equal(t, int64(1), claim("c-2", 2).Next, "2 waits for 1")
	require.Nil(t, claim("c-2", 2).Skipped)
	require.Equal(t, "c-2", successor(1))

	_, _, err := st.EventStartAttempt(ctx, "c-1", "ep")
	require.NoError(t, err)
	require.NoError(t, st.EventFinish(ctx, "c-1", "c", 1, store.StateDelivered, time.Now()))
	require.NoError(t, st.EventFinish(ctx, "c-1", "c", 1, store.StateDelivered, time.Now()), "repeating it is harmless")
	require.Equal(t, store.Claim{Next: 2, State: store.StateWaiting, Skipped: []int64{}}, claim("c-2", 2), "1 delivered releases 2")
	require.Equal(t, store.Claim{Next: 2, State: store.StateDelivered}, claim("c-1", 1), "1 is finished")

	// 2 is skipped: 3 is released with 2 named in its envelope.
	_, _, err = st.EventStartAttempt(ctx, "c-2", "ep")
	require.NoError(t, err)
	require.Equal(t, "", successor(1), "a released event is not signalled again")
	require.NoError(t, st.EventFinish(ctx, "c-2", "c", 2, store.StateSkipped, time.Now()))
	require.Equal(t, "c-3", successor(2))
	require.Equal(t, store.Claim{Next: 3, State: store.StateWaiting, Skipped: []int64{2}}, claim("c-3", 3))
	require.Equal(t, "", successor(3), "no event 4 yet")

	_, err = st.CorrelationClaim(ctx, "c", 9, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestEventProtocolChoice: while a correlation has an unfinished event of
// the sequencer protocol (stored before migration 003), its new events are
// ordered by the sequencer too; once none is left, by the ledger. Concurrent
// inserts never mix the two.
func TestEventProtocolChoice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	pool := st.Pool()
	// An event an older API stored: the column's default.
	_, err := pool.Exec(ctx, `INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash) VALUES ('old-1', 'old', 1, 'ep', 't', '{}', '\x01')`)
	require.NoError(t, err)

	require.Equal(t, store.ProtocolSequencer, insertEvent(t, st, "old-2", "old", 2).Protocol, "an unfinished sequencer event keeps its correlation on the sequencer")
	require.Equal(t, store.ProtocolLedger, insertEvent(t, st, "new-1", "new", 1).Protocol, "other correlations are not affected")

	require.NoError(t, st.EventFinish(ctx, "old-1", "old", 1, store.StateDelivered, time.Now()))
	require.Equal(t, store.ProtocolSequencer, insertEvent(t, st, "old-3", "old", 3).Protocol, "old-2 is still unfinished")
	require.NoError(t, st.EventFinish(ctx, "old-2", "old", 2, store.StateDelivered, time.Now()))

	// old-3 is the last unfinished sequencer event: racing inserts while it
	// finishes either all see it (sequencer) or some see it finished
	// (ledger), but a ledger event never coexists with an unfinished
	// sequencer one.
	var wg sync.WaitGroup
	got := make([]store.Event, 20)
	errs := make([]error, len(got))
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, ok, err := st.EventInsert(ctx, store.Event{ID: fmt.Sprintf("old-%d", 4+i), CorrelationID: "old", Sequence: int64(4 + i), EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}})
			if err == nil && !ok {
				err = fmt.Errorf("event %d not inserted", 4+i)
			}
			got[i], errs[i] = e, err
		}()
		if i == 10 {
			require.NoError(t, st.EventFinish(ctx, "old-3", "old", 3, store.StateDelivered, time.Now()))
		}
	}
	wg.Wait()
	sequencer := 0
	for i, e := range got {
		require.NoError(t, errs[i])
		if e.Protocol == store.ProtocolSequencer {
			sequencer++
		}
	}
	if sequencer > 0 {
		// Some were stored while old-3 was unfinished: then every one stored
		// after them is a sequencer event too, since they are unfinished.
		require.Equal(t, len(got), sequencer, "a correlation never mixes the two protocols")
	}
	require.Equal(t, store.ProtocolLedger, insertEvent(t, st, "after", "fresh", 1).Protocol)
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	_, err = st.EndpointInsert(context.Background(), "ep", "https://example.com/hook", "whsec_x")
	require.NoError(t, err)
	return st
}

// insertEvent stores id as sequence seq of corr, for endpoint "ep".
func insertEvent(t *testing.T, st *store.Store, id, corr string, seq int64) store.Event {
	t.Helper()
	e, ok, err := st.EventInsert(context.Background(), store.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}})
	require.NoError(t, err)
	require.True(t, ok)
	return e
}

// TestDeliveredHandOffAndMissedRelease: a delivered attempt is recorded, the
// event marked and its correlation advanced in one call that names the
// waiting successor; a successor left waiting past the age is listed for the
// sweep until it starts its attempt.
func TestDeliveredHandOffAndMissedRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for seq := int64(1); seq <= 2; seq++ {
		insertEvent(t, st, fmt.Sprintf("m-%d", seq), "m", seq)
		require.NoError(t, st.EventMarkStarted(ctx, fmt.Sprintf("m-%d", seq)))
	}
	ep, _, err := st.EventStartAttempt(ctx, "m-1", "ep")
	require.NoError(t, err)
	require.Equal(t, "ep", ep.ID)
	_, _, err = st.EventStartAttempt(ctx, "m-1", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	e, err := st.EventGet(ctx, "m-1")
	require.NoError(t, err)
	require.Equal(t, store.StateDelivering, e.State)

	code := int32(200)
	at := time.Now()
	next, err := st.EventDelivered(ctx, "m-1", "m", 1, store.Attempt{Attempt: 1, StartedAt: at, LatencyMS: 3, StatusCode: &code, Outcome: "delivered"}, at, true)
	require.NoError(t, err)
	require.NotNil(t, next)
	require.Equal(t, "m-2", next.ID)
	require.Equal(t, int64(2), next.Sequence)
	e, err = st.EventGet(ctx, "m-1")
	require.NoError(t, err)
	require.Equal(t, store.StateDelivered, e.State)
	attempts, err := st.AttemptsList(ctx, "m-1")
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	_, state, err := st.EventStartAttempt(ctx, "m-1", "ep")
	require.NoError(t, err)
	require.Equal(t, store.StateDelivered, state, "a repeated attempt learns it was delivered")
	e, err = st.EventGet(ctx, "m-1")
	require.NoError(t, err)
	require.Equal(t, store.StateDelivered, e.State, "and does not undo it")
	n, err := st.CorrelationNext(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	missed, err := st.EventsMissedRelease(ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Empty(t, missed, "released a moment ago: its signal is on the way")
	missed, err = st.EventsMissedRelease(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, missed, 1)
	require.Equal(t, "m-2", missed[0].ID)
	require.Equal(t, store.ProtocolLedger, missed[0].Protocol)
	_, _, err = st.EventStartAttempt(ctx, "m-2", "ep")
	require.NoError(t, err)
	missed, err = st.EventsMissedRelease(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, missed, "an event that started its attempt got its release")
}

// TestDeliveredWaitsForAConcurrentInsert: a delivered attempt's transaction
// takes the correlation's lock before it moves the cursor and looks for the
// successor, so a successor being stored at that moment (whose API reads
// the cursor only after its commit) is found once it commits, not missed by
// both sides.
func TestDeliveredWaitsForAConcurrentInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "r-1", "r", 1)

	// The insert of 2, as EventInsert runs it, held open.
	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('hookflow.correlation:' || $1, 0))`, "r")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash, protocol) VALUES ('r-2', 'r', 2, 'ep', 't', '{}', '\x01', 2)`)
	require.NoError(t, err)

	type result struct {
		next *store.Event
		err  error
	}
	done := make(chan result, 1)
	go func() {
		at := time.Now()
		next, err := st.EventDelivered(ctx, "r-1", "r", 1, store.Attempt{Attempt: 1, StartedAt: at, Outcome: "delivered"}, at, true)
		done <- result{next, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("delivered did not wait for the insert in flight: next=%v err=%v", r.next, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.NotNil(t, r.next, "the successor committed meanwhile is found")
	require.Equal(t, "r-2", r.next.ID)
}

// TestStartAttemptOnADisabledEndpoint: the attempt reads the endpoint but
// leaves the event's state alone; Deliver then records the refusal.
func TestStartAttemptOnADisabledEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	insertEvent(t, st, "d-1", "d", 1)
	require.NoError(t, st.EventMarkStarted(ctx, "d-1"))
	require.NoError(t, st.EndpointDisable(ctx, "ep", "test"))
	ep, _, err := st.EventStartAttempt(ctx, "d-1", "ep")
	require.NoError(t, err)
	require.True(t, ep.Disabled)
	e, err := st.EventGet(ctx, "d-1")
	require.NoError(t, err)
	require.Equal(t, store.StateWaiting, e.State)
	require.Nil(t, e.ReleasedAt)
}
