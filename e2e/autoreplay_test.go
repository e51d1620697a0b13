package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/services/starter"
)

// TestAutoReplayTakesEveryDeadLetterAroundItsCloses: a receiver goes down,
// the endpoint's circuit opens, the heads of its lanes are dead-lettered,
// and once the receiver is back a probe closes the circuit and the
// auto-replay delivers them. After that close one lane's receiver fails
// its whole window with the circuit closed (too few failures to open it),
// and its head is dead-lettered; another lane is then delivered. The
// receiver goes down again later than FlapReopenMultiple backoffs after
// the close (a new outage, with its own failing_since), then comes back,
// and the circuit closes. That close
// replays from the previous one, so the dead letter written between the
// two outages is replayed too: every lane is delivered in order, exactly
// once, and no dead letter is left to an operator. A close that replayed
// only from its own outage's first failure would leave that one open.
//
// Nothing here hangs on how fast the machine is: each outage has as many
// lanes as the circuit's threshold (5), so their first attempts alone open
// it however few retries a loaded machine fits into the window, the lane
// between the outages has one lane's failures (fewer than the threshold
// however many it fits), and every wait is for an outcome, with minutes to
// spare.
func TestAutoReplayTakesEveryDeadLetterAroundItsCloses(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	var o outage
	between := b.id("between")
	var betweenFails atomic.Bool
	rcv.fault = func(ev contract.Envelope, n int) string {
		if ev.CorrelationID == between && betweenFails.Load() {
			return "503"
		}
		return o.fault(ev, n)
	}
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "recovery_window": "6s", "auto_replay": true})
	rcv.secret = ep.Secret
	const n, seqs = store.DefaultCircuitFailureThreshold, 3
	circuit := func() store.Circuit {
		t.Helper()
		c, err := b.store.CircuitGet(ctx, ep.ID)
		require.NoError(t, err)
		return c
	}
	// outageOf posts lanes while the receiver is down until their heads
	// are dead-lettered, then brings it back, and answers the lanes and the
	// outage's first failure.
	outageOf := func(prefix string) ([]string, time.Time) {
		t.Helper()
		o.down.Store(true)
		corrs := b.postLanes(prefix, n, seqs, ep.ID)
		var since time.Time
		waitFor(t, 5*time.Minute, "the circuit opens", func() bool {
			c := circuit()
			if c.Open() && c.FailingSince != nil {
				since = *c.FailingSince
			}
			return c.Open()
		})
		for _, c := range corrs {
			b.waitState(c+"-1", contract.StateDeadLettered, 5*time.Minute)
		}
		o.down.Store(false)
		requireDrained(t, rcv, corrs, seqs, 10*time.Minute)
		waitFor(t, 5*time.Minute, "the circuit closed", func() bool { return circuit().State == store.CircuitClosed })
		return corrs, since
	}

	first, _ := outageOf("first")
	betweenFails.Store(true)
	b.postSequence(between, ep.ID, 1, seqs)
	b.waitState(between+"-1", contract.StateDeadLettered, 5*time.Minute)
	betweenFails.Store(false)
	dl := b.deadLetter(between + "-1?endpoint_id=" + ep.ID)
	require.True(t, contract.OutageCaused(dl.Reason), "its window spent on retryable failures: %s", dl.Reason)
	require.Equal(t, store.CircuitClosed, circuit().State, "failed with the circuit closed")
	// Another lane is delivered: the endpoint answers, and the failures
	// counted are forgotten, so the next outage's first failure comes
	// after the dead letter.
	healthy := b.id("healthy")
	b.postSequence(healthy, ep.ID, 1, 1)
	b.waitState(healthy+"-1", contract.StateDelivered, 5*time.Minute)
	require.Nil(t, circuit().FailingSince)

	waitFor(t, 10*time.Minute, "a reopening now is a new outage", func() bool {
		c := circuit()
		return c.Now.Sub(*c.ClosedAt) > store.FlapReopenMultiple*c.OutageBackoff+time.Second
	})
	require.Equal(t, store.DeadLetterOpen, b.deadLetter(between+"-1?endpoint_id="+ep.ID).Status, "no close yet replayed it")
	second, failingSince := outageOf("second")
	require.True(t, failingSince.After(dl.DeadLetteredAt), "the second outage began after the dead letter (%s, %s)", failingSince, dl.DeadLetteredAt)

	requireDrained(t, rcv, []string{between}, seqs, 10*time.Minute)
	requireDrained(t, rcv, append(first, second...), seqs, 5*time.Minute)
	dl = b.deadLetter(between + "-1?endpoint_id=" + ep.ID)
	require.Equal(t, store.DeadLetterReplayed, dl.Status)
	require.Equal(t, starter.AutoReplayBy, *dl.ReplayedBy)
	var open int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM dead_letters WHERE endpoint_id = $1 AND status = 'open'`, ep.ID).Scan(&open))
	require.Zero(t, open, "no dead letter is left to an operator")
}
