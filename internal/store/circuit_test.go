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
	rows, err := st.Pool().Query(context.Background(), `SELECT type FROM events WHERE correlation_id = $1 ORDER BY sequence`, endpoint)
	require.NoError(t, err)
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return types
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
	for i := range 3 {
		_, err := st.CircuitFailed(ctx, "ep", fmt.Sprint("a", i), 3, time.Hour)
		require.NoError(t, err)
	}

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

	c, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State, "an endpoint that never failed is closed")

	for i := 1; i < 3; i++ {
		tr, err := st.CircuitFailed(ctx, "ep", fmt.Sprint("a", i), 3, time.Hour)
		require.NoError(t, err)
		require.False(t, tr.Opened)
		require.Equal(t, i, tr.Circuit.ConsecutiveFailures)
	}
	first, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.NotNil(t, first.FailingSince)
	tr, err := st.CircuitFailed(ctx, "ep", "a3", 3, time.Hour)
	require.NoError(t, err)
	require.True(t, tr.Opened, "the third consecutive failure opens it")
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
	tr, err = st.CircuitFailed(ctx, "ep", "other", 3, time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.ProbeBackoffInitial, tr.Circuit.ProbeBackoff)
	require.NotNil(t, tr.Circuit.ProbeOwner, "the probe keeps its lease")

	tr, err = st.CircuitFailed(ctx, "ep", fmt.Sprint("p", prober), 3, time.Hour)
	require.NoError(t, err)
	require.False(t, tr.Opened, "already open")
	require.Equal(t, 2*store.ProbeBackoffInitial, tr.Circuit.ProbeBackoff, "a failed probe doubles the backoff")
	require.Nil(t, tr.Circuit.ProbeOwner, "and frees the lease")
	require.Equal(t, store.CircuitOpen, tr.Circuit.State)

	makeProbeDue(t, st, "ep")
	p, err = st.CircuitProbeClaim(ctx, "ep", "p-next", time.Minute, false)
	require.NoError(t, err)
	require.True(t, p.Claimed)
	tr, err = st.CircuitSucceeded(ctx, "ep", true)
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

	tr, err = st.CircuitSucceeded(ctx, "ep", true)
	require.NoError(t, err)
	require.False(t, tr.Closed, "a success of a closed circuit is no transition")
	require.Equal(t, []string{contract.OpCircuitOpened, contract.OpCircuitClosed}, opEvents(t, st, "ep"),
		"each transition publishes its event once; a re-open and a repeat none")
}

// openAndClose fails endpoint past threshold 3, then closes its circuit
// with auto_replay.
func openAndClose(t *testing.T, st *store.Store, endpoint string) {
	t.Helper()
	ctx := context.Background()
	for i := range 3 {
		_, err := st.CircuitFailed(ctx, endpoint, fmt.Sprint("f", i), 3, time.Hour)
		require.NoError(t, err)
	}
	tr, err := st.CircuitSucceeded(ctx, endpoint, true)
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
// the auto-replay again, from its window's start; one whose window began
// after the close, or a permanent rejection, does not.
func TestALateOutageDeadLetterIsAutoReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.Pool().Exec(ctx, `UPDATE endpoints SET auto_replay = true WHERE id = 'ep'`)
	require.NoError(t, err)
	beforeClose := time.Now().Add(-time.Minute)
	openAndClose(t, st, "ep")
	read, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.NoError(t, st.CircuitAutoReplayDone(ctx, read[0]))

	write := func(id, reason string, windowStart time.Time) {
		t.Helper()
		insertEvent(t, st, id, "late-"+id, 1)
		dl := deadLetter(id, "ep", "late-"+id, 1)
		dl.Reason, dl.WindowStart = reason, windowStart
		_, err := st.DeadLetterUpsert(ctx, dl, "w/"+id)
		require.NoError(t, err)
	}
	pendingCount := func() int {
		t.Helper()
		p, err := st.CircuitsAutoReplayPending(ctx, 10)
		require.NoError(t, err)
		return len(p)
	}
	write("rejected", "permanent rejection: receiver answered 400", beforeClose)
	require.Zero(t, pendingCount(), "a rejection is never auto-replayed")
	write("after", contract.CircuitOpenReason, time.Now().Add(time.Minute))
	require.Zero(t, pendingCount(), "a window that began after the close is another failure")
	write("late", contract.CircuitOpenReason, beforeClose)
	p, err := st.CircuitsAutoReplayPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, p, 1, "the late dead letter of the outage asks for the pass again")
	require.Equal(t, beforeClose.UTC().Truncate(time.Millisecond), p[0].Since.UTC().Truncate(time.Millisecond))
}

// TestCircuitClosesWithoutAutoReplay: without auto_replay a close
// schedules nothing; a success before the threshold forgets the failures.
func TestCircuitClosesWithoutAutoReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.CircuitFailed(ctx, "a", "x", 5, time.Hour)
	require.NoError(t, err)
	tr, err := st.CircuitSucceeded(ctx, "a", false)
	require.NoError(t, err)
	require.False(t, tr.Closed)
	require.Zero(t, tr.Circuit.ConsecutiveFailures)
	require.Nil(t, tr.Circuit.FailingSince)
	for range 5 {
		_, err = st.CircuitFailed(ctx, "a", "x", 5, time.Hour)
		require.NoError(t, err)
	}
	tr, err = st.CircuitSucceeded(ctx, "a", false)
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
	tr, err := st.CircuitFailed(ctx, "b", "x", 5, time.Minute)
	require.NoError(t, err)
	require.False(t, tr.Disabled)
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET failing_since = now() - interval '2 minutes' WHERE endpoint_id = 'b'`)
	require.NoError(t, err)
	tr, err = st.CircuitFailed(ctx, "b", "x", 5, time.Minute)
	require.NoError(t, err)
	require.True(t, tr.Disabled)
	ep, err := st.EndpointGet(ctx, "b")
	require.NoError(t, err)
	require.True(t, ep.Disabled)
	require.Contains(t, *ep.DisabledReason, "disable_after")
	tr, err = st.CircuitFailed(ctx, "b", "x", 5, time.Minute)
	require.NoError(t, err)
	require.False(t, tr.Disabled, "disabled once")
	require.Equal(t, []string{contract.OpEndpointDisabled}, opEvents(t, st, "b"))

	require.NoError(t, st.CircuitReset(ctx, "b"))
	c, err := st.CircuitGet(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	require.Nil(t, c.FailingSince)
}

// TestCircuitsProbeReplayClaim: an open circuit of an endpoint with
// auto_replay whose probe is due is taken once per interval, and not while
// a probe holds the lease; one without auto_replay never.
func TestCircuitsProbeReplayClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	on := true
	_, err := st.EndpointUpdate(ctx, "c", store.EndpointChange{AutoReplay: &on})
	require.NoError(t, err)
	for _, ep := range []string{"a", "c"} {
		_, err := st.CircuitFailed(ctx, ep, "x", 1, time.Hour)
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
