package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestCleanerInItsLoop: the API's cleaner, in its scheduled loop, empties
// delivered events' payloads and deletes their attempts, and leaves a dead
// letter whole; a repost is answered as before, from the ledger, and GET
// /v1/stats says what the cleaner did; the dead letter is still replayed.
func TestCleanerInItsLoop(t *testing.T) {
	t.Parallel()
	b := setup(t, options{retention: time.Second, window: 3 * time.Second})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var healed atomic.Bool
	corr, dlCorr := b.id("kept"), b.id("dl")
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if ev.CorrelationID == dlCorr && !healed.Load() {
			return "400"
		}
		return ""
	}
	for _, s := range []int64{1, 2} {
		code, _ := b.postEvent(corrID(corr, s), corr, s, ep.ID, map[string]any{"amount": s})
		require.Equal(t, http.StatusAccepted, code)
	}
	b.postEvent(corrID(dlCorr, 1), dlCorr, 1, ep.ID, map[string]any{"amount": 1})
	b.waitState(corrID(corr, 2), contract.StateDelivered, 30*time.Second)
	b.waitState(corrID(dlCorr, 1), contract.StateDeadLettered, 30*time.Second)

	waitFor(t, 30*time.Second, "the cleaner emptied both payloads and their attempts", func() bool {
		var payloads, attempts int
		require.NoError(t, b.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FILTER (WHERE data IS NOT NULL), (SELECT count(*) FROM delivery_attempts a JOIN events e ON e.id = a.event_id WHERE e.correlation_id = $1)
			 FROM events WHERE correlation_id = $1`, corr).Scan(&payloads, &attempts))
		return payloads == 0 && attempts == 0
	})
	var stats struct {
		Cleaner *struct {
			PayloadsPruned int64 `json:"payloads_pruned"`
		} `json:"cleaner"`
	}
	waitFor(t, 10*time.Second, "stats show the cleaner's run", func() bool {
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats", nil, &stats))
		return stats.Cleaner != nil
	})
	dl := b.deadLetter(corrID(dlCorr, 1))
	require.Len(t, dl.Attempts, 1, "a dead letter keeps its attempts")

	// What Temporal keeps does not matter to these answers: the event's
	// state and a repost come from the ledger.
	require.Equal(t, contract.StateDelivered, b.eventState(corrID(corr, 1)).State)
	code, again := b.postEvent(corrID(corr, 1), corr, 1, ep.ID, map[string]any{"amount": 1})
	require.Equal(t, http.StatusOK, code, "a repost of a pruned event is answered from the ledger")
	require.Equal(t, contract.StateDelivered, again.State)
	code, _ = b.postEvent(corrID(corr, 1), corr, 1, ep.ID, map[string]any{"amount": 9})
	require.Equal(t, http.StatusUnprocessableEntity, code)

	healed.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+corrID(dlCorr, 1)+"/replay", nil, nil))
	b.waitState(corrID(dlCorr, 1), contract.StateDelivered, 30*time.Second)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
	require.Equal(t, []int64{1}, applied[dlCorr])
}

func corrID(corr string, seq int64) string { return fmt.Sprintf("%s-%d", corr, seq) }
