package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// operators adds endpoints subscribed to hookflow's events: "op1"
// (hookflow.*), "op2" (hookflow.dead_letter.*, disabled), "op3" (exactly
// hookflow.dead_letter.created) and "star" ("*", which takes every
// producer's type but never asked for hookflow's).
func operators(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	for id, types := range map[string][]string{"op1": {"hookflow.*"}, "op2": {"hookflow.dead_letter.*"}, "op3": {contract.OpDeadLetterCreated}, "star": {"*"}} {
		_, err := st.EndpointInsert(ctx, id, "https://example.com/"+id, "whsec_x", types)
		require.NoError(t, err)
	}
	disabled := true
	_, err := st.EndpointUpdate(ctx, "op2", store.EndpointChange{Disabled: &disabled})
	require.NoError(t, err)
}

// TestOperationalEventRouting: an operational event about an endpoint is
// sequence 1, 2, … of the endpoint's correlation, with a deterministic id,
// and goes to the endpoints subscribed to hookflow's types by a pattern of
// their own, a disabled one included (paused: it waits in its lanes): never
// to the endpoint it is about, or to one that takes every type.
func TestOperationalEventRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	operators(t, st)

	id, err := st.OperationalEventInsert(ctx, nil, "a", contract.OpDeadLetterCreated, map[string]any{"event_id": "x-1", "sequence": 3})
	require.NoError(t, err)
	require.Equal(t, "hookflow-a-1", id)
	ev, err := st.EventGet(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "hookflow:a", ev.CorrelationID)
	require.EqualValues(t, 1, ev.Sequence)
	require.Equal(t, contract.OpDeadLetterCreated, ev.Type)
	require.Equal(t, contract.StateQueued, ev.State, "queued: the queued sweep starts it")
	require.Equal(t, []string{"op1", "op2", "op3"}, ev.Endpoints, "op2 though disabled; not a (the subject), star (every type), ep/b/c (every type)")
	var data map[string]any
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	require.Equal(t, map[string]any{"endpoint_id": "a", "event_id": "x-1", "sequence": 3.0}, data)

	id, err = st.OperationalEventInsert(ctx, nil, "op1", contract.OpCircuitOpened, nil)
	require.NoError(t, err)
	ev, err = st.EventGet(ctx, id)
	require.NoError(t, err)
	require.Nil(t, ev.Endpoints, "op1 is the only subscriber to endpoint events, and the event is about op1 itself")
	require.EqualValues(t, 1, ev.Sequence, "op1's own correlation")
	require.NoError(t, st.EventMarkStarted(ctx, id, ""))
	require.Equal(t, contract.StateDelivered, stateOf(t, st, id), "routed to nobody: delivered once started")
	require.EqualValues(t, 2, cursor(t, st, "hookflow:op1"), "and its place in the correlation is taken")

	id, err = st.OperationalEventInsert(ctx, nil, "a", contract.OpCircuitOpened, nil)
	require.NoError(t, err)
	require.Equal(t, "hookflow-a-2", id)
	ev, err = st.EventGet(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []string{"op1"}, ev.Endpoints)

	_, err = st.OperationalEventInsert(ctx, nil, "a", "order.created", nil)
	require.Error(t, err, "only hookflow's types")
	_, err = st.OperationalEventInsert(ctx, nil, "nobody", contract.OpCircuitOpened, nil)
	require.Error(t, err, "about an endpoint that exists")
}

// TestOperationalSequencesContiguous: concurrent publishers about one
// endpoint, some of whose transactions roll back, leave sequences 1..n with
// no gap and no repeat; the events of the rolled-back transactions are
// gone with them.
func TestOperationalSequencesContiguous(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	operators(t, st)
	const publishers = 20
	errRollback := errors.New("the caller's change failed")
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for i := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
				if _, err := st.OperationalEventInsert(ctx, tx, "b", contract.OpDeadLetterCreated, map[string]any{"n": i}); err != nil {
					return err
				}
				if i%3 == 0 {
					return errRollback
				}
				return nil
			})
			if errors.Is(err, errRollback) {
				err = nil
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	committed := publishers - (publishers+2)/3
	var seqs []int64
	rows, err := st.Pool().Query(ctx, "SELECT sequence FROM events WHERE correlation_id = 'hookflow:b' ORDER BY sequence")
	require.NoError(t, err)
	seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	want := make([]int64, committed)
	for i := range want {
		want[i] = int64(i + 1)
		_, err := st.EventGet(ctx, fmt.Sprintf("hookflow-b-%d", i+1))
		require.NoError(t, err)
	}
	require.Equal(t, want, seqs, "1..%d, no gap where a transaction rolled back", committed)
}

// TestDeadLetterPublishesOncePerGeneration: writing a dead letter stores
// its hookflow.dead_letter.created event about the endpoint in the same
// transaction, once per generation: the retried write of a window publishes
// nothing more. A dead letter of an operational event publishes none.
func TestDeadLetterPublishesOncePerGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	operators(t, st)
	insertRouted(t, st, "o-1", "o", 1, "a")
	dl := deadLetter("o-1", "a", "o", 1)
	dl.Reason = "permanent rejection: 400"
	for _, window := range []string{"run/1", "run/1", "run/2", "run/2"} {
		_, err := st.DeadLetterUpsert(ctx, dl, window)
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, "SELECT count(*) FROM events WHERE correlation_id = 'hookflow:a'").Scan(&n))
	require.Equal(t, 2, n, "one event per generation, none for the retried writes")
	for gen := int64(1); gen <= 2; gen++ {
		ev, err := st.EventGet(ctx, fmt.Sprintf("hookflow-a-%d", gen))
		require.NoError(t, err)
		require.Equal(t, contract.OpDeadLetterCreated, ev.Type)
		require.Equal(t, gen, ev.Sequence)
		require.Equal(t, []string{"op1", "op2", "op3"}, ev.Endpoints, "op2 though disabled: paused, it waits in its lanes")
		var data map[string]any
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		require.Equal(t, "a", data["endpoint_id"])
		require.Equal(t, "o-1", data["event_id"])
		require.Equal(t, "o", data["correlation_id"])
		require.Equal(t, 1.0, data["sequence"])
		require.Equal(t, float64(gen), data["generation"])
		require.Equal(t, "permanent rejection: 400", data["reason"])
		require.Equal(t, "t", data["event_type"])
	}

	// op1 fails to take hookflow-a-1: its dead letter tells nobody.
	opDL := deadLetter("hookflow-a-1", "op1", "hookflow:a", 1)
	_, err := st.DeadLetterUpsert(ctx, opDL, "run/1")
	require.NoError(t, err)
	require.NoError(t, st.Pool().QueryRow(ctx, "SELECT count(*) FROM events WHERE correlation_id = 'hookflow:op1'").Scan(&n))
	require.Zero(t, n, "no operational event about an operational event's dead letter")
}

// TestOperationalCollisionNeverRollsBack: whatever the operational
// correlation holds, a dead letter's write and a breaker's open commit
// with their events. Sequences stored there by other means (no producer
// can: kit/intake refuses "hookflow:" in any case) are passed over, and an
// event the ledger refuses all the same (its id stored by hand under
// another correlation) is dropped with its number, leaving no gap.
func TestOperationalCollisionNeverRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	operators(t, st)
	// Sequences 1 and 2 of a's operational correlation, taken.
	insertRouted(t, st, "planted-1", contract.OperationalCorrelation("a"), 1)
	insertRouted(t, st, "planted-2", contract.OperationalCorrelation("a"), 2)
	insertRouted(t, st, "o-1", "o", 1, "a")
	dl := deadLetter("o-1", "a", "o", 1)
	dl.Reason = "permanent rejection: 400"
	_, err := st.DeadLetterUpsert(ctx, dl, "run/1")
	require.NoError(t, err, "the dead letter is written")
	got, err := st.DeadLetterGet(ctx, "o-1", "a")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterOpen, got.Status)
	ev, err := st.EventGet(ctx, "hookflow-a-3")
	require.NoError(t, err, "its event took the next free sequence")
	require.EqualValues(t, 3, ev.Sequence)

	// hookflow-a-4 stored by hand under another correlation: the breaker
	// opens all the same, its event dropped, and the next event takes 4.
	insertRouted(t, st, "hookflow-a-4", "elsewhere", 1)
	openCircuit(t, st, "a")
	c, err := st.CircuitGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, store.CircuitOpen, c.State, "the breaker opened")
	_, err = st.Pool().Exec(ctx, "DELETE FROM events WHERE id = 'hookflow-a-4'")
	require.NoError(t, err)
	id, err := st.OperationalEventInsert(ctx, nil, "a", contract.OpEndpointDisabled, nil)
	require.NoError(t, err)
	require.Equal(t, "hookflow-a-4", id, "the dropped event left no gap")
}
