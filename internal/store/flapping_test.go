package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestAHalfOpenCircuitClosesAtKAnswersInARow: an answer to a probe makes
// the circuit half-open (due at once, nothing published); a failure then
// opens it again with the backoff doubled and failing_since kept; K
// answers in a row close it.
func TestAHalfOpenCircuitClosesAtKAnswersInARow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	three := store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Hour}
	openCircuit(t, st, "ep")
	first, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)

	tr, err := st.CircuitSucceeded(ctx, "ep", false, 3)
	require.NoError(t, err)
	require.False(t, tr.Closed)
	require.Equal(t, store.CircuitHalfOpen, tr.Circuit.State)
	p, err := st.CircuitProbeClaim(ctx, "ep", "next", time.Minute, false)
	require.NoError(t, err)
	require.True(t, p.Claimed, "a half-open circuit's next probe is due at once")
	p, err = st.CircuitProbeClaim(ctx, "ep", "beside", time.Minute, false)
	require.NoError(t, err)
	require.False(t, p.Claimed, "one probe at a time")
	require.True(t, p.Open)

	tr, err = st.CircuitFailed(ctx, "ep", "next", three)
	require.NoError(t, err)
	require.Equal(t, store.CircuitOpen, tr.Circuit.State)
	require.Equal(t, 2*store.ProbeBackoffInitial, tr.Circuit.ProbeBackoff)
	require.Equal(t, first.FailingSince.UTC(), tr.Circuit.FailingSince.UTC(), "the outage goes on")

	for i := range 3 {
		tr, err = st.CircuitSucceeded(ctx, "ep", false, 3)
		require.NoError(t, err)
		require.Equal(t, i == 2, tr.Closed, "answer %d", i+1)
	}
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed}, opEvents(t, st, "ep"))
}

// TestAReopeningSoonAfterACloseKeepsTheOutage: a circuit that opens again
// within FlapReopenMultiple times the backoff it closed with is the same
// outage: failing_since is the first failure of the outage the close
// ended (so disable_after trips), and the backoff goes on doubling. The
// reopening publishes no event within CircuitEventEvery of the close, and
// the catch-up publishes the state once the interval is over.
func TestAReopeningSoonAfterACloseKeepsTheOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	st3 := store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Minute}
	openCircuit(t, st, "ep")
	// The outage began two minutes ago, its probes had backed off to 20 s.
	_, err := st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET failing_since = now() - interval '2 minutes', probe_backoff_ms = 20000 WHERE endpoint_id = 'ep'`)
	require.NoError(t, err)
	tr, err := st.CircuitSucceeded(ctx, "ep", false, 1)
	require.NoError(t, err)
	require.True(t, tr.Closed)
	require.Nil(t, tr.Circuit.FailingSince)

	for i := range 3 {
		tr, err = st.CircuitFailed(ctx, "ep", "f", st3)
		require.NoError(t, err)
		require.Equal(t, i == 2, tr.Opened)
	}
	require.Equal(t, 40*time.Second, tr.Circuit.ProbeBackoff, "the backoff doubles on from the outage's")
	require.True(t, tr.Disabled, "failing since the outage's first failure, longer than disable_after")
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed, contract.OpEndpointDisabled}, opEvents(t, st, "ep"),
		"the reopening within the interval of the close publishes nothing")

	n, err := st.CircuitsEventCatchUp(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "not before the interval is over")
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET event_at = now() - interval '2 minutes' WHERE endpoint_id = 'ep'`)
	require.NoError(t, err)
	n, err = st.CircuitsEventCatchUp(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed, contract.OpEndpointDisabled, contract.OpCircuitOpened}, opEvents(t, st, "ep"),
		"the subscribers are told it is open again")
	n, err = st.CircuitsEventCatchUp(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "once")

	// A reopening long after the close is an outage of its own.
	openCircuit(t, st, "a")
	_, err = st.CircuitSucceeded(ctx, "a", false, 1)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET closed_at = now() - interval '1 minute' WHERE endpoint_id = 'a'`)
	require.NoError(t, err)
	openCircuit(t, st, "a")
	c, err := st.CircuitGet(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, store.ProbeBackoffInitial, c.ProbeBackoff)
	require.WithinDuration(t, c.Now, *c.FailingSince, 10*time.Second)
}

// TestAutoReplaySelectsOnTheDatabasesClock: a worker
// whose clock is an hour behind the database's writes a dead letter of an
// outage; the auto-replay, which selects from the circuit's failing_since
// (the database's clock), still finds it, since dead_lettered_at is the
// database's too.
func TestAutoReplaySelectsOnTheDatabasesClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openCircuit(t, st, "ep")
	insertRouted(t, st, "e1", "c1", 1, "ep")
	dl := deadLetter("e1", "ep", "c1", 1)
	dl.Reason = contract.CircuitOpenReason
	dl.DeadLetteredAt = time.Now().Add(-time.Hour) // the worker's clock
	_, err := st.DeadLetterUpsert(ctx, dl, "w/1")
	require.NoError(t, err)
	tr, err := st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	require.True(t, tr.Closed)

	pending, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	since := pending[0].Since
	page, err := st.DeadLetterReplayPage(ctx, store.DeadLetterFilter{EndpointID: "ep", Status: store.DeadLetterOpen, Since: &since, Limit: 10}, nil)
	require.NoError(t, err)
	require.Len(t, page, 1, "the outage's dead letter is selected")
	require.False(t, page[0].DeadLetteredAt.Before(since), "stamped by the database")
}

// TestTheWakeAndTheAutoReplayTakeTurns: an endpoint a pass served part
// way goes behind the others, and its wake goes on where it got to, until
// a new close starts it over.
func TestTheWakeAndTheAutoReplayTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, ep := range []string{"a", "b"} {
		openAndClose(t, st, ep)
	}
	wakes, err := st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, []string{wakes[0].EndpointID, wakes[1].EndpointID})
	require.Empty(t, wakes[0].After)
	require.NoError(t, st.CircuitWakeProgress(ctx, wakes[0], "evt_9"))
	wakes, err = st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, []string{wakes[0].EndpointID, wakes[1].EndpointID}, "a goes behind b")
	require.Equal(t, "evt_9", wakes[1].After, "and goes on where it got to")

	openAndClose(t, st, "a")
	wakes, err = st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	for _, w := range wakes {
		if w.EndpointID == "a" {
			require.Empty(t, w.After, "a new close wakes every lane again")
		}
	}

	pending, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	turned := pending[0].EndpointID
	require.NoError(t, st.CircuitAutoReplayTurn(ctx, turned))
	pending, err = st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, turned, pending[1].EndpointID, "the endpoint served part way goes behind")
}

// TestEnablingClosesAHalfOpenCircuitAsAProbeWould: an operator enabling
// an endpoint whose circuit is half-open closes it as an open one: it
// publishes circuit_closed, schedules the outage's auto-replay and asks to
// wake the lanes. Before, only an open circuit did; a half-open one was
// reset closed silently, its lanes left to their timers.
func TestEnablingClosesAHalfOpenCircuitAsAProbeWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openCircuit(t, st, "ep")
	tr, err := st.CircuitSucceeded(ctx, "ep", true, 3)
	require.NoError(t, err)
	require.Equal(t, store.CircuitHalfOpen, tr.Circuit.State)
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET wake_requested_at = NULL WHERE endpoint_id = 'ep'`)
	require.NoError(t, err)

	require.NoError(t, st.CircuitReset(ctx, "ep", true))
	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed}, opEvents(t, st, "ep"))
	pending := autoReplaysPending(t, st)
	require.Len(t, pending, 1)
	require.NotNil(t, pending[0].Requested, "the close asked for the auto-replay")
	wakes, err := st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, wakes, 1, "and to wake the lanes")
}

// TestAnAutoReplayWaitsOutAReopening: a circuit that opens again before
// the passes of its auto-replay are done is not served while open (each
// replay would be dead-lettered again, and picked again); its auto-replay
// is kept, and served after the next close, which asks for it anew (a
// pass that read the earlier request cannot clear it).
func TestAnAutoReplayWaitsOutAReopening(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openCircuit(t, st, "ep")
	_, err := st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	first := autoReplaysPending(t, st)
	require.Len(t, first, 1)
	require.NoError(t, st.CircuitAutoReplayTurn(ctx, "ep"), "a pass served it part way")

	openCircuit(t, st, "ep")
	pending := autoReplaysPending(t, st)
	require.Empty(t, pending, "not while the circuit is open again")
	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.NotNil(t, c.AutoReplayPendingSince, "kept")

	_, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	pending = autoReplaysPending(t, st)
	require.Len(t, pending, 1, "served after the next close")
	require.Equal(t, first[0].Since, pending[0].Since, "from the outage's first failure")
	require.True(t, pending[0].Requested.After(*first[0].Requested), "the close asked for it again")
	require.NoError(t, st.CircuitAutoReplayDone(ctx, first[0]))
	pending = autoReplaysPending(t, st)
	require.Len(t, pending, 1, "the earlier request's pass does not clear it")
}

// TestCaughtUpEventsTellWhatTheirTransitionWould: a circuit_opened
// published late names the endpoint's failure_threshold, not the
// default; a circuit_closed published late names the outage's opened_at;
// and a notice the ledger refuses is dropped and reported, holding up
// neither its endpoint nor the next one.
func TestCaughtUpEventsTellWhatTheirTransitionWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.Pool().Exec(ctx, `UPDATE endpoints SET circuit_failure_threshold = 3 WHERE id IN ('a', 'b', 'c')`)
	require.NoError(t, err)
	// a: opened, closed, opened again within the interval (left out).
	reopen(t, st, "a")
	// b: opened and closed, its close left out (the ledger says so: a
	// close after an opened event is published at once).
	openCircuit(t, st, "b")
	opened, err := st.CircuitGet(ctx, "b")
	require.NoError(t, err)
	_, err = st.CircuitSucceeded(ctx, "b", false, 1)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET event_state = 'open', events_coalesced = 1 WHERE endpoint_id = 'b'`)
	require.NoError(t, err)
	// c: as a, and its events refused, first in the pass.
	reopen(t, st, "c")
	_, err = st.Pool().Exec(ctx, `CREATE FUNCTION refuse_c() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.correlation_id = 'hookflow:c' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
CREATE TRIGGER refuse_c BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_c();
UPDATE endpoint_circuits SET event_at = now() - interval '3 minutes' WHERE endpoint_id = 'c';
UPDATE endpoint_circuits SET event_at = now() - interval '2 minutes' WHERE endpoint_id IN ('a', 'b')`)
	require.NoError(t, err)
	require.Equal(t, "hookflow:c", contract.OperationalCorrelation("c"))

	var dropped []string
	reported := st.WithNotices(store.NoticeReport{Logger: slog.New(slog.DiscardHandler), Dropped: func(typ string) { dropped = append(dropped, typ) }})
	n, err := reported.CircuitsEventCatchUp(ctx, 10)
	require.NoError(t, err, "a notice the ledger refuses is dropped and reported, not retried for ever")
	require.Equal(t, 3, n, "a and b, after c's was dropped")
	require.Equal(t, []string{contract.OpCircuitOpened}, dropped, "c's, reported")
	var threshold int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (data->>'failure_threshold')::int FROM events
		WHERE correlation_id = 'hookflow:a' AND type = $1 AND data->>'trigger' = $2`, contract.OpCircuitOpened, store.TriggerCaughtUp).Scan(&threshold))
	require.Equal(t, 3, threshold, "the endpoint's")
	var openedAt *time.Time
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (data->>'opened_at')::timestamptz FROM events
		WHERE correlation_id = 'hookflow:b' AND type = $1 ORDER BY sequence DESC LIMIT 1`, contract.OpCircuitClosed).Scan(&openedAt))
	require.NotNil(t, openedAt, "the late close names the outage's opening")
	require.WithinDuration(t, *opened.OpenedAt, *openedAt, time.Millisecond)
}

// autoReplaysPending is st's pending auto-replays, as a pass reads them.
func autoReplaysPending(t *testing.T, st *store.Store) []store.AutoReplayPending {
	t.Helper()
	pending, err := st.CircuitsAutoReplayPending(context.Background(), 10)
	require.NoError(t, err)
	return pending
}

// reopen opens the endpoint's circuit, closes it, and opens it again
// within CircuitEventEvery of the close: the reopening is left out.
func reopen(t *testing.T, st *store.Store, endpoint string) {
	t.Helper()
	openCircuit(t, st, endpoint)
	_, err := st.CircuitSucceeded(context.Background(), endpoint, false, 1)
	require.NoError(t, err)
	openCircuit(t, st, endpoint)
}
