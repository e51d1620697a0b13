// Package worker runs hookflow's workflows and activities on a task queue.
// Workers are stateless: run as many as the load needs, on one queue.
package worker

import (
	"errors"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/workflows"
)

// Config tunes one worker.
type Config struct {
	TaskQueue string
	// MaxConcurrentActivities bounds deliveries in flight (0: the SDK default).
	MaxConcurrentActivities int
}

// New returns a worker with hookflow's workflows and acts registered; call
// Start (or Run) on it, and Stop to drain.
func New(c client.Client, cfg Config, acts *activities.Activities) (worker.Worker, error) {
	if cfg.TaskQueue == "" {
		return nil, errors.New("worker: task queue is required")
	}
	if acts == nil {
		return nil, errors.New("worker: activities are required")
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentActivities,
		// Let in-flight deliveries finish on SIGTERM; Temporal retries what
		// does not, with the same identifiers.
		WorkerStopTimeout: 20e9,
	})
	Register(w, acts)
	return w, nil
}

// Register adds hookflow's workflows and activities to any registry (a
// worker, or a test environment).
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.EventWorkflow, workflow.RegisterOptions{Name: workflows.EventWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: workflows.SequencerWorkflowName})
	r.RegisterActivity(acts)
}
