// Package worker runs hookflow's workflows and activities on a task queue.
// Workers are stateless: run as many as the load needs, on one queue.
package worker

import (
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// Config tunes one worker.
type Config struct {
	TaskQueue string
	// MaxConcurrentActivities bounds deliveries in flight (0: the SDK default).
	MaxConcurrentActivities int
}

// DeadlockAfter is how long a workflow task's code may run without
// yielding before the SDK takes it for a deadlock (the SDK's default is
// 1 s). hookflow's workflows block only on the SDK, and their longest
// stretch between yields is CPU work (a sequencer merging a ledger load at
// the subscriber ceiling): on a machine short of CPU a coroutine
// descheduled for a second would be failed although healthy, its task
// retried from the start, and the SDK would clear the state of a run whose
// coroutine is still executing.
const DeadlockAfter = 10 * time.Second

// New returns a worker with hookflow's workflows and acts registered; call
// Start (or Run) on it, and Stop to drain. It polls two task queues: the
// configured one, where event workflows and deliveries run, and its
// sequencer queue (contract.SequencerTaskQueue), where the sequencers run.
// The API's acceptance and a delivering attempt's hand-over wait for a
// sequencer's answer; on one shared queue, under a backlog, the sequencers'
// tasks would queue behind the very event tasks that wait for them.
func New(c client.Client, cfg Config, acts *activities.Activities) (worker.Worker, error) {
	if cfg.TaskQueue == "" {
		return nil, errors.New("worker: task queue is required")
	}
	if acts == nil {
		return nil, errors.New("worker: activities are required")
	}
	opts := worker.Options{
		MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentActivities,
		// Let in-flight deliveries finish on SIGTERM; Temporal retries what
		// does not, with the same identifiers.
		WorkerStopTimeout:        20e9,
		DeadlockDetectionTimeout: DeadlockAfter,
	}
	events := worker.New(c, cfg.TaskQueue, opts)
	Register(events, acts)
	sequencers := worker.New(c, contract.SequencerTaskQueue(cfg.TaskQueue), worker.Options{WorkerStopTimeout: 20e9, DeadlockDetectionTimeout: DeadlockAfter})
	Register(sequencers, acts)
	return &pair{Worker: events, sequencers: sequencers}, nil
}

// pair is the two queues' workers as one worker.Worker; registrations go
// to the event queue's.
type pair struct {
	worker.Worker
	sequencers worker.Worker
}

func (p *pair) Start() error {
	if err := p.Worker.Start(); err != nil {
		return err
	}
	if err := p.sequencers.Start(); err != nil {
		p.Worker.Stop()
		return err
	}
	return nil
}

func (p *pair) Run(interruptCh <-chan any) error {
	if err := p.Start(); err != nil {
		return err
	}
	<-interruptCh
	p.Stop()
	return nil
}

func (p *pair) Stop() {
	done := make(chan struct{})
	go func() { p.sequencers.Stop(); close(done) }()
	p.Worker.Stop()
	<-done
}

// Register adds hookflow's workflows and activities to any registry (a
// worker, or a test environment), under the names of package contract that
// the workflows call them by.
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.EventWorkflow, workflow.RegisterOptions{Name: contract.EventWorkflow})
	r.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: contract.SequencerWorkflow})
	for name, fn := range map[string]any{
		contract.ActivityDeliver:         acts.Deliver,
		contract.ActivityFinish:          acts.Finish,
		contract.ActivityLoadSequencer:   acts.LoadSequencer,
		contract.ActivityLoadLanes:       acts.LoadLanes,
		contract.ActivitySkip:            acts.Skip,
		contract.ActivityWriteDeadLetter: acts.WriteDeadLetter,
		contract.ActivityReplayed:        acts.Replayed,
		contract.ActivityHandOverPause:   acts.HandOverPause,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}
