package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	st, err := starter.New(starter.Config{TaskQueue: b.cfg.TaskQueue, RecoveryWindow: b.cfg.RecoveryWindow, DeliveryTimeout: b.cfg.DeliveryTimeout},
		b.store, b.client, testenv.Logger(t))
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
