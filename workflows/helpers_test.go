package workflows_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/internal/contract"
	hfworker "github.com/hookflow/hookflow/worker"
	"github.com/hookflow/hookflow/workflows"
)

// correlation is the correlation ID every test event belongs to.
const correlation = "order-42"

// tenant is the correlation's tenant.
const tenant = "acme"

// act is only used to name activity methods in mocks, as the workflows do.
var act *activities.Activities

// newEnv returns a time-skipping test environment with hookflow's workflows
// and activities registered exactly as a production worker registers them.
// Every activity a test reaches must be mocked: the zero Activities has no
// store, so an unmocked call fails loudly.
func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := s.NewTestWorkflowEnvironment()
	// The deadlock detector times a workflow task by the wall clock (1 s by
	// default), so on a loaded machine a task that yields in time can still
	// be taken for a deadlock. A minute still catches a goroutine that
	// never yields, as a workflow spinning on a condition does.
	env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: time.Minute})
	hfworker.Register(env, &activities.Activities{})
	t.Cleanup(func() { env.AssertExpectations(t) })
	return env
}

// eventInput is event number seq of the test correlation, with a 5-minute
// recovery window, routed to endpoints (ep_1 when none are named).
func eventInput(seq int64, endpoints ...string) workflows.EventInput {
	if len(endpoints) == 0 {
		endpoints = []string{"ep_1"}
	}
	in := workflows.EventInput{
		Event: contract.DeliverInput{
			EventID:       eventID(seq),
			CorrelationID: correlation,
			Sequence:      seq,
			Type:          "order.updated",
			Timestamp:     time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC),
			// A payload the workflow must not pass on: Deliver reads the
			// ledger's (an input from before it did may still carry one).
			Data:    json.RawMessage(`{"status":"paid"}`),
			Timeout: 5 * time.Second,
		},
		RecoveryWindow: 5 * time.Minute,
	}
	for _, ep := range endpoints {
		in.Lanes = append(in.Lanes, workflows.LaneInput{Endpoint: ep})
	}
	return in
}

// endpoints are ep_1 … ep_n.
func endpoints(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ep_%d", i+1)
	}
	return out
}

func eventID(seq int64) string { return fmt.Sprintf("evt_%d", seq) }

// recorder collects values written from activity and mock goroutines.
type recorder[T any] struct {
	mu   sync.Mutex
	vals []T
}

func (r *recorder[T]) add(v T) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = append(r.vals, v)
	return len(r.vals)
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.vals...)
}

func (r *recorder[T]) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.vals)
}

// offsets returns each time's distance from base.
func offsets(base time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(base)
	}
	return out
}

// requireAbout asserts that got is want within a second: the test clock
// skips, so only the retry policy and the workflow's own timers move it.
func requireAbout(t *testing.T, want, got time.Duration, msgAndArgs ...any) {
	t.Helper()
	require.InDelta(t, want.Seconds(), got.Seconds(), 1, msgAndArgs...)
}
