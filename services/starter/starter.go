// Package starter carries events between the ledger and Temporal. It makes
// an accepted event a workflow (its arrival at its correlation's sequencer,
// then its EventWorkflow, released or waiting as the sequencer answered),
// hands a finished event over to the sequencer and passes the release it
// answers on to the next event, and signals a dead letter's workflow for an
// operator. Its sweeps start what Temporal could not take when it was down
// and repair what an operator's Terminate or Reset in the Web UI broke, so
// no correlation stays blocked. An event's workflow ID is its key, so no
// start repeated after a crash ever duplicates one.
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

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/signalerr"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/workflows"
)

// Config tunes the starter.
type Config struct {
	TaskQueue       string
	RecoveryWindow  time.Duration
	DeliveryTimeout time.Duration
	// SweepInterval is how often the sweeps run (default 1 s).
	SweepInterval time.Duration
	// QueuedAfter leaves fresh events to the request that stored them: the
	// sweep starts events queued for longer (default 2 s).
	QueuedAfter time.Duration
	// StuckAfter is how long the next event of a correlation may go
	// unchanged before the sweep looks at its workflow and sequencer
	// (default 30 s), and how long it then leaves it alone.
	StuckAfter time.Duration
	// RowTimeout bounds what a sweep does for one event, every call to
	// Temporal and the ledger included (default DefaultRowTimeout).
	RowTimeout time.Duration
	// EventMaxHistory goes in every event workflow's input (MaxHistory):
	// the history length past which it continues as new (0: the
	// workflow's default).
	EventMaxHistory int
	// HandOverBatch goes in every event workflow's input likewise (0: the
	// workflow's default).
	HandOverBatch time.Duration
}

// Starter turns stored events into workflows and carries the sequencer's
// decisions to them.
type Starter struct {
	cfg      Config
	store    *store.Store
	temporal client.Client
	logger   *slog.Logger
	// sequencers bounds the updates in flight per sequencer.
	sequencers *gate
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
	if cfg.QueuedAfter <= 0 {
		cfg.QueuedAfter = 2 * time.Second
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 30 * time.Second
	}
	if cfg.RowTimeout <= 0 {
		cfg.RowTimeout = DefaultRowTimeout
	}
	return &Starter{cfg: cfg, store: st, temporal: c, logger: logger, sequencers: newGate(SequencerUpdatesInFlight)}, nil
}

// Tenant is the starter bound to tenant id: its ledger is the tenant's
// (store.Store.Tenant), and the workflows it starts and signals are the
// tenant's (contract.EventWorkflowID, contract.SequencerID). The sweeps
// bind one per row they take; the API and the activities one per call.
func (s *Starter) Tenant(id string) *Starter {
	c := *s
	c.store = s.store.Tenant(id)
	return &c
}

// tenant is the tenant the starter is bound to.
func (s *Starter) tenant() string { return s.store.TenantID() }

// workflowID is the workflow ID of the bound tenant's event id.
func (s *Starter) workflowID(id string) string { return contract.EventWorkflowID(s.tenant(), id) }

// Input builds the workflow input of a stored event, each of its lanes
// waiting for its release.
func (s *Starter) Input(ev store.Event) workflows.EventInput {
	in := workflows.EventInput{
		Event: contract.DeliverInput{
			Tenant: ev.TenantID, EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence,
			// No Data: the ledger has it, and Deliver reads it there, so
			// neither the workflow's input nor its activities' copy it.
			Type: ev.Type, Timestamp: ev.AcceptedAt, Timeout: s.cfg.DeliveryTimeout,
		},
		RecoveryWindow: s.cfg.RecoveryWindow,
		MaxHistory:     s.cfg.EventMaxHistory,
		HandOverBatch:  s.cfg.HandOverBatch,
	}
	routed := map[string]store.Delivery{}
	for _, d := range ev.Deliveries {
		routed[d.EndpointID] = d
	}
	for _, ep := range ev.Endpoints {
		in.Lanes = append(in.Lanes, laneInput(ep, routed[ep]))
	}
	return in
}

// laneInput is a lane waiting for its release, with the delivery settings
// its endpoint had when the event was routed (the ledger's; none: the
// server's).
func laneInput(endpoint string, d store.Delivery) workflows.LaneInput {
	return workflows.LaneInput{Endpoint: endpoint, RecoveryWindow: d.RecoveryWindow(), Timeout: d.Timeout()}
}

// ledgerInput rebuilds the workflow input of a stored event that is not
// finished from what the ledger holds, for a workflow started again (the
// sweep's restart, a release, an operator's signal to a workflow that is
// gone): the event, and a lane for each delivery not finished: released,
// with the lane's position, when the ledger has it released (delivering
// or dead-lettered: only the head of its lane can be, so the lane's
// position is what its release carried); waiting on its dead letter, when
// it is dead-lettered, with the replay or skip the ledger has claimed for
// it, which the new run carries out (the run it was signalled to ended
// first). A waiting lane gets no release: its sequencer gives it.
func (s *Starter) ledgerInput(ctx context.Context, ev store.Event) (workflows.EventInput, error) {
	in := s.Input(ev)
	in.Lanes = nil
	for _, d := range ev.Deliveries {
		if d.State.Final() {
			continue
		}
		li := laneInput(d.EndpointID, d)
		if d.State == contract.StateDelivering || d.State == contract.StateDeadLettered {
			r, err := s.store.LaneRelease(ctx, ev.CorrelationID, d.EndpointID, ev.Sequence)
			if err != nil {
				return in, err
			}
			li.Released = &r
		}
		if d.State == contract.StateDeadLettered {
			dl, err := s.store.DeadLetterGet(ctx, ev.ID, d.EndpointID)
			if err != nil {
				return in, err
			}
			li.DeadLetter = claimedDeadLetter(dl)
		}
		in.Lanes = append(in.Lanes, li)
	}
	return in, nil
}

// claimedDeadLetter is the dead letter d that a lane waits on, with the
// operator's action the ledger has claimed for it, if any.
func claimedDeadLetter(d store.DeadLetter) *workflows.DeadLetter {
	dl := &workflows.DeadLetter{Generation: d.Generation, Reason: d.Reason}
	switch d.Status {
	case store.DeadLetterReplayed:
		dl.Replay = &contract.Replay{EndpointID: d.EndpointID, Generation: d.Generation, By: deref(d.ReplayedBy)}
	case store.DeadLetterSkipped:
		dl.Skip = &contract.Skip{EndpointID: d.EndpointID, Generation: d.Generation, By: deref(d.SkippedBy), Note: deref(d.SkipNote)}
	}
	return dl
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// HeldStartDelay is how long the workflow of a held event waits before its
// first workflow task, unless its release comes first: the release is a
// signal-with-start, which ends the delay at once and delivers the release
// in that first task. A held event thus costs one workflow task, not two
// (one to start waiting and one to be released). One still held when the
// delay ends (its predecessor is slow, or dead-lettered) runs its first
// task then and waits for the release signal as any workflow would. It is
// the default recovery window: the time an event before it may take, and
// how long Temporal keeps the delay's timer.
const HeldStartDelay = 5 * time.Minute

// Start makes a stored event a workflow: it tells the event's sequencer it
// arrived (update-with-start, which starts the sequencer if it is not
// running), then starts the event's workflow with the answer, each lane
// released if it is next in its lane, waiting otherwise, passes on the
// releases of other events the arrival made possible, and marks the event
// started in the ledger. A repeat is harmless: the sequencer answers a
// repeated arrival as it did the first, and the workflow ID is the event's
// key.
func (s *Starter) Start(ctx context.Context, ev store.Event) error {
	s = s.Tenant(ev.TenantID) // the event's own
	runID, err := s.start(ctx, ev)
	if err != nil {
		return err
	}
	return s.store.EventMarkStarted(ctx, ev.ID, runID)
}

// start is Start without the ledger's mark; it returns the run it started
// ("" when the workflow existed, or the sequencer is past the event).
func (s *Starter) start(ctx context.Context, ev store.Event) (string, error) {
	ann, err := s.arrive(ctx, ev)
	if err != nil {
		return "", err
	}
	if ann.Finished && len(ev.Endpoints) > 0 {
		return s.startPast(ctx, ev)
	}
	// An event nobody subscribes to is finished on arrival, and still
	// becomes a workflow (with no lanes, it ends in its first task): every
	// accepted event is one.
	in := s.Input(ev)
	released := map[string]contract.LaneRelease{}
	for _, r := range ann.Released {
		released[r.Endpoint] = r
	}
	for i, l := range in.Lanes {
		if r, ok := released[l.Endpoint]; ok {
			in.Lanes[i].Released = &r
		}
	}
	run, err := s.execute(ctx, ev, in)
	if err != nil {
		return "", err
	}
	return run, s.releaseAll(ctx, ann.Handoffs)
}

// FinishedButOpenReason is the restart reason the ledger records for an
// event whose sequencer answered its arrival finished while the ledger held
// a delivery of it open (startPast).
const FinishedButOpenReason = "its sequencer answered its arrival as finished while the ledger holds it open; started all the same, waiting for its release"

// startPast is start for an event whose sequencer answered that every lane
// of it is past it. The sequencer learns of a finish only after the ledger
// has it, so the ledger has the last word: an event with every delivery
// delivered or skipped there ended already and needs no workflow. One with
// a delivery still open was left behind by a sequencer whose state lost
// track of a lane (it released a later event there first, or a Reset took
// it back): left without a workflow, it would stay waiting for good, and
// the heads sweep, which starts it through here, would get the same answer
// every time. It is started all the same where the ledger has it
// (ledgerInput: its open deliveries waiting for their release), the
// disagreement is logged and recorded as the event's restart, and the
// sequencer is made to resync from the ledger, which gives the lanes their
// open deliveries back; the ledger's backstop (store.AttemptStart.HeldBy)
// keeps a later event of the lane from going first meanwhile.
func (s *Starter) startPast(ctx context.Context, ev store.Event) (string, error) {
	cur, err := s.store.EventGet(ctx, ev.ID)
	if err != nil {
		return "", fmt.Errorf("start workflow for event %s: %w", ev.ID, err)
	}
	var open []string
	for _, d := range cur.Deliveries {
		if !d.State.Final() {
			open = append(open, d.EndpointID)
		}
	}
	if len(open) == 0 {
		return "", nil // its sequencer is past it: it ended already
	}
	s.logger.Warn("sequencer answered an arrival as finished while the ledger holds the event open; starting its workflow and resyncing the sequencer",
		"tenant_id", s.tenant(), "event_id", ev.ID, "correlation_id", ev.CorrelationID, "sequence", ev.Sequence, "open_endpoints", open)
	in, err := s.ledgerInput(ctx, cur)
	if err != nil {
		return "", fmt.Errorf("start workflow for event %s: %w", ev.ID, err)
	}
	run, err := s.execute(ctx, cur, in)
	if err != nil {
		return "", err
	}
	if run != "" {
		if err := s.store.EventRestarted(ctx, ev.ID, FinishedButOpenReason, run); err != nil {
			return run, err
		}
	}
	return run, s.resync(ctx, ev.CorrelationID)
}

func (s *Starter) arrive(ctx context.Context, ev store.Event) (contract.Announcement, error) {
	var ann contract.Announcement
	err := s.updateSequencer(ctx, ev.CorrelationID, contract.UpdateArrive, []any{contract.Arrival{Sequence: ev.Sequence, EventID: ev.ID, Endpoints: ev.Endpoints}}, &ann)
	return ann, err
}

// HandOver is Finished of the tenant's correlation: the activities'
// hand-over (activities.Sequencer), which names its tenant.
func (s *Starter) HandOver(ctx context.Context, tenant, correlationID string, d contract.Done) error {
	return s.Tenant(tenant).Finished(ctx, correlationID, d)
}

// Finished tells the correlation's sequencer that deliveries of its event
// are finished and releases what it names next in their lanes
// (activities.Sequencer). A sequencer that is not running (it was
// terminated) is started by it and loads the correlation from the ledger,
// where the finished deliveries are recorded already.
func (s *Starter) Finished(ctx context.Context, correlationID string, d contract.Done) error {
	var h contract.Handoffs
	if err := s.updateSequencer(ctx, correlationID, contract.UpdateFinished, []any{d}, &h); err != nil {
		return err
	}
	return s.releaseAll(ctx, h.Handoffs)
}

// Resync makes the correlation's sequencer merge the ledger into its state
// and passes on the releases it answers: every lane's in flight.
func (s *Starter) Resync(ctx context.Context, tenant, correlationID string) error {
	return s.Tenant(tenant).resync(ctx, correlationID)
}

func (s *Starter) resync(ctx context.Context, correlationID string) error {
	var h contract.Handoffs
	if err := s.updateSequencer(ctx, correlationID, contract.UpdateResync, nil, &h); err != nil {
		return err
	}
	return s.releaseAll(ctx, h.Handoffs)
}

// releaseAll passes each release on, and returns the first error after
// trying them all: one event's trouble holds back no other's release.
func (s *Starter) releaseAll(ctx context.Context, hs []contract.Handoff) error {
	var first error
	for _, h := range hs {
		if err := s.release(ctx, h); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// updateSequencer sends an update to the correlation's sequencer, starting
// it when it is not running, and decodes the answer into out.
func (s *Starter) updateSequencer(ctx context.Context, correlationID, update string, args []any, out any) error {
	id := contract.SequencerID(s.tenant(), correlationID)
	done, err := s.sequencers.enter(ctx, id)
	if err != nil {
		return fmt.Errorf("%s update to sequencer of %s: %w", update, correlationID, err)
	}
	defer done()
	start := s.temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                contract.SequencerTaskQueue(s.cfg.TaskQueue),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes: temporal.NewSearchAttributes(contract.TenantIDKey.ValueSet(s.tenant()),
			contract.CorrelationIDKey.ValueSet(correlationID)),
	}, contract.SequencerWorkflow, workflows.SequencerInput{Tenant: s.tenant(), CorrelationID: correlationID})
	h, err := s.temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: update, Args: args, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, out)
	}
	if err != nil {
		return fmt.Errorf("%s update to sequencer of %s: %w", update, correlationID, err)
	}
	return nil
}

// release passes a sequencer's release on to the event it names, by the
// release signal, sent with signal-with-start: it ends a held workflow's
// start delay (HeldStartDelay) at once, and starts the workflow again if it
// is not running (an operator terminated it while it waited); one that
// completed is left alone. A second release is ignored by its receiver, so
// a repeat is harmless.
func (s *Starter) release(ctx context.Context, h contract.Handoff) error {
	if h.EventID == "" {
		return nil
	}
	ev, err := s.store.EventGet(ctx, h.EventID)
	if err != nil {
		return fmt.Errorf("release %s: %w", h.EventID, err)
	}
	if ev.State.Final() {
		return nil
	}
	// A workflow that is gone starts again where the ledger has the event:
	// one that was released or dead-lettered already ignores the release.
	in, err := s.ledgerInput(ctx, ev)
	if err != nil {
		return fmt.Errorf("release %s: %w", h.EventID, err)
	}
	run, err := s.temporal.SignalWithStartWorkflow(ctx, s.workflowID(ev.ID), contract.SignalRelease, h.Release,
		s.signalStartOptions(ev, in), contract.EventWorkflow, in)
	if isAlreadyStarted(err) {
		return nil // its last run completed
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", h.EventID, err)
	}
	if ev.RunID == nil || *ev.RunID == run.GetRunID() || s.continuedFrom(ctx, s.workflowID(ev.ID), run.GetRunID(), *ev.RunID) {
		return nil
	}
	return s.store.EventRestarted(ctx, ev.ID, "its workflow had ended before its release; started again, "+startedAs(in), run.GetRunID())
}

// continuedFrom reports whether run of workflow id is the one the ledger
// names (first) continued as new, not a run started again: an event's
// workflow continues as new when its history grows long, and its run ID
// changes without a restart. Unknown (the describe failed) counts as a
// restart, as before continue-as-new existed.
func (s *Starter) continuedFrom(ctx context.Context, id, run, first string) bool {
	desc, err := s.temporal.DescribeWorkflowExecution(ctx, id, run)
	return err == nil && desc.GetWorkflowExecutionInfo().GetFirstRunId() == first
}

// startedAs says, for a restart's record, how a workflow started with input
// in begins.
func startedAs(in workflows.EventInput) string {
	var dead, released, waiting int
	for _, l := range in.Lanes {
		switch {
		case l.DeadLetter != nil:
			dead++
		case l.Released != nil:
			released++
		default:
			waiting++
		}
	}
	if len(in.Lanes) == 1 {
		switch {
		case dead == 1:
			return "waiting on its dead letter"
		case released == 1:
			return "released"
		}
		return "waiting for its release"
	}
	return fmt.Sprintf("%d deliveries waiting on a dead letter, %d released, %d waiting for their release", dead, released, waiting)
}

// stateOf is the DeliveryState a workflow started with input in begins in,
// and the endpoints whose delivery waits on a dead letter.
func stateOf(in workflows.EventInput) (contract.State, []string) {
	states := make([]contract.State, 0, len(in.Lanes))
	var dead []string
	for _, l := range in.Lanes {
		switch {
		case l.DeadLetter != nil:
			states = append(states, contract.StateDeadLettered)
			dead = append(dead, l.Endpoint)
		case l.Released != nil:
			states = append(states, contract.StateDelivering)
		default:
			states = append(states, contract.StateWaiting)
		}
	}
	return contract.Aggregate(states), dead
}

// startOptions start an event's workflow: its ID is the key, a completed
// run is never repeated (a failed or terminated one may be started again),
// and the search attributes the Web UI filters on are set at once. A held
// (waiting) event's first task is put off until its release
// (HeldStartDelay).
func (s *Starter) startOptions(ev store.Event, in workflows.EventInput) client.StartWorkflowOptions {
	state, dead := stateOf(in)
	attrs := []temporal.SearchAttributeUpdate{
		contract.TenantIDKey.ValueSet(s.tenant()),
		contract.CorrelationIDKey.ValueSet(ev.CorrelationID),
		contract.SequenceKey.ValueSet(ev.Sequence),
		contract.DeliveryStateKey.ValueSet(string(state)),
	}
	if ids, dropped := contract.FitKeywordList(ev.Endpoints); len(ids) > 0 {
		if dropped > 0 {
			s.logger.Warn("event routed to more endpoints than its EndpointIds search attribute holds; the Web UI's filter finds it by the first only",
				"event_id", ev.ID, "endpoints", len(ev.Endpoints), "left_out", dropped)
		}
		attrs = append(attrs, contract.EndpointIDsKey.ValueSet(ids))
	}
	if ids, _ := contract.FitKeywordList(dead); len(ids) > 0 {
		attrs = append(attrs, contract.DeadLetteredEndpointIDsKey.ValueSet(ids))
	}
	opts := client.StartWorkflowOptions{
		ID:                       s.workflowID(ev.ID),
		TaskQueue:                s.cfg.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// The first task runs on this process's worker when it has one
		// (hookflow dev), without a round trip through matching.
		EnableEagerStart: true,
		// Tell "it exists" apart (the SDK otherwise returns the running one).
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(attrs...),
	}
	if state == contract.StateWaiting {
		opts.StartDelay, opts.EnableEagerStart = HeldStartDelay, false
	}
	return opts
}

// signalStartOptions are startOptions for a signal-with-start, which
// signals the running workflow rather than failing on it.
func (s *Starter) signalStartOptions(ev store.Event, in workflows.EventInput) client.StartWorkflowOptions {
	opts := s.startOptions(ev, in)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	opts.WorkflowExecutionErrorWhenAlreadyStarted = false
	opts.EnableEagerStart, opts.StartDelay = false, 0
	return opts
}

// execute starts the event's workflow with input in and returns the run it
// started; "" when the workflow was running (or completed) already, which
// is not an error.
func (s *Starter) execute(ctx context.Context, ev store.Event, in workflows.EventInput) (string, error) {
	run, err := s.temporal.ExecuteWorkflow(ctx, s.startOptions(ev, in), contract.EventWorkflow, in)
	if isAlreadyStarted(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("start workflow for event %s: %w", ev.ID, err)
	}
	return run.GetRunID(), nil
}

// SignalDeadLetter sends an operator's replay or skip (signal, with arg) to
// the workflow of the dead letter d. A workflow that is not running although
// its event is not finished (an operator terminated it) is started again,
// waiting on that dead letter, with the signal. ended reports an event whose
// workflow completed: it is delivered or skipped, and nothing was sent. An
// error for which signalerr.NotSent is false may come after the signal
// arrived.
func (s *Starter) SignalDeadLetter(ctx context.Context, d store.DeadLetter, signal string, arg any) (ended bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, signalerr.BeforeSend(err)
	}
	s = s.Tenant(d.TenantID) // the dead letter's own
	err = s.temporal.SignalWorkflow(ctx, s.workflowID(d.EventID), "", signal, arg)
	if !isNotFound(err) {
		return false, err
	}
	// No workflow took the signal; until the SignalWithStart below, nothing
	// was sent.
	ev, err := s.store.EventGet(ctx, d.EventID)
	if err != nil {
		return false, signalerr.BeforeSend(err)
	}
	if ev.State.Final() {
		return true, nil
	}
	in, err := s.ledgerInput(ctx, ev)
	if err != nil {
		return false, signalerr.BeforeSend(err)
	}
	// The operator acts on this dead letter, whose claim the caller holds.
	for i, l := range in.Lanes {
		if l.Endpoint == d.EndpointID {
			in.Lanes[i].DeadLetter = &workflows.DeadLetter{Generation: d.Generation, Reason: d.Reason}
		}
	}
	run, err := s.temporal.SignalWithStartWorkflow(ctx, s.workflowID(ev.ID), signal, arg, s.signalStartOptions(ev, in), contract.EventWorkflow, in)
	if isAlreadyStarted(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, s.store.EventRestarted(ctx, ev.ID, "its workflow had ended while dead-lettered; started again by an operator's "+signal, run.GetRunID())
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func isAlreadyStarted(err error) bool {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &started)
}
