package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// The auto-replay of an outage's dead letters, whatever the order of the
// circuit's close, a reopening and an operator's enabling, decided on the
// database's clock alone.

// autoReplayBundle is an endpoint "ep" with auto_replay whose circuit
// opened and closed once, its close's pass done, with the deliveries to it
// of events inFlight (each its correlation's first) attempted during the
// outage and not finished.
func autoReplayBundle(t *testing.T, inFlight ...string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.Pool().Exec(ctx, `UPDATE endpoints SET auto_replay = true WHERE id = 'ep'`)
	require.NoError(t, err)
	openCircuit(t, st, "ep")
	for _, id := range inFlight {
		insertEvent(t, st, id, "corr-"+id, 1)
		firstAttempt(t, st, id)
	}
	_, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	passDone(t, st)
	return st
}

// passDone carries out the pending auto-replays as far as the ledger is
// concerned: read, then cleared.
func passDone(t *testing.T, st *store.Store) {
	t.Helper()
	for _, p := range autoReplaysPending(t, st) {
		require.NoError(t, st.CircuitAutoReplayDone(context.Background(), p))
	}
	require.Empty(t, autoReplaysPending(t, st))
}

// firstAttempt makes the first attempt of event id's delivery to "ep":
// the ledger marks it delivering, on its own clock.
func firstAttempt(t *testing.T, st *store.Store, id string) {
	t.Helper()
	_, err := st.DeliveryStartAttempt(context.Background(), id, "ep")
	require.NoError(t, err)
}

// outageDeadLetter dead-letters id's delivery to "ep" with reason, its
// window's start as the workflow has it (Temporal's clock) windowStart.
func outageDeadLetter(t *testing.T, st *store.Store, id, reason string, windowStart time.Time) {
	t.Helper()
	dl := deadLetter(id, "ep", "corr-"+id, 1)
	dl.Reason, dl.WindowStart = reason, windowStart
	_, err := st.DeadLetterUpsert(context.Background(), dl, "w/"+id)
	require.NoError(t, err)
}

// failedWhileClosed dead-letters a new event id whose delivery to "ep" is
// first attempted now, its window spent on retryable failures.
func failedWhileClosed(t *testing.T, st *store.Store, id string) {
	t.Helper()
	insertEvent(t, st, id, "corr-"+id, 1)
	firstAttempt(t, st, id)
	outageDeadLetter(t, st, id, contract.WindowSpentPrefix+"; last attempt: 503", time.Now())
}

// autoReplayed answers the dead letters the pending auto-replay of "ep"
// would replay, as the starter selects them: open, since its start, the
// outage's reasons.
func autoReplayed(t *testing.T, st *store.Store) []string {
	t.Helper()
	var ids []string
	for _, p := range autoReplaysPending(t, st) {
		since := p.Since
		page, err := st.DeadLetterReplayPage(context.Background(), store.DeadLetterFilter{EndpointID: p.EndpointID, Status: store.DeadLetterOpen, Since: &since, Limit: 100}, nil)
		require.NoError(t, err)
		for _, d := range page {
			if contract.OutageCaused(d.Reason) {
				ids = append(ids, d.EventID)
			}
		}
	}
	return ids
}

// backdateClose moves the circuit's last close back by d, as if it had
// been that long ago.
func backdateClose(t *testing.T, st *store.Store, d time.Duration) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), `UPDATE endpoint_circuits SET closed_at = closed_at - make_interval(secs => $1) WHERE endpoint_id = 'ep'`, d.Seconds())
	require.NoError(t, err)
}

// TestALateDeadLetterWithNoReopeningIsAutoReplayed: a delivery attempted
// during the outage waits out the close (throttled by the endpoint's rate
// limit, which moves its window's start on) and is dead-lettered after the
// close's pass was done; the circuit never opens again. Its dead letter asks
// for a pass of its own: its delivery was in flight at the close, by the
// database's clock. Before, the window's start on Temporal's clock, moved
// past the close by the throttled wait, made it another failure's, and
// left it to an operator.
func TestALateDeadLetterWithNoReopeningIsAutoReplayed(t *testing.T) {
	t.Parallel()
	st := autoReplayBundle(t, "late")
	throttled := 2 * time.Minute
	outageDeadLetter(t, st, "late", contract.CircuitOpenReason, time.Now().Add(throttled))
	require.Equal(t, []string{"late"}, autoReplayed(t, st), "the outage's dead letter, written after its close, is auto-replayed")
}

// TestADeadLetterBeforeALateReopeningIsAutoReplayedAtTheNextClose: after a
// close, a delivery fails its whole window with the circuit closed and is
// dead-lettered; the circuit opens again later than FlapReopenMultiple
// backoffs after the close (a new outage, with its own failing_since) and
// closes. That close replays from the replay point before it (the previous
// close), not from its own outage's first failure, so the dead letter
// between the two outages is replayed.
func TestADeadLetterBeforeALateReopeningIsAutoReplayedAtTheNextClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := autoReplayBundle(t)
	failedWhileClosed(t, st, "between")
	require.Empty(t, autoReplaysPending(t, st), "a window that began after the close waits for the next close")

	backdateClose(t, st, reopenLater)
	openCircuit(t, st, "ep")
	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	dl, err := st.DeadLetterGet(ctx, "between", "ep")
	require.NoError(t, err)
	require.True(t, c.FailingSince.After(dl.DeadLetteredAt), "a new outage, after the dead letter")
	_, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"between"}, autoReplayed(t, st))
}

// reopenLater is longer than FlapReopenMultiple times any backoff a
// close keeps: an opening that long after a close is a new outage.
const reopenLater = store.FlapReopenMultiple*store.ProbeBackoffMax + time.Minute

// TestAnEnablingTakesTheDeadLettersSinceTheLastClose: after a close, one
// delivery that was in flight at it and another handed out after it are
// dead-lettered while the endpoint is disabled (no pass is asked for a
// disabled endpoint). The operator enables it: its circuit is closed, and
// the enabling schedules the outages' dead letters written since the last
// close. A reopening soon after, which the enabling made a new outage, and
// its close still take them if the pass has not run.
func TestAnEnablingTakesTheDeadLettersSinceTheLastClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := autoReplayBundle(t, "held")
	insertEvent(t, st, "between", "corr-between", 1)
	firstAttempt(t, st, "between")
	_, err := st.Pool().Exec(ctx, `UPDATE endpoints SET disabled = true WHERE id = 'ep'`)
	require.NoError(t, err)
	outageDeadLetter(t, st, "held", contract.CircuitOpenReason, time.Now())
	outageDeadLetter(t, st, "between", contract.WindowSpentPrefix+"; last attempt: 503", time.Now())
	require.Empty(t, autoReplaysPending(t, st), "nothing is replayed to a disabled endpoint")

	_, err = st.Pool().Exec(ctx, `UPDATE endpoints SET disabled = false WHERE id = 'ep'`)
	require.NoError(t, err)
	require.NoError(t, st.CircuitReset(ctx, "ep", true))
	require.ElementsMatch(t, []string{"held", "between"}, autoReplayed(t, st), "the enabling takes them")

	openCircuit(t, st, "ep")
	_, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"held", "between"}, autoReplayed(t, st), "and the next close keeps them")
}

// TestAnEnablingWithoutAutoReplayHandsTheDeadLettersToTheOperator: an
// endpoint enabled without auto_replay schedules nothing, and its
// enabling is the replay point of the next close: what was written before
// it was the operator's.
func TestAnEnablingWithoutAutoReplayHandsTheDeadLettersToTheOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := autoReplayBundle(t)
	failedWhileClosed(t, st, "between")
	require.NoError(t, st.CircuitReset(ctx, "ep", false))
	require.Empty(t, autoReplaysPending(t, st))

	openCircuit(t, st, "ep")
	_, err := st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	require.Empty(t, autoReplayed(t, st))
}
