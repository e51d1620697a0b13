package starter_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/starter"
	"github.com/hookflow/hookflow/store"
	"github.com/hookflow/hookflow/workflows"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestStartReleasesByTheLedgerCursor runs the starter on a real ledger with
// Temporal mocked: an event its correlation's cursor is on starts released;
// one that must wait gets no workflow until the event before it hands off
// (StartReleased); a repeated hand-off signals the running workflow instead;
// an event the cursor is past is not started at all.
func TestStartReleasesByTheLedgerCursor(t *testing.T) {
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	st, err := store.New(pool)
	require.NoError(t, err)
	_, err = st.EndpointInsert(ctx, "ep", "https://example.com/hook", "whsec_x")
	require.NoError(t, err)
	insert := func(seq int64) store.Event {
		t.Helper()
		e, ok, err := st.EventInsert(ctx, store.Event{ID: fmt.Sprintf("c-%d", seq), CorrelationID: "c", Sequence: seq, EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}})
		require.NoError(t, err)
		require.True(t, ok)
		return e
	}

	tc := &mocks.Client{}
	started := map[string]workflows.EventInput{}
	tc.On("ExecuteWorkflow", mock.Anything, mock.Anything, workflows.EventWorkflowName, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
			// Without it the SDK hides an existing workflow, and a repeated
			// hand-off could not tell it needs a signal.
			require.True(t, o.WorkflowExecutionErrorWhenAlreadyStarted)
			if _, ok := started[o.ID]; ok {
				return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")
			}
			started[o.ID] = args[0].(workflows.EventInput)
			return &mocks.WorkflowRun{}, nil
		})
	var signals []string
	tc.On("SignalWorkflow", mock.Anything, mock.Anything, "", workflows.SignalRelease, mock.Anything).Return(
		func(_ context.Context, id, _, _ string, arg any) error {
			signals = append(signals, fmt.Sprintf("%s %v", id, arg))
			return nil
		})
	s, err := starter.New(starter.Config{TaskQueue: "q", RecoveryWindow: time.Minute}, st, tc, testenv.Logger(t))
	require.NoError(t, err)

	// 1 is next: released at start, nothing skipped.
	require.NoError(t, s.Start(ctx, insert(1)))
	require.Equal(t, workflows.ProtocolLedger, started["c-1"].Protocol)
	require.Equal(t, &workflows.Release{Sequence: 1, Skipped: []int64{}}, started["c-1"].ReleasedAtStart)

	// 2 must wait for 1: stored and held, no workflow yet.
	e2 := insert(2)
	require.NoError(t, s.Start(ctx, e2))
	require.NotContains(t, started, "c-2", "a held event has no workflow")
	held, err := st.EventGet(ctx, "c-2")
	require.NoError(t, err)
	require.Equal(t, store.StateWaiting, held.State)

	// 1 finishes and hands off: 2 starts released; a repeated hand-off
	// signals it instead of starting it twice.
	require.NoError(t, st.EventFinish(ctx, "c-1", "c", 1, store.StateDelivered, time.Now()))
	require.NoError(t, s.StartReleased(ctx, held, nil))
	require.Equal(t, &workflows.Release{Sequence: 2}, started["c-2"].ReleasedAtStart)
	require.Empty(t, signals)
	require.NoError(t, s.StartReleased(ctx, held, nil))
	require.Equal(t, []string{"c-2 {2 []}"}, signals)

	// 3 waits; 2 is skipped; 3's start repeated (the sweep's) releases it
	// with the skip named; 2 is past the cursor and not started again.
	require.NoError(t, s.Start(ctx, insert(3)))
	require.NotContains(t, started, "c-3")
	require.NoError(t, st.EventFinish(ctx, "c-2", "c", 2, store.StateSkipped, time.Now()))
	delete(started, "c-2")
	require.NoError(t, s.Start(ctx, e2))
	require.NotContains(t, started, "c-2", "an event the cursor is past is not started")
	e3, err := st.EventGet(ctx, "c-3")
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx, e3))
	require.Equal(t, &workflows.Release{Sequence: 3, Skipped: []int64{2}}, started["c-3"].ReleasedAtStart)
}
