package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestADeadLetterBetweenACloseAndAFlapsReopeningIsAutoReplayed: the chaos
// long run on 30e0bf8. A flapping endpoint's circuit closes and its pass is
// done; a delivery whose whole window ran while the circuit was closed is
// dead-lettered (the receiver failing again: no outage yet, so no pass asks
// for it); the circuit then reopens within FlapReopenMultiple backoffs of
// the close, the same outage, and closes again: that close's auto-replay
// runs from the outage's first failure, so its page holds the dead letter.
func TestADeadLetterBetweenACloseAndAFlapsReopeningIsAutoReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.Pool().Exec(ctx, `UPDATE endpoints SET auto_replay = true WHERE id = 'ep'`)
	require.NoError(t, err)
	openCircuit(t, st, "ep")
	_, err = st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET failing_since = now() - interval '2 minutes', probe_backoff_ms = 20000 WHERE endpoint_id = 'ep'`)
	require.NoError(t, err)
	outage, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	_, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	first := autoReplaysPending(t, st)
	require.Len(t, first, 1)
	require.NoError(t, st.CircuitAutoReplayDone(ctx, first[0]))

	insertEvent(t, st, "between", "flap", 1)
	dl := deadLetter("between", "ep", "flap", 1)
	dl.Reason, dl.WindowStart = contract.WindowSpentPrefix+"; last attempt: 503", time.Now()
	_, err = st.DeadLetterUpsert(ctx, dl, "w/between")
	require.NoError(t, err)
	require.Empty(t, autoReplaysPending(t, st), "a window that began after the close is no outage's, yet")

	openCircuit(t, st, "ep")
	reopened, err := st.CircuitGet(ctx, "ep")
	require.NoError(t, err)
	require.Equal(t, outage.FailingSince.UTC(), reopened.FailingSince.UTC(), "the same outage")
	_, err = st.CircuitSucceeded(ctx, "ep", true, 1)
	require.NoError(t, err)
	pending := autoReplaysPending(t, st)
	require.Len(t, pending, 1)
	require.Equal(t, outage.FailingSince.UTC(), pending[0].Since.UTC(), "from the outage's first failure")
	since := pending[0].Since
	page, err := st.DeadLetterReplayPage(ctx, store.DeadLetterFilter{EndpointID: "ep", Status: store.DeadLetterOpen, Since: &since, Limit: 10}, nil)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "between", page[0].EventID)
	require.True(t, contract.OutageCaused(page[0].Reason))
}
