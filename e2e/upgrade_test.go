package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/hookflow/hookflow/app"
	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/starter"
	"github.com/hookflow/hookflow/store"
	"github.com/hookflow/hookflow/workflows"
)

// TestUpgradeFromSequencerProtocol: a correlation with an event stored
// before the ledger protocol existed (events.protocol's default, ordered by
// the correlation's sequencer workflow) keeps new events on the sequencer
// while any such event is unfinished, so the sequencer never waits for an
// event it will not hear of; once they are all finished, new events are
// ordered by the ledger. The receiver sees 1, 2, 3 in order either way.
func TestUpgradeFromSequencerProtocol(t *testing.T) {
	b := setup(t, options{})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	corr := b.id("upgrade")

	// Event 2 as an API of the previous release stored and started it: it
	// arrives early and parks in the sequencer, waiting for 1.
	_, err := b.store.Pool().Exec(ctx, `INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash)
		VALUES ($1, $2, 2, $3, 'order.updated', '{}', '\x01')`, corr+"-2", corr, ep.ID)
	require.NoError(t, err)
	old, err := b.store.EventGet(ctx, corr+"-2")
	require.NoError(t, err)
	require.Equal(t, store.ProtocolSequencer, old.Protocol)
	st, err := app.NewStarter(b.cfg, b.store, b.client, testenv.Logger(t))
	require.NoError(t, err)
	require.Equal(t, workflows.ProtocolFastPath, st.Input(old).Protocol)
	require.NoError(t, st.Start(ctx, old))
	waitFor(t, 30*time.Second, "the sequencer holds event 2", func() bool {
		_, err := b.client.DescribeWorkflowExecution(ctx, workflows.SequencerID(corr), "")
		return err == nil
	})

	// Event 1 through today's API joins the sequencer.
	code, _ := b.postEvent(corr+"-1", corr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	first, err := b.store.EventGet(ctx, corr+"-1")
	require.NoError(t, err)
	require.Equal(t, store.ProtocolSequencer, first.Protocol, "an unfinished sequencer event keeps its correlation on the sequencer")
	waitApplied(t, rcv, map[string]int64{corr: 2}, 2*time.Minute)

	// Both finished: event 3 is ordered by the ledger.
	code, _ = b.postEvent(corr+"-3", corr, 3, ep.ID, map[string]any{"n": 3})
	require.Equal(t, http.StatusAccepted, code)
	third, err := b.store.EventGet(ctx, corr+"-3")
	require.NoError(t, err)
	require.Equal(t, store.ProtocolLedger, third.Protocol)
	waitApplied(t, rcv, map[string]int64{corr: 3}, 2*time.Minute)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2, 3}, applied[corr])
}

// TestLostReleaseIsSweptUp: an event of the ledger protocol held for its
// predecessor, whose hand-off never came (here: the predecessor was skipped
// straight in the ledger, as by a worker of an older release), is started
// released by the starter's sweep once the cursor has been on it for
// MissedReleaseAge, with the skip in its envelope.
func TestLostReleaseIsSweptUp(t *testing.T) {
	b := setup(t, options{})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	corr := b.id("lost")

	code, _ := b.postEvent(corr+"-2", corr, 2, ep.ID, map[string]any{"n": 2})
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, store.StateWaiting, b.eventState(corr+"-2").State, "event 2 is held for 1")
	_, err := b.client.DescribeWorkflowExecution(ctx, corr+"-2", "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "a held event has no workflow yet")

	_, err = b.store.Pool().Exec(ctx, `INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, protocol)
		VALUES ($1, $2, 1, $3, 'order.updated', '{}', '\x01', 'skipped', 2)`, corr+"-1", corr, ep.ID)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(ctx, `INSERT INTO correlations (correlation_id, next_sequence, updated_at) VALUES ($1, 2, now() - interval '2 minutes')`, corr)
	require.NoError(t, err)
	// Both happened two minutes ago.
	_, err = b.store.Pool().Exec(ctx, `UPDATE events SET updated_at = now() - interval '2 minutes' WHERE id = $1`, corr+"-2")
	require.NoError(t, err)
	time.Sleep(2 * time.Second)
	require.Zero(t, rcv.requestsFor(corr+"-2"), "nothing released it yet")

	st, err := app.NewStarter(b.cfg, b.store, b.client, testenv.Logger(t))
	require.NoError(t, err)
	n, err := st.ReleaseMissed(ctx, starter.MissedReleaseAge)
	require.NoError(t, err)
	if n == 0 {
		// The API's own sweep (every MissedReleaseAge/2) came first.
		require.NotEqual(t, store.StateWaiting, b.eventState(corr+"-2").State)
	} else {
		require.Equal(t, 1, n)
	}
	waitFor(t, 30*time.Second, "event 2 delivered", func() bool { return b.eventState(corr+"-2").State == store.StateDelivered })
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{2}, applied[corr], "2 applied, 1 known skipped")
	n, err = st.ReleaseMissed(ctx, starter.MissedReleaseAge)
	require.NoError(t, err)
	require.Zero(t, n)
}
