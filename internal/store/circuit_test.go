package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// opEvents returns the types of the operational events about endpoint, in
// sequence order.
func opEvents(t *testing.T, st *store.Store, endpoint string) []string {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT type FROM events WHERE correlation_id = $1 ORDER BY sequence`, contract.OperationalCorrelation(endpoint))
	require.NoError(t, err)
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return types
}

// openCircuit fails endpoint three times at a threshold of 3: its circuit
// opens.
func openCircuit(t *testing.T, st *store.Store, endpoint string) {
	t.Helper()
	for i := range 3 {
		_, err := st.CircuitFailed(context.Background(), endpoint, fmt.Sprint("f", i), store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Hour})
		require.NoError(t, err)
	}
}

// makeProbeDue moves the endpoint's next probe to the past, as if its
// backoff had run out.
func makeProbeDue(t *testing.T, st *store.Store, endpointID string) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), `UPDATE endpoint_circuits SET next_probe_at = now() - interval '1 second' WHERE endpoint_id = $1`, endpointID)
	require.NoError(t, err)
}

// TestAReplaysAttemptProbesAnOpenCircuitAtOnce: an operator replays when
// the receiver is back, so a replay's attempt claims the probe of an open
// circuit without waiting for the backoff the outage left, but never beside
// another probe; and an attempt holding the lease (throttled after its
// claim) claims it again.
func TestAReplaysAttemptProbesAnOpenCircuitAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openCircuit(t, st, "ep")

	p, err := st.CircuitProbeClaim(ctx, "ep", "retry", time.Minute, false)
	require.NoError(t, err)
	require.False(t, p.Claimed, "a retry waits for the backoff")
	p, err = st.CircuitProbeClaim(ctx, "ep", "replay", time.Minute, true)
	require.NoError(t, err)
	require.True(t, p.Claimed, "a replay probes at once")
	p, err = st.CircuitProbeClaim(ctx, "ep", "replay", time.Minute, true)
	require.NoError(t, err)
	require.True(t, p.Claimed, "the lease's owner claims it again")
	p, err = st.CircuitProbeClaim(ctx, "ep", "another-replay", time.Minute, true)
	require.NoError(t, err)
	require.False(t, p.Claimed, "one probe at a time, replays too")
	require.True(t, p.Open)
	require.Greater(t, p.Wait, time.Duration(0), "told to wait out the lease")
}

// TestCircuitOpensProbesOnceAndCloses: consecutive failures open the
// circuit at the threshold; of many concurrent attempts once the probe is
// due exactly one claims it; its failure opens the circuit again for twice
// the backoff; a success closes it, forgets the failures and, with
// auto_replay, schedules the outage's replay from its first failure.
func TestCircuitOpensProbesOnceAndCloses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	three := store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Hour}

	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State, "an endpoint that never failed is closed")

	for i := 1; i < 3; i++ {
		tr, err := st.CircuitFailed(ctx, "ep", fmt.Sprint("a", i), three)
		require.NoError(t, err)
		require.False(t, tr.Opened)
		require.Equal(t, i, tr.Circuit.ConsecutiveFailures)
	}
	first, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.NotNil(t, first.FailingSince)
	tr, err := st.CircuitFailed(ctx, "ep", "a3", three)
	require.NoError(t, err)
	require.True(t, tr.Opened, "the third consecutive failure opens it")
	require.Equal(t, store.TriggerConsecutiveFailures, tr.Trigger)
	require.Equal(t, store.TriggerConsecutiveFailures, circuitOpenedData(t, st, "ep")["trigger"], "and its event says so")
	require.Equal(t, store.CircuitOpen, tr.Circuit.State)
	require.Equal(t, store.ProbeBackoffInitial, tr.Circuit.ProbeBackoff)
	require.Equal(t, first.FailingSince.UTC(), tr.Circuit.FailingSince.UTC(), "failing_since is the run's first failure")

	start, err := st.DeliveryStartAttempt(ctx, "nope", "ep")
	require.NoError(t, err)
	require.True(t, start.CircuitOpen, "the attempt's start reads the circuit")

	p, err := st.CircuitProbeClaim(ctx, "ep", "early", time.Minute, false)
	require.NoError(t, err)
	require.False(t, p.Claimed, "no probe before its backoff ends")
	require.True(t, p.Open)
	require.Greater(t, p.Wait, time.Duration(0))
	require.LessOrEqual(t, p.Wait, store.ProbeBackoffInitial)

	makeProbeDue(t, st, "ep")
	const n = 20
	var wg sync.WaitGroup
	claims := make([]store.ProbeClaim, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			claims[i], errs[i] = st.CircuitProbeClaim(ctx, "ep", fmt.Sprint("p", i), time.Minute, false)
		}()
	}
	wg.Wait()
	prober := -1
	for i := range n {
		require.NoError(t, errs[i])
		if claims[i].Claimed {
			require.Equal(t, -1, prober, "one probe at a time")
			prober = i
		} else {
			require.True(t, claims[i].Open)
		}
	}
	require.NotEqual(t, -1, prober, "a due probe is claimed")

	// Another attempt failing (in flight when it opened) only counts.
	tr, err = st.CircuitFailed(ctx, "ep", "other", three)
	require.NoError(t, err)
	require.Equal(t, store.ProbeBackoffInitial, tr.Circuit.ProbeBackoff)
	require.NotNil(t, tr.Circuit.ProbeOwner, "the probe keeps its lease")

	tr, err = st.CircuitFailed(ctx, "ep", fmt.Sprint("p", prober), three)
	require.NoError(t, err)
	require.False(t, tr.Opened, "already open")
	require.Equal(t, 2*store.ProbeBackoffInitial, tr.Circuit.ProbeBackoff, "a failed probe doubles the backoff")
	require.Nil(t, tr.Circuit.ProbeOwner, "and frees the lease")
	require.Equal(t, store.CircuitOpen, tr.Circuit.State)

	makeProbeDue(t, st, "ep")
	p, err = st.CircuitProbeClaim(ctx, "ep", "p-next", time.Minute, false)
	require.NoError(t, err)
	require.True(t, p.Claimed)
	tr, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	require.True(t, tr.Closed)
	c, err = st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	require.Zero(t, c.ConsecutiveFailures)
	require.Nil(t, c.FailingSince)
	require.Nil(t, c.ProbeOwner)
	require.NotNil(t, c.AutoReplayPendingSince)
	require.Equal(t, first.FailingSince.UTC(), c.AutoReplayPendingSince.UTC(), "the replay covers the outage from its first failure")

	pending, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "ep", pending[0].EndpointID)
	require.Equal(t, c.AutoReplayPendingSince.UTC(), pending[0].Since.UTC())
	require.NotNil(t, pending[0].Requested, "the close stamps its request")
	require.NoError(t, st.CircuitAutoReplayDone(ctx, pending[0]))
	pending, err = st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, pending)

	tr, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	require.False(t, tr.Closed, "a success of a closed circuit is no transition")
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed}, opEvents(t, st, "ep"),
		"each transition publishes its event once; a re-open and a repeat none")
}

// openAndClose opens endpoint's circuit (openCircuit), then closes it
// with auto_replay.
func openAndClose(t *testing.T, st *store.Store, endpoint string) {
	t.Helper()
	openCircuit(t, st, endpoint)
	tr, err := st.CircuitSucceeded(context.Background(), endpoint, true, 1)
	require.NoError(t, err)
	require.True(t, tr.Closed)
}

// TestACloseDuringAnAutoReplayPassGetsAPassOfItsOwn: a pass reads the
// pending auto-replay (and its page of dead letters); meanwhile the
// circuit opens again, more dead letters are written, and it closes again,
// keeping the older start. The pass's done must not clear the second
// close's request, or those dead letters are never auto-replayed (found by
// the chaos run's flapping endpoint).
func TestACloseDuringAnAutoReplayPassGetsAPassOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openAndClose(t, st, "ep")
	read, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, read, 1)

	openAndClose(t, st, "ep")
	require.NoError(t, st.CircuitAutoReplayDone(ctx, read[0]))
	again, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, again, 1, "the second close still asks for its pass")
	require.Equal(t, read[0].Since.UTC(), again[0].Since.UTC(), "from the first outage on: it covers both")
	require.NoError(t, st.CircuitAutoReplayDone(ctx, again[0]))
	gone, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, gone)
}

// TestALateOutageDeadLetterIsAutoReplayed: a dead letter the outage caused
// that is written after its circuit closed and the close's pass was done
// (its window's last look came first; its write after a crash) asks for
// the auto-replay again, from itself on, when its delivery was in flight
// at the close (attempted, by the ledger's clock, before it); one whose
// delivery was first attempted after the close, or a permanent rejection,
// does not. The window's start the workflow sends (Temporal's clock) is
// not compared.
func TestALateOutageDeadLetterIsAutoReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	beforeClose := time.Now().Add(-time.Minute)
	st := autoReplayBundle(t, "rejected", "late")
	insertEvent(t, st, "after", "corr-after", 1)
	firstAttempt(t, st, "after")

	outageDeadLetter(t, st, "rejected", "permanent rejection: receiver answered 400", beforeClose)
	require.Empty(t, autoReplaysPending(t, st), "a rejection is never auto-replayed")
	outageDeadLetter(t, st, "after", contract.CircuitOpenReason, beforeClose)
	require.Empty(t, autoReplaysPending(t, st), "a delivery first attempted after the close is another failure's")
	outageDeadLetter(t, st, "late", contract.CircuitOpenReason, time.Now().Add(time.Hour))
	p := autoReplaysPending(t, st)
	require.Len(t, p, 1, "the late dead letter of the outage asks for the pass again")
	dl, err := st.DeadLetterGet(ctx, "late", "ep")
	require.NoError(t, err)
	require.Equal(t, dl.DeadLetteredAt.UTC(), p[0].Since.UTC(), "from itself on")
	require.Equal(t, []string{"late"}, autoReplayed(t, st))
}

// TestCircuitClosesWithoutAutoReplay: without auto_replay a close
// schedules nothing; a success before the threshold forgets the failures.
func TestCircuitClosesWithoutAutoReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	five := store.Settings{DisableAfter: time.Hour}
	_, err := st.CircuitFailed(ctx, "a", "x", five)
	require.NoError(t, err)
	tr, err := st.CircuitSucceeded(ctx, "a", false, 1)
	require.NoError(t, err)
	require.False(t, tr.Closed)
	require.Zero(t, tr.Circuit.ConsecutiveFailures)
	require.Nil(t, tr.Circuit.FailingSince)
	for range 5 {
		_, err = st.CircuitFailed(ctx, "a", "x", five)
		require.NoError(t, err)
	}
	tr, err = st.CircuitSucceeded(ctx, "a", false, 1)
	require.NoError(t, err)
	require.True(t, tr.Closed)
	require.Nil(t, tr.Circuit.AutoReplayPendingSince)
}

// TestCircuitDisablesAfterFailingTooLong: a failure once the run of
// failures has lasted disable_after disables the endpoint, once; enabling
// it again resets its circuit.
func TestCircuitDisablesAfterFailingTooLong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	minute := store.Settings{DisableAfter: time.Minute}
	tr, err := st.CircuitFailed(ctx, "b", "x", minute)
	require.NoError(t, err)
	require.False(t, tr.Disabled)
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET failing_since = now() - interval '2 minutes' WHERE endpoint_id = 'b'`)
	require.NoError(t, err)
	tr, err = st.CircuitFailed(ctx, "b", "x", minute)
	require.NoError(t, err)
	require.True(t, tr.Disabled)
	ep, err := st.EndpointGet(ctx, "b")
	require.NoError(t, err)
	require.True(t, ep.Disabled)
	require.Contains(t, *ep.DisabledReason, "disable_after")
	tr, err = st.CircuitFailed(ctx, "b", "x", minute)
	require.NoError(t, err)
	require.False(t, tr.Disabled, "disabled once")
	require.Equal(t, []string{contract.OpEndpointDisabled}, opEvents(t, st, "b"))

	require.NoError(t, st.CircuitReset(ctx, "b", false))
	c, err := st.CircuitGet(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	require.Nil(t, c.FailingSince)
}

// TestAFailureThatOpensAndDisablesPublishesBothInOrder: the failure that
// opens the circuit of an endpoint failing for longer than disable_after
// disables it too, and the operators are told in that order (the endpoint
// is disabled first within the transaction, which locks the endpoint's row
// before the events' sequence as every other transaction does).
func TestAFailureThatOpensAndDisablesPublishesBothInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.CircuitFailed(ctx, "c", "x", store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Minute})
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET failing_since = now() - interval '2 minutes' WHERE endpoint_id = 'c'`)
	require.NoError(t, err)
	tr, err := st.CircuitFailed(ctx, "c", "x", store.Settings{CircuitFailureThreshold: 2, DisableAfter: time.Minute})
	require.NoError(t, err)
	require.True(t, tr.Opened)
	require.True(t, tr.Disabled)
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpEndpointDisabled}, opEvents(t, st, "c"))
}

// TestEnablingClosesAnOpenCircuitAsAProbeWould: an endpoint enabled while
// its circuit is open closes it as a probe's success would, so with
// auto_replay its outage's dead letters are auto-replayed (from the
// outage's first failure) besides the disabling's, which the enabling
// replays itself, and the operators are told it closed; without
// auto_replay nothing is scheduled. A closed circuit only forgets its
// failures.
func TestEnablingClosesAnOpenCircuitAsAProbeWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openCircuit(t, st, "a")
	openCircuit(t, st, "b")
	opened, err := st.CircuitGet(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, st.CircuitReset(ctx, "a", true))
	require.NoError(t, st.CircuitReset(ctx, "b", false))
	_, err = st.CircuitFailed(ctx, "c", "x", store.Settings{DisableAfter: time.Hour})
	require.NoError(t, err)
	require.NoError(t, st.CircuitReset(ctx, "c", true))

	for _, ep := range []string{"a", "b", "c"} {
		c, err := st.CircuitGet(ctx, ep)
		require.NoError(t, err)
		require.Equal(t, store.CircuitClosed, c.State, ep)
		require.Zero(t, c.ConsecutiveFailures, ep)
		require.Nil(t, c.FailingSince, ep)
	}
	pending, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1, "a only")
	require.Equal(t, "a", pending[0].EndpointID)
	require.WithinDuration(t, *opened.FailingSince, pending[0].Since, time.Millisecond, "from the outage's first failure")
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed}, opEvents(t, st, "a"))
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed}, opEvents(t, st, "b"))
	require.Empty(t, opEvents(t, st, "c"), "its circuit never opened")
}

// TestCircuitsProbeReplayClaim: an open circuit of an endpoint with
// auto_replay whose probe is due is taken once per interval, and not while
// a probe holds the lease; one without auto_replay never.
func TestCircuitsProbeReplayClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	one := store.Settings{CircuitFailureThreshold: 1, DisableAfter: time.Hour}
	on := true
	_, err := st.EndpointUpdate(ctx, "c", store.EndpointChange{AutoReplay: &on})
	require.NoError(t, err)
	for _, ep := range []string{"a", "c"} {
		_, err := st.CircuitFailed(ctx, ep, "x", one)
		require.NoError(t, err)
	}
	got, err := st.CircuitsProbeReplayClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got, "no probe due yet")
	makeProbeDue(t, st, "a")
	makeProbeDue(t, st, "c")
	got, err = st.CircuitsProbeReplayClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "c", got[0].EndpointID, "only an endpoint with auto_replay")
	got, err = st.CircuitsProbeReplayClaim(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got, "once per interval")
}

// rateCountDue moves the endpoint's last count of its window back, as if
// RateCountEvery had passed since.
func rateCountDue(t *testing.T, st *store.Store, endpointID string) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), `UPDATE endpoint_circuits SET rate_counted_at = now() - interval '1 minute' WHERE endpoint_id = $1`, endpointID)
	require.NoError(t, err)
}

// circuitOpenedData is the data of the endpoint's last circuit_opened
// event.
func circuitOpenedData(t *testing.T, st *store.Store, endpointID string) map[string]any {
	t.Helper()
	var data map[string]any
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT data FROM events WHERE correlation_id = $1 AND type = $2 ORDER BY sequence DESC LIMIT 1`,
		contract.OperationalCorrelation(endpointID), contract.OpCircuitOpened).Scan(&data))
	return data
}

// TestCircuitOpensOnTheFailureRate: an endpoint failing every other
// attempt never reaches its consecutive threshold; its failures count its
// window's recorded attempts (a 202 is an answer, not a failure; another
// endpoint's attempts, older ones and those made while disabled are left
// out), at most once per RateCountEvery, and the circuit opens once they
// reach the rate, naming the trigger and its figures. After it closes, the
// outage's attempts no longer count.
func TestCircuitOpensOnTheFailureRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	cfg := store.Settings{CircuitFailureRate: 50, CircuitWindow: time.Minute, CircuitMinAttempts: 10, DisableAfter: time.Hour}
	insertRouted(t, st, "r-1", "r", 1, "ep", "a")
	n := int32(0)
	record := func(endpoint string, code int32, outcome string, ago time.Duration) {
		t.Helper()
		n++
		a := store.Attempt{Attempt: n, StartedAt: time.Now().Add(-ago), StatusCode: &code, Outcome: outcome}
		require.NoError(t, st.AttemptInsert(ctx, "r-1", endpoint, a))
	}
	fail := func() store.CircuitTransition {
		t.Helper()
		record("ep", 503, "retry", 0)
		tr, err := st.CircuitFailed(ctx, "ep", "x", cfg)
		require.NoError(t, err)
		return tr
	}
	succeed := func() {
		t.Helper()
		record("ep", 200, "delivered", 0)
		_, err := st.CircuitSucceeded(ctx, "ep", false, 1)
		require.NoError(t, err)
	}
	for range 10 {
		record("ep", 503, "retry", 2*time.Minute) // before the window
		record("a", 503, "retry", 0)              // another endpoint's
		record("ep", 0, "disabled", 0)            // no request made
	}
	record("ep", 202, "retry", 0) // parked: the receiver answered

	// 1 + 2k attempts with k failures: just under half, whatever k.
	for k := 1; k <= 5; k++ {
		succeed()
		rateCountDue(t, st, "ep")
		tr := fail()
		require.False(t, tr.Opened, "pair %d", k)
		require.NotNil(t, tr.Window, "a due count is made")
		require.Equal(t, store.RateWindow{Since: tr.Window.Since, Attempts: 1 + 2*k, Failures: k}, *tr.Window)
		require.Equal(t, 1, tr.Circuit.ConsecutiveFailures)
	}
	tr := fail()
	require.False(t, tr.Opened, "half the attempts failed, but the window was counted under a second ago")
	require.Nil(t, tr.Window)
	rateCountDue(t, st, "ep")
	tr = fail()
	require.True(t, tr.Opened, "7 of 13 attempts failed")
	require.Equal(t, store.TriggerFailureRate, tr.Trigger)
	require.Equal(t, store.RateWindow{Since: tr.Window.Since, Attempts: 13, Failures: 7}, *tr.Window)
	require.Equal(t, 3, tr.Circuit.ConsecutiveFailures, "under the consecutive threshold")
	require.Equal(t, store.CircuitOpen, tr.Circuit.State)
	require.Equal(t, store.ProbeBackoffInitial, tr.Circuit.NextProbeAt.Sub(*tr.Circuit.OpenedAt), "the first probe as for consecutive failures")
	data := circuitOpenedData(t, st, "ep")
	require.Equal(t, store.TriggerFailureRate, data["trigger"])
	require.EqualValues(t, 50, data["failure_rate"])
	require.EqualValues(t, 13, data["window_attempts"])
	require.EqualValues(t, 7, data["window_failures"])
	require.EqualValues(t, 53.8, data["window_failure_rate"])
	require.EqualValues(t, 3, data["consecutive_failures"])
	require.EqualValues(t, store.DefaultCircuitFailureThreshold, data["failure_threshold"])

	makeProbeDue(t, st, "ep")
	p, err := st.CircuitProbeClaim(ctx, "ep", "probe", time.Minute, false)
	require.NoError(t, err)
	require.True(t, p.Claimed)
	closed, err := st.CircuitSucceeded(ctx, "ep", false, 1)
	require.NoError(t, err)
	require.True(t, closed.Closed)
	require.NotNil(t, closed.Circuit.ClosedAt)
	rateCountDue(t, st, "ep")
	tr = fail()
	require.False(t, tr.Opened)
	require.Equal(t, store.RateWindow{Since: *closed.Circuit.ClosedAt, Attempts: 1, Failures: 1}, *tr.Window,
		"the window starts at the close: the outage's failures are not counted again")
}

// TestCircuitFailureRateNeedsMinAttempts: a window with fewer attempts
// than circuit_min_attempts says nothing of a rate, all of them failed or
// not; the failure that makes them enough opens the circuit.
func TestCircuitFailureRateNeedsMinAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	cfg := store.Settings{CircuitFailureThreshold: 1000, CircuitFailureRate: 100, CircuitMinAttempts: 4, DisableAfter: time.Hour}
	insertRouted(t, st, "m-1", "m", 1, "b")
	for i := int32(1); i <= 4; i++ {
		code := int32(500)
		require.NoError(t, st.AttemptInsert(ctx, "m-1", "b", store.Attempt{Attempt: i, StartedAt: time.Now(), StatusCode: &code, Outcome: "retry"}))
		rateCountDue(t, st, "b")
		tr, err := st.CircuitFailed(ctx, "b", "x", cfg)
		require.NoError(t, err)
		require.Equal(t, i == 4, tr.Opened, "failure %d", i)
	}
	data := circuitOpenedData(t, st, "b")
	require.Equal(t, store.TriggerFailureRate, data["trigger"])
	require.EqualValues(t, 100, data["window_failure_rate"])
}

// TestADisablingsDeadLetterWrittenAfterEnablingIsReplayed: an attempt read
// its endpoint disabled, and the operator enabled it before the dead letter
// was written, so the enabling's replay of the disabling's dead letters may
// have missed it. Written while the endpoint is enabled, such a dead letter
// is claimed for replay as hookflow (endpoint enabled) in its own
// transaction; one written while the endpoint is disabled waits for the
// enabling, and other reasons wait for an operator. A write that races the
// enabling waits for its commit (the endpoint's row is locked) and sees it.
func TestADisablingsDeadLetterWrittenAfterEnablingIsReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	disabledReason := contract.EndpointDisabledPrefix + "endpoint ep is disabled"
	write := func(id, reason string) store.DeadLetter {
		t.Helper()
		insertEvent(t, st, id, "c-"+id, 1)
		dl := deadLetter(id, "ep", "c-"+id, 1)
		dl.Reason = reason
		_, err := st.DeadLetterUpsert(ctx, dl, "w/"+id)
		require.NoError(t, err)
		got, err := st.DeadLetterGet(ctx, id, "ep")
		require.NoError(t, err)
		return got
	}
	enabled := write("enabled", disabledReason)
	require.Equal(t, store.DeadLetterReplayed, enabled.Status, "the enabling had passed it by")
	require.Equal(t, contract.EndpointEnabledBy, *enabled.ReplayedBy)
	gone := write("gone", contract.EndpointGonePrefix+"receiver answered 410")
	require.Equal(t, store.DeadLetterReplayed, gone.Status)
	require.Equal(t, store.DeadLetterOpen, write("rejected", "permanent rejection: receiver answered 400").Status)

	require.NoError(t, st.EndpointDisable(ctx, "ep", "disabled by operator"))
	require.Equal(t, store.DeadLetterOpen, write("disabled", disabledReason).Status, "enabling the endpoint replays it")

	// The enabling is under way (its UPDATE done, not committed) as the
	// dead letter is written: the write waits for it, then claims the replay.
	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE endpoints SET disabled = false, disabled_reason = NULL WHERE id = 'ep'`)
	require.NoError(t, err)
	insertEvent(t, st, "racing", "c-racing", 1)
	dl := deadLetter("racing", "ep", "c-racing", 1)
	dl.Reason = disabledReason
	written := make(chan error, 1)
	go func() {
		_, err := st.DeadLetterUpsert(ctx, dl, "w/racing")
		written <- err
	}()
	select {
	case err := <-written:
		t.Fatalf("the dead letter was written while the enabling held the endpoint's row: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-written)
	racing, err := st.DeadLetterGet(ctx, "racing", "ep")
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterReplayed, racing.Status)
}

// TestAClosingCircuitAsksToWakeItsLanes: every close of an open circuit (a
// probe's success, an operator's reset) stamps a wake, which lists the
// endpoint's deliveries in flight and is cleared only if no close came
// after the pass read it; a circuit that never opened asks for none.
func TestAClosingCircuitAsksToWakeItsLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i, id := range []string{"w-1", "w-2", "w-3"} {
		insertRouted(t, st, id, id, 1, "a", "b")
		require.NoError(t, st.EventMarkStarted(ctx, id, ""))
		if i < 2 {
			_, err := st.DeliveryStartAttempt(ctx, id, "a")
			require.NoError(t, err)
		}
	}
	delivered(t, st, "w-2", "a", "w-2", 1)
	_, err := st.DeliveryStartAttempt(ctx, "w-3", "b")
	require.NoError(t, err)
	pending := func() []store.CircuitWake {
		t.Helper()
		w, err := st.CircuitsWakePending(ctx, 10)
		require.NoError(t, err)
		return w
	}

	_, err = st.CircuitFailed(ctx, "b", "x", store.Settings{})
	require.NoError(t, err)
	_, err = st.CircuitSucceeded(ctx, "b", false, 1)
	require.NoError(t, err)
	require.Empty(t, pending(), "b's circuit never opened")

	openAndClose(t, st, "a")
	read := pending()
	require.Len(t, read, 1)
	require.Equal(t, "a", read[0].EndpointID)
	ids, err := st.DeliveringAt(ctx, "a", "", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"w-1"}, ids, "in flight at a: not w-2 (delivered), not w-3 (in flight at b)")
	ids, err = st.DeliveringAt(ctx, "a", "w-1", 10)
	require.NoError(t, err)
	require.Empty(t, ids, "after the page's last")

	openCircuit(t, st, "a")
	require.NoError(t, st.CircuitReset(ctx, "a", false))
	require.NoError(t, st.CircuitWakeDone(ctx, read[0]))
	again := pending()
	require.Len(t, again, 1, "the enabling's close came after the pass read the first")
	require.NoError(t, st.CircuitWakeDone(ctx, again[0]))
	require.Empty(t, pending())
}

// TestAFailedEarlyProbeKeepsTheBackoff: a replay's probe, claimed before
// the probe was due, that fails reopens the circuit for the same backoff;
// only a failed probe at or after its time doubles it. Six replays probing
// at once after an outage took the backoff from 5 s to 5 minutes before.
func TestAFailedEarlyProbeKeepsTheBackoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	openCircuit(t, st, "ep")
	for i := range 3 {
		owner := fmt.Sprintf("replay-%d", i)
		p, err := st.CircuitProbeClaim(ctx, "ep", owner, time.Minute, true)
		require.NoError(t, err)
		require.True(t, p.Claimed)
		_, err = st.CircuitFailed(ctx, "ep", owner, store.Settings{})
		require.NoError(t, err)
		c, err := st.CircuitGet(ctx, "ep")
		require.NoError(t, err)
		require.Equal(t, store.ProbeBackoffInitial, c.ProbeBackoff, "early probe %d", i)
	}
	makeProbeDue(t, st, "ep")
	p, err := st.CircuitProbeClaim(ctx, "ep", "due", time.Minute, false)
	require.NoError(t, err)
	require.True(t, p.Claimed)
	_, err = st.CircuitFailed(ctx, "ep", "due", store.Settings{})
	require.NoError(t, err)
	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, 2*store.ProbeBackoffInitial, c.ProbeBackoff, "the probe at its time doubles it")
}
