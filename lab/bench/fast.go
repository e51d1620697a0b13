package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// Registered names of the fast baseline.
const (
	BaselineFastWorkflowName = "BenchBaselineFastWorkflow"
	BaselineFastDeliverName  = "BenchBaselineFastDeliver"
)

// Paths of the fast baseline's HTTP endpoint.
const (
	fastStartPath  = "/start"
	fastStatsPath  = "/stats"
	fastHealthPath = "/healthz"
)

// BaselineFastWorkflow is the cheapest bare Temporal delivery: the signed
// POST as one local activity (one marker, no activity task) on a workflow
// that its starter's own worker runs eagerly. It is the floor any Temporal
// design pays per event, and so the floor that ordering is measured against.
func BaselineFastWorkflow(ctx workflow.Context, in contract.DeliverInput) error {
	ctx = workflow.WithLocalActivityOptions(ctx, fastDeliverOptions(in.Timeout))
	return workflow.ExecuteLocalActivity(ctx, BaselineFastDeliverName, in).Get(ctx, nil)
}

// fastDeliverOptions are the baseline's activity options (hookflow's retry
// policy and timeouts) as local activity options.
func fastDeliverOptions(httpTimeout time.Duration) workflow.LocalActivityOptions {
	o := workflows.DeliverOptions(baselineWindow, httpTimeout)
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
		StartToCloseTimeout:    o.StartToCloseTimeout,
		RetryPolicy:            o.RetryPolicy,
	}
}

// FastConfig is what the fast baseline's process needs.
type FastConfig struct {
	TemporalAddress string
	Namespace       string
	TaskQueue       string
	// ListenAddr is where it takes events to start (127.0.0.1:port).
	ListenAddr  string
	ReceiverURL string
	Secrets     []string
}

// EagerStats counts the fast baseline's workflow starts and how many of them
// the server ran eagerly (the first task came back in the start's answer).
type EagerStats struct {
	Starts    int64 `json:"starts"`
	Requested int64 `json:"eager_requested"`
	Accepted  int64 `json:"eager_accepted"`
}

// eagerCounter watches StartWorkflowExecution on the client's connection:
// the SDK asks for eager execution only when a worker of this client polls
// the task queue and has a free slot, and the server may still refuse it.
type eagerCounter struct {
	starts, requested, accepted atomic.Int64
}

const startMethod = "/temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution"

func (e *eagerCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method != startMethod || err != nil {
		return err
	}
	e.starts.Add(1)
	if r, ok := req.(*workflowservice.StartWorkflowExecutionRequest); ok && r.GetRequestEagerExecution() {
		e.requested.Add(1)
	}
	if r, ok := reply.(*workflowservice.StartWorkflowExecutionResponse); ok && r.GetEagerWorkflowTask() != nil {
		e.accepted.Add(1)
	}
	return nil
}

func (e *eagerCounter) stats() EagerStats {
	return EagerStats{Starts: e.starts.Load(), Requested: e.requested.Load(), Accepted: e.accepted.Load()}
}

// RunFastBaseline runs the fast baseline's process until ctx is done: a
// worker on cfg.TaskQueue and, on the same Temporal client (eager start
// needs both in one client), an HTTP endpoint on cfg.ListenAddr where
// POST /start with an contract.DeliverInput starts the event's workflow
// eagerly and answers 202 once the start has returned. GET /stats answers
// EagerStats. It dials Temporal itself, to count eager starts on the wire.
func RunFastBaseline(ctx context.Context, cfg FastConfig, logger *slog.Logger) error {
	if cfg.TaskQueue == "" || cfg.ReceiverURL == "" || len(cfg.Secrets) == 0 || cfg.ListenAddr == "" {
		return errors.New("fast baseline: task queue, listen address, receiver URL and secret are required")
	}
	counter := &eagerCounter{}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := client.DialContext(dctx, client.Options{
		HostPort: cfg.TemporalAddress, Namespace: cfg.Namespace,
		Logger:            sdklog.NewStructuredLogger(logger),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)}},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("fast baseline: dial temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer c.Close()

	w := sdkworker.New(c, cfg.TaskQueue, sdkworker.Options{WorkerStopTimeout: 20 * time.Second})
	w.RegisterWorkflowWithOptions(BaselineFastWorkflow, workflow.RegisterOptions{Name: BaselineFastWorkflowName})
	acts := NewBaselineActivities(cfg.ReceiverURL, cfg.Secrets)
	w.RegisterActivityWithOptions(acts.Deliver, activity.RegisterOptions{Name: BaselineFastDeliverName})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start fast baseline worker: %w", err)
	}
	defer w.Stop()

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("fast baseline: listen on %s: %w", cfg.ListenAddr, err)
	}
	srv := &http.Server{Handler: fastHandler(c, cfg.TaskQueue, counter), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("fast baseline started", "task_queue", cfg.TaskQueue, "addr", ln.Addr().String(), "receiver", cfg.ReceiverURL)
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("fast baseline: serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// fastHandler serves the fast baseline's endpoint.
func fastHandler(c client.Client, taskQueue string, counter *eagerCounter) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+fastHealthPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET "+fastStatsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(counter.stats())
	})
	mux.HandleFunc("POST "+fastStartPath, func(w http.ResponseWriter, r *http.Request) {
		var in contract.DeliverInput
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.EventID == "" {
			http.Error(w, "want an contract.DeliverInput with an event_id", http.StatusBadRequest)
			return
		}
		opts := client.StartWorkflowOptions{ID: in.EventID, TaskQueue: taskQueue, EnableEagerStart: true}
		if _, err := c.ExecuteWorkflow(r.Context(), opts, BaselineFastWorkflowName, in); err != nil {
			http.Error(w, "start workflow: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}
