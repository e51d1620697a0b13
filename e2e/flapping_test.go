package e2e

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// flapper is a receiver's fault that lets one request through (answered as
// the ledger receiver answers) once every period since the last it let
// through, and answers 503 to every other.
type flapper struct {
	every time.Duration

	mu     sync.Mutex
	nextOK time.Time
}

func (f *flapper) fault(contract.Envelope, int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); !now.Before(f.nextOK) {
		f.nextOK = now.Add(f.every)
		return ""
	}
	return "503"
}

// TestCircuitDisablesAFlappingReceiver: a receiver that answers once
// every 6 s and fails otherwise. One answer makes the circuit half-open,
// and the next failure opens it again with the outage's failing_since
// kept, so the endpoint is disabled once it has flapped for disable_after,
// and the operators hear of one opening. A circuit closed at each answer
// would forget failing_since (disable_after would never trip) and publish
// an event at each close and reopening.
func TestCircuitDisablesAFlappingReceiver(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	ctx := context.Background()
	ops := b.subscribeOps()
	rcv := newLedgerReceiver(t)
	f := &flapper{every: 6 * time.Second}
	rcv.fault = f.fault
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "disable_after": "1m", "auto_replay": true})
	rcv.secret = ep.Secret
	start := time.Now()
	b.postLanes("flap", 5, 3, ep.ID)

	type endpointView struct {
		Disabled       bool    `json:"disabled"`
		DisabledReason *string `json:"disabled_reason"`
	}
	var view endpointView
	waitFor(t, 4*time.Minute, "the flapping endpoint is disabled", func() bool {
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+ep.ID, nil, &view))
		return view.Disabled
	})
	disabledAfter := time.Since(start)
	require.NotNil(t, view.DisabledReason)
	require.Contains(t, *view.DisabledReason, "disable_after")
	waitFor(t, time.Minute, "the operators are told", func() bool {
		return slices.Contains(ops.seen(), contract.OpEndpointDisabled)
	})
	c, err := b.store.CircuitGet(ctx, ep.ID)
	require.NoError(t, err)
	require.NotEqual(t, store.CircuitClosed, c.State, "a flapper's circuit never closed for good")
	var attempts int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE endpoint_id = $1`, ep.ID).Scan(&attempts))
	opTypes := ops.seen()
	transitions := 0
	for _, typ := range opTypes {
		if typ == contract.OpCircuitOpened || typ == contract.OpCircuitClosed {
			transitions++
		}
	}
	require.LessOrEqual(t, transitions, 2, "the flapping is coalesced: %v", opTypes)
	t.Logf("FIGURE flapping receiver (200 once every 6 s): disabled %.1f s after the first post (disable_after 1m), %d attempts, operational events %v",
		disabledAfter.Seconds(), attempts, opTypes)
	ops.rcv.requireClean(t)
}

// TestADeadLetterGenerationHoldsItsOwnAttempts: a delivery dead-lettered,
// replayed and dead-lettered again: each generation holds the attempts of
// its own window, not every attempt so far, and the event's view still
// lists them all.
func TestADeadLetterGenerationHoldsItsOwnAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	rcv.fault = func(contract.Envelope, int) string { return "400" }
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	id := b.id("gen")
	code, _ := b.postEvent(id, b.id("gen-corr"), 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)

	generation := func(want int) (gen, attempts int) {
		t.Helper()
		waitFor(t, time.Minute, "the dead letter's generation", func() bool {
			err := b.store.Pool().QueryRow(ctx, `SELECT generation, jsonb_array_length(attempts) FROM dead_letters
				WHERE event_id = $1 AND endpoint_id = $2 AND status = 'open'`, id, ep.ID).Scan(&gen, &attempts)
			return err == nil && gen == want
		})
		return gen, attempts
	}
	_, first := generation(1)
	require.Equal(t, 1, first, "a rejection dead-letters at its first attempt")
	for want := 2; want <= 3; want++ {
		require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", map[string]any{"endpoint_id": ep.ID}, nil))
		_, n := generation(want)
		require.Equal(t, 1, n, "generation %d holds its own attempt, not those before it", want)
	}
	var all int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE event_id = $1 AND endpoint_id = $2`, id, ep.ID).Scan(&all))
	require.Equal(t, 3, all, "every attempt is kept in the ledger")
}
