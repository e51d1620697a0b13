// Package starter turns accepted events into running EventWorkflows. An event
// is stored in Postgres before anything else (state queued); the starter then
// starts its workflow with workflow ID = the event's idempotency key and marks
// it waiting. When Temporal is unavailable the event simply stays queued and
// the sweep loop starts it once Temporal is back: nothing accepted is lost,
// and a start repeated after a crash never duplicates a workflow.
package starter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/store"
	"github.com/hookflow/hookflow/workflows"
)

// Config tunes the starter.
type Config struct {
	TaskQueue       string
	RecoveryWindow  time.Duration
	DeliveryTimeout time.Duration
	// SweepInterval is how often queued events are looked for (default 1 s).
	SweepInterval time.Duration
	// SweepMinAge leaves fresh events to the request that stored them (default 2 s).
	SweepMinAge time.Duration
}

// Starter starts event workflows.
type Starter struct {
	cfg      Config
	store    *store.Store
	temporal client.Client
	logger   *slog.Logger
}

// New returns a Starter; store, client and logger are required.
func New(cfg Config, st *store.Store, c client.Client, logger *slog.Logger) (*Starter, error) {
	if st == nil || c == nil || logger == nil {
		return nil, errors.New("starter: store, temporal client and logger are required")
	}
	if cfg.TaskQueue == "" || cfg.RecoveryWindow <= 0 {
		return nil, errors.New("starter: task queue and recovery window are required")
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Second
	}
	if cfg.SweepMinAge <= 0 {
		cfg.SweepMinAge = 2 * time.Second
	}
	return &Starter{cfg: cfg, store: st, temporal: c, logger: logger}, nil
}

// Input builds the workflow input of a stored event.
func (s *Starter) Input(ev store.Event) workflows.EventInput {
	return workflows.EventInput{
		Event: activities.DeliverInput{
			EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ev.EndpointID,
			Type: ev.Type, Timestamp: ev.AcceptedAt, Data: ev.Data, Timeout: s.cfg.DeliveryTimeout,
		},
		RecoveryWindow: s.cfg.RecoveryWindow,
		Protocol:       protocol(ev.Protocol),
	}
}

// protocol is the workflow protocol of a stored event's ordering protocol.
func protocol(stored int) int {
	if stored == store.ProtocolLedger {
		return workflows.ProtocolLedger
	}
	return workflows.ProtocolFastPath
}

// Start starts the event's workflow (a no-op when it exists) and marks the
// event waiting.
func (s *Starter) Start(ctx context.Context, ev store.Event) error {
	if err := s.startWorkflow(ctx, ev); err != nil {
		return err
	}
	return s.store.EventMarkStarted(ctx, ev.ID)
}

// startWorkflow starts the event's workflow. An event ordered by the ledger
// gets one only once released: now, when its correlation's cursor is on it;
// otherwise the event before it starts it when it finishes (StartReleased
// from its hand-off). There is no race between the two: this event is
// stored (under its correlation's lock) before its cursor is read, and the
// event before moves the cursor and looks for it under the same lock, or
// after its commit on a skip, so one of them sees the other. An event the
// cursor is past ended already.
func (s *Starter) startWorkflow(ctx context.Context, ev store.Event) error {
	in := s.Input(ev)
	if in.Protocol == workflows.ProtocolLedger {
		c, err := s.store.CorrelationClaim(ctx, ev.CorrelationID, ev.Sequence, ev.ID)
		if err != nil || c.Next != ev.Sequence {
			return err // held for its predecessor's hand-off, or ended
		}
		in.ReleasedAtStart = &workflows.Release{Sequence: ev.Sequence, Skipped: c.Skipped}
	}
	_, err := s.execute(ctx, ev, in)
	return err
}

// StartReleased starts the workflow of an event of the ledger protocol that
// the ledger has just released, with the sequences skipped before it. A
// workflow that exists already is signalled its release instead, in case it
// was started waiting. Repeating it is harmless.
func (s *Starter) StartReleased(ctx context.Context, ev store.Event, skipped []int64) error {
	rel := workflows.Release{Sequence: ev.Sequence, Skipped: skipped}
	in := s.Input(ev)
	in.ReleasedAtStart = &rel
	existed, err := s.execute(ctx, ev, in)
	if err != nil || !existed {
		return err
	}
	return s.release(ctx, ev.ID, rel)
}

// execute starts the workflow with input in; existed reports that it was
// running already (a no-op).
func (s *Starter) execute(ctx context.Context, ev store.Event, in workflows.EventInput) (existed bool, err error) {
	opts := client.StartWorkflowOptions{
		ID:                       ev.ID,
		TaskQueue:                s.cfg.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		EnableEagerStart:         true,
		// Tell "it exists" apart (the SDK otherwise returns the running one).
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			activities.CorrelationIDKey.ValueSet(ev.CorrelationID),
			activities.SequenceKey.ValueSet(ev.Sequence),
			activities.DeliveryStateKey.ValueSet(store.StateWaiting),
		),
	}
	_, err = s.temporal.ExecuteWorkflow(ctx, opts, workflows.EventWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("start workflow for event %s: %w", ev.ID, err)
	}
	return false, nil
}

// release signals an event's workflow its release; a second release is
// ignored by the workflow, and one that has ended needs none.
func (s *Starter) release(ctx context.Context, id string, rel workflows.Release) error {
	err := s.temporal.SignalWorkflow(ctx, id, "", workflows.SignalRelease, rel)
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("release %s: %w", id, err)
	}
	return nil
}

// MissedReleaseAge is how long an event of the ledger protocol may wait
// after its correlation's cursor reached it before the sweep starts it.
const MissedReleaseAge = time.Minute

// Run sweeps for queued events until ctx is done, starting their workflows,
// and every MissedReleaseAge/2 for held events whose hand-off never came.
func (s *Starter) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	lastRelease := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("start queued events", "error", err, "started", n)
		} else if n > 0 {
			s.logger.Info("started queued events", "count", n)
		}
		if time.Since(lastRelease) < MissedReleaseAge/2 {
			continue
		}
		lastRelease = time.Now()
		n, err = s.ReleaseMissed(ctx, MissedReleaseAge)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("release waiting events", "error", err, "released", n)
		} else if n > 0 {
			s.logger.Warn("started held events whose hand-off never came", "count", n)
		}
	}
}

// ReleaseMissed starts, released, the events of the ledger protocol still
// waiting although their correlation's cursor reached them more than age
// ago, one batch, and returns how many. The event before normally starts
// them when it finishes; this is the safety net for a hand-off that never
// happened (the event before finished by a worker of an older release, or
// one that crashed after its commit and whose workflow was then reset), so
// no wait lasts forever.
func (s *Starter) ReleaseMissed(ctx context.Context, age time.Duration) (int, error) {
	missed, err := s.store.EventsMissedRelease(ctx, age, 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range missed {
		skipped, err := s.store.CorrelationSkippedTail(ctx, m.CorrelationID)
		if err != nil {
			return n, err
		}
		if err := s.StartReleased(ctx, m, skipped); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Sweep starts the workflows of events queued for longer than SweepMinAge,
// one batch, and returns how many it started.
func (s *Starter) Sweep(ctx context.Context) (int, error) {
	return s.store.EventsQueuedClaim(ctx, 100, s.cfg.SweepMinAge, s.startWorkflow)
}
