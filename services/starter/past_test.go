package starter

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/workflows"
)

// pastSequencer is a Temporal client whose sequencer answers every arrival
// as finished (a sequencer that lost track of a lane), answers a resync
// with no release, and records the updates it gets and the workflows it is
// asked to start.
type pastSequencer struct {
	client.Client
	mu      sync.Mutex
	updates []string
	started []startedWorkflow
}

type startedWorkflow struct {
	opts client.StartWorkflowOptions
	in   workflows.EventInput
}

func (p *pastSequencer) NewWithStartWorkflowOperation(client.StartWorkflowOptions, any, ...any) client.WithStartWorkflowOperation {
	return nil
}

func (p *pastSequencer) UpdateWithStartWorkflow(_ context.Context, o client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updates = append(p.updates, o.UpdateOptions.UpdateName)
	var answer any = contract.Handoffs{}
	if o.UpdateOptions.UpdateName == contract.UpdateArrive {
		answer = contract.Announcement{Finished: true}
	}
	return answered{answer}, nil
}

func (p *pastSequencer) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = append(p.started, startedWorkflow{opts: o, in: args[0].(workflows.EventInput)})
	return startedRun{}, nil
}

// answered is an update's handle that answers v.
type answered struct{ v any }

func (a answered) WorkflowID() string { return "" }
func (a answered) RunID() string      { return "" }
func (a answered) UpdateID() string   { return "" }
func (a answered) Get(_ context.Context, out any) error {
	raw, err := json.Marshal(a.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

type startedRun struct{ client.WorkflowRun }

func (startedRun) GetRunID() string { return "run-1" }

// TestAnArrivalAnsweredFinishedWhileTheLedgerHoldsItOpenStillStarts: the
// sequencer answers 10's arrival as finished while the ledger has its
// delivery waiting (a resync racing an arrival let a lane release
// 11 first, and 10 was then answered finished and never started, waiting
// for good). The starter starts 10's workflow all the same, waiting for its
// release, records why, and makes the sequencer resync. An event the
// ledger has delivered is not started.
func TestAnArrivalAnsweredFinishedWhileTheLedgerHoldsItOpenStillStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	_, err = st.EndpointInsert(ctx, "x", "https://example.com/x", "whsec_x", nil)
	require.NoError(t, err)
	insert := func(id string, seq int64) store.Event {
		ev, ok, err := st.EventInsertRouted(ctx, intake.Event{ID: id, CorrelationID: "c", Sequence: seq, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{"x"}, nil)
		require.NoError(t, err)
		require.True(t, ok)
		return ev
	}
	ten := insert("c-10", 10)
	nine := insert("c-9", 9)
	require.NoError(t, st.DeliveryDelivered(ctx, "c-9", "x", "c", 9, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))

	seq := &pastSequencer{}
	s, err := New(Config{TaskQueue: "q", RecoveryWindow: time.Minute}, st, seq, testenv.Logger(t))
	require.NoError(t, err)

	require.NoError(t, s.Start(ctx, nine))
	require.Empty(t, seq.started, "the ledger has 9 delivered: its sequencer is right, and nothing is started")
	require.Equal(t, []string{contract.UpdateArrive}, seq.updates)

	require.NoError(t, s.Start(ctx, ten))
	require.Len(t, seq.started, 1, "10 is open in the ledger: its workflow is started")
	w := seq.started[0]
	require.Equal(t, contract.EventWorkflowID(store.DefaultTenant, "c-10"), w.opts.ID)
	require.Equal(t, []workflows.LaneInput{{Endpoint: "x"}}, w.in.Lanes, "waiting for its release")
	require.Equal(t, HeldStartDelay, w.opts.StartDelay)
	require.Equal(t, []string{contract.UpdateArrive, contract.UpdateArrive, contract.UpdateResync}, seq.updates)
	ev, err := st.EventGet(ctx, "c-10")
	require.NoError(t, err)
	require.Equal(t, contract.StateWaiting, ev.State, "marked started")
	require.EqualValues(t, 1, ev.Restarts)
	require.Equal(t, FinishedButOpenReason, *ev.RestartReason)
}
