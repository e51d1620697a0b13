package store_test

import (
	"context"
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

// TestAutoReplaySelectsOnTheDatabasesClock (issue 33 item 9): a worker
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
