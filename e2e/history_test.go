package e2e

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestEventContinuesAsNewWhileDeadLettered (a history stays bounded over a
// 72-hour window): with a low
// MaxHistory, an event whose receiver answers 503 through its window
// continues as new on a real server while it waits (for its window's end,
// or on its dead letter), and the run it continues into carries the lane:
// it waits on the same dead letter, the search attributes still name it,
// and an operator's replay through the API, which signals the workflow by
// its ID, delivers it once.
func TestEventContinuesAsNewWhileDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 3 * time.Second, eventMaxHistory: 20})
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	var healed atomic.Bool
	rcv.fault = func(contract.Envelope, int) string {
		if healed.Load() {
			return ""
		}
		return "503"
	}
	corr := b.id("can")
	id := corr + "-1"
	code, _ := b.postEvent(id, corr, 1, ep.ID, map[string]any{"amount": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(id, contract.StateDeadLettered, 30*time.Second)

	ctx := context.Background()
	var first, latest string
	waitFor(t, 30*time.Second, "the workflow continued as new", func() bool {
		desc, err := b.client.DescribeWorkflowExecution(ctx, wf(id), "")
		require.NoError(t, err)
		info := desc.GetWorkflowExecutionInfo()
		first, latest = info.GetFirstRunId(), info.GetExecution().GetRunId()
		return first != latest
	})
	desc, err := b.client.DescribeWorkflowExecution(ctx, wf(id), "")
	require.NoError(t, err)
	require.Contains(t, desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields(), contract.DeadLetteredEndpointIDsKey.GetName(),
		"the search attributes carried over name the dead-lettered endpoint")
	v, err := b.client.QueryWorkflow(ctx, wf(id), "", contract.QueryState)
	require.NoError(t, err)
	var st contract.EventStatus
	require.NoError(t, v.Get(&st))
	lane, ok := st.Lane(ep.ID)
	require.True(t, ok)
	require.Equal(t, contract.StateDeadLettered, lane.State, "the new run waits on the dead letter")
	require.EqualValues(t, 1, lane.Generation)
	b.recordRunHistory(id, first, "event_continued_as_new_while_dead_lettered_history.json")

	healed.Store(true)
	alice := b.createKey("alice", "dead-letters:write")
	require.Equal(t, http.StatusAccepted, b.callAs(alice, http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	b.waitState(id, contract.StateDelivered, 30*time.Second)
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1}, applied[corr], "delivered once, by the run it continued into")
}
