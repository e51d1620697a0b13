package starter_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/schema"
	"github.com/hookflow/hookflow/starter"
	"github.com/hookflow/hookflow/store"
	"github.com/hookflow/hookflow/workflows"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestStartReleasesByTheLedgerCursor runs the starter on a real ledger with
// Temporal mocked: an event its correlation's cursor is on starts released;
// one whose predecessor finishes while its workflow is being started (when
// the predecessor had no workflow to signal) is signalled right after the
// start; one that must wait starts waiting and is not signalled; one the
// cursor is past is not started at all.
func TestStartReleasesByTheLedgerCursor(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
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
	var duringStart func(id string)
	tc.On("ExecuteWorkflow", mock.Anything, mock.Anything, workflows.EventWorkflowName, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
			started[o.ID] = args[0].(workflows.EventInput)
			if duringStart != nil {
				duringStart(o.ID)
			}
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
	require.Empty(t, signals)

	// 2 starts while 1 is in flight, and 1 finishes during the start.
	duringStart = func(string) {
		require.NoError(t, st.EventFinish(ctx, "c-1", "c", 1, store.StateDelivered, time.Now()))
	}
	require.NoError(t, s.Start(ctx, insert(2)))
	require.Nil(t, started["c-2"].ReleasedAtStart)
	require.Equal(t, []string{"c-2 {2 []}"}, signals, "released right after its start")

	// 3 must wait for 2.
	duringStart = nil
	require.NoError(t, s.Start(ctx, insert(3)))
	require.Nil(t, started["c-3"].ReleasedAtStart)
	require.Len(t, signals, 1, "3 waits for 2's hand-off")

	// 2 is skipped; 3's workflow start repeated (the sweep) releases it with
	// the skip; 2 itself is past the cursor and not started again.
	require.NoError(t, st.EventFinish(ctx, "c-2", "c", 2, store.StateSkipped, time.Now()))
	delete(started, "c-2")
	e2, err := st.EventGet(ctx, "c-2")
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx, e2))
	require.NotContains(t, started, "c-2", "an event the cursor is past is not started")
	e3, err := st.EventGet(ctx, "c-3")
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx, e3))
	require.Equal(t, &workflows.Release{Sequence: 3, Skipped: []int64{2}}, started["c-3"].ReleasedAtStart)
}
