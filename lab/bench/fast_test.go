package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

func TestFastDeliverOptionsMatchTheBaseline(t *testing.T) {
	t.Parallel()
	regular := workflows.DeliverOptions(baselineWindow, 15*time.Second)
	local := fastDeliverOptions(15 * time.Second)
	require.Equal(t, regular.ScheduleToCloseTimeout, local.ScheduleToCloseTimeout)
	require.Equal(t, regular.StartToCloseTimeout, local.StartToCloseTimeout)
	require.Equal(t, regular.RetryPolicy, local.RetryPolicy)
}

func TestBaselineFastWorkflowDelivers(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts := NewBaselineActivities("http://127.0.0.1:1/webhook", []string{"whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdA=="})
	env.RegisterActivityWithOptions(acts.Deliver, activity.RegisterOptions{Name: BaselineFastDeliverName})
	in := contract.DeliverInput{EventID: "evt-1", CorrelationID: "evt-1", Sequence: 1, Data: json.RawMessage(`{"amount":1}`), Timeout: time.Second}
	env.OnActivity(BaselineFastDeliverName, mock.Anything, in).Return(nil).Once()
	env.RegisterWorkflowWithOptions(BaselineFastWorkflow, workflow.RegisterOptions{Name: BaselineFastWorkflowName})
	env.ExecuteWorkflow(BaselineFastWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

func TestEagerCounter(t *testing.T) {
	t.Parallel()
	var e eagerCounter
	call := func(method string, req, reply any, err error) {
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return err }
		_ = e.intercept(context.Background(), method, req, reply, nil, invoker)
	}
	start := func(eager bool) *workflowservice.StartWorkflowExecutionRequest {
		return &workflowservice.StartWorkflowExecutionRequest{RequestEagerExecution: eager}
	}
	accepted := &workflowservice.StartWorkflowExecutionResponse{EagerWorkflowTask: &workflowservice.PollWorkflowTaskQueueResponse{}}
	call(startMethod, start(true), accepted, nil)
	call(startMethod, start(true), &workflowservice.StartWorkflowExecutionResponse{}, nil) // refused by the server
	call(startMethod, start(false), &workflowservice.StartWorkflowExecutionResponse{}, nil)
	call(startMethod, start(true), accepted, context.DeadlineExceeded) // failed: not a start
	call("/temporal.api.workflowservice.v1.WorkflowService/SignalWorkflowExecution", nil, nil, nil)
	require.Equal(t, EagerStats{Starts: 3, Requested: 2, Accepted: 1}, e.stats())
}

func TestFastHandlerRefusesBadInput(t *testing.T) {
	t.Parallel()
	counter := &eagerCounter{}
	counter.starts.Add(2)
	h := fastHandler(nil, "q", counter)
	for _, body := range []string{"not json", `{"type":"x"}`} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, fastStartPath, strings.NewReader(body)))
		require.Equal(t, http.StatusBadRequest, rec.Code, body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fastStatsPath, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"starts":2,"eager_requested":0,"eager_accepted":0}`, rec.Body.String())
}
