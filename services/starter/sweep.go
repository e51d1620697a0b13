package starter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// sweepBatch bounds the events one sweep takes in hand.
const sweepBatch = 100

// DefaultRowTimeout is Config.RowTimeout's default: well above what a
// sequencer that works takes to answer a sweep, even under a backlog, and
// short enough that one that never answers (its tasks keep failing) costs
// a pass of the sweep little; its rows are tried again a lease later.
const DefaultRowTimeout = 10 * time.Second

// SweepResult is what one pass of a sweep did with the rows it claimed.
type SweepResult struct {
	// Claimed rows were taken in hand (leased) by the pass.
	Claimed int
	// Done were started (SweepQueued) or repaired (SweepHeads).
	Done int
	// Failed rows ran into an error or their deadline (RowTimeout), or
	// belong to a correlation that did in this pass; each was put at the
	// back of its sweep's line.
	Failed int
}

// Run runs the sweeps every SweepInterval until ctx is done: queued events
// are started (Temporal was unavailable when they were accepted), and heads
// that have not moved for StuckAfter are looked at (SweepHeads), and the
// dead letters of an outage whose circuit closed are auto-replayed
// (SweepAutoReplay), and the lanes a closed circuit held are told
// (SweepCircuitWake), and the dead letters of deleted endpoints are skipped
// (SweepDeletedEndpoints). Every API
// process runs it; the ledger's leases share the work among them (two
// processes may both wake a circuit's lanes: a lane takes a repeated wake
// as one more look). The sweeps run on their own, so a slow pass of one
// never holds up another.
func (s *Starter) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(5)
	go func() {
		defer wg.Done()
		s.every(ctx, "start queued events", s.SweepQueued)
	}()
	go func() {
		defer wg.Done()
		s.every(ctx, "repair stuck correlations", s.SweepHeads)
	}()
	go func() {
		defer wg.Done()
		s.every(ctx, "auto-replay outages' dead letters", s.SweepAutoReplay)
	}()
	go func() {
		defer wg.Done()
		s.every(ctx, "wake the lanes of closed circuits", s.SweepCircuitWake)
	}()
	go func() {
		defer wg.Done()
		s.every(ctx, "skip deleted endpoints' dead letters", s.SweepDeletedEndpoints)
	}()
	wg.Wait()
}

func (s *Starter) every(ctx context.Context, what string, sweep func(context.Context) (SweepResult, error)) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := sweep(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.logger.Warn(what, "error", err)
		case res.Failed > 0:
			s.logger.Warn(what, "claimed", res.Claimed, "done", res.Done, "failed", res.Failed)
		case res.Done > 0:
			s.logger.Info(what, "claimed", res.Claimed, "done", res.Done)
		}
	}
}

// SweepQueued starts the workflows of events queued for longer than
// QueuedAfter, one batch. It takes the batch in a statement of its own and
// calls Temporal with no transaction open, each event under its own
// deadline (RowTimeout). An event that fails is logged and put at the back
// of the line, and the others go on. The error is the claim's.
func (s *Starter) SweepQueued(ctx context.Context) (SweepResult, error) {
	events, err := s.store.EventsQueuedClaim(ctx, sweepBatch, s.cfg.QueuedAfter)
	if err != nil {
		return SweepResult{}, err
	}
	// The claim spans tenants: each event is started as its tenant's.
	start := func(ctx context.Context, ev store.Event) (bool, error) {
		return true, s.Tenant(ev.TenantID).Start(ctx, ev)
	}
	return eachRow(ctx, s, "start queued event", events, func(ev store.Event) store.Event { return ev }, start, func(ctx context.Context, ev store.Event) error {
		return s.store.Tenant(ev.TenantID).EventSweepDeferred(ctx, ev.ID)
	}), nil
}

// SweepHeads looks at the head of every lane (the delivery next in it) of
// every correlation that has not moved for StuckAfter, one batch, and
// repairs what an operator broke: a
// workflow that was terminated (or failed) is started again where the
// ledger says the event stands; a head whose workflow waits for a release
// it lost (its sequencer was reset or terminated, or the workflow was reset
// to before its release) makes the sequencer resync from the ledger, which
// releases it again; a replay or skip of a dead letter that never reached
// its workflow is sent again. A head that is simply slow (a
// dead letter waiting for its operator, a retry waiting for its timer) is
// left as it is. Each head is looked at under its own deadline
// (RowTimeout); one that fails is logged and put at the back of the line,
// and the others go on. The error is the claim's.
func (s *Starter) SweepHeads(ctx context.Context) (SweepResult, error) {
	heads, err := s.store.LanesStuckHeadsClaim(ctx, sweepBatch, s.cfg.StuckAfter)
	if err != nil {
		return SweepResult{}, err
	}
	// An event that heads several lanes is started again once.
	restarted := map[string]bool{}
	repair := func(ctx context.Context, h store.StuckHead) (bool, error) {
		id := contract.EventWorkflowID(h.Event.TenantID, h.Event.ID)
		if restarted[id] {
			return false, nil
		}
		// The claim spans tenants: each head is repaired as its tenant's.
		done, restart, err := s.Tenant(h.Event.TenantID).repairHead(ctx, h)
		if restart {
			restarted[id] = true
		}
		return done, err
	}
	return eachRow(ctx, s, "repair stuck lane", heads, func(h store.StuckHead) store.Event { return h.Event }, repair, func(ctx context.Context, h store.StuckHead) error {
		return s.store.Tenant(h.Event.TenantID).CorrelationSweepDeferred(ctx, h.Event.CorrelationID)
	}), nil
}

// eachRow runs do on every row of a claimed batch, each under its own
// deadline, so a sequencer that never answers costs its rows RowTimeout
// each, not the sweep. A row that fails is logged, counted and put at the
// back of its sweep's line (deferRow), so it cannot take the front of every
// batch; the others go on. The further rows of a correlation that failed
// are deferred without a call: what failed is most likely its sequencer,
// and each would wait out its deadline in turn.
func eachRow[T any](ctx context.Context, s *Starter, what string, rows []T, eventOf func(T) store.Event, do func(context.Context, T) (bool, error), deferRow func(context.Context, T) error) SweepResult {
	res := SweepResult{Claimed: len(rows)}
	failed := map[string]bool{}
	for _, row := range rows {
		if ctx.Err() != nil {
			break
		}
		ev := eventOf(row)
		corr := contract.SequencerID(ev.TenantID, ev.CorrelationID)
		var err error
		if !failed[corr] {
			rctx, cancel := context.WithTimeout(ctx, s.cfg.RowTimeout)
			var done bool
			done, err = do(rctx, row)
			cancel()
			if err == nil {
				if done {
					res.Done++
				}
				continue
			}
			if ctx.Err() != nil {
				break
			}
			failed[corr] = true
			s.logger.Warn(what+" failed; it goes to the back of the line", "tenant_id", ev.TenantID, "event_id", ev.ID, "correlation_id", ev.CorrelationID, "error", err)
		}
		res.Failed++
		dctx, cancel := context.WithTimeout(ctx, s.cfg.RowTimeout)
		if err := deferRow(dctx, row); err != nil {
			s.logger.Warn(what+": could not put it at the back of the line", "tenant_id", ev.TenantID, "event_id", ev.ID, "correlation_id", ev.CorrelationID, "error", err)
		}
		cancel()
	}
	return res
}

// repairHead repairs the head of one lane (SweepHeads), and reports
// whether it started the event's workflow again.
func (s *Starter) repairHead(ctx context.Context, h store.StuckHead) (done, restarted bool, err error) {
	ev := h.Event
	desc, err := s.temporal.DescribeWorkflowExecution(ctx, s.workflowID(ev.ID), "")
	if err != nil && !isNotFound(err) {
		return false, false, err
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	switch {
	case err != nil:
		return true, true, s.restart(ctx, ev, "its workflow did not exist")
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		// It finished, and its ledger row says otherwise only until the
		// finisher's retry writes it: nothing to repair here.
		return false, false, nil
	case status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		what := strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_"))
		return true, true, s.restart(ctx, ev, "its workflow was "+what)
	case h.State == contract.StateDeadLettered && namesDeadLetter(desc, h.EndpointID):
		// The workflow waits on the dead letter too: only an operator's
		// action can have been lost.
		done, err := s.resendLostClaim(ctx, h)
		return done, false, err
	}
	lane, err := s.headLane(ctx, h)
	if err != nil {
		return false, false, err
	}
	switch lane {
	case contract.StateDeadLettered:
		// The ledger has it delivering, a replay carried out, but a Reset
		// (signals left out) took the workflow back to waiting on the dead
		// letter; or it has it dead-lettered, and the dead letter is one the
		// workflow's search attributes do not name (they had no room).
		done, err := s.resendLostClaim(ctx, h)
		return done, false, err
	case contract.StateWaiting:
	default:
		return false, false, nil
	}
	// It is the head of its lane, so every earlier delivery in the lane is
	// finished in the ledger: a resync moves the sequencer up to the
	// ledger (it only ever moves forward) and releases it, or answers the
	// release it made and the workflow lost; either way the release is sent
	// again, and it ends a held workflow's start delay. A head the ledger
	// has dead-lettered (a Reset took its workflow back to before its
	// release) is released into its dead letter: its delivery finds it in
	// the ledger and waits on it, or carries out the replay claimed on it.
	s.logger.Warn("head of a lane waits for a release it will not get; resyncing its sequencer", "event_id", ev.ID, "endpoint_id", h.EndpointID, "correlation_id", ev.CorrelationID, "ledger_state", h.State)
	return true, false, s.resync(ctx, ev.CorrelationID)
}

// namesDeadLetter reports whether the running workflow desc describes
// says, in its DeadLetteredEndpointIds, that its delivery to endpoint waits
// on a dead letter. It answers from the description the sweep has already,
// so a dead letter waiting for its operator costs no query at each pass;
// one it does not name (a Reset took the workflow back to before its dead
// letter, or the list had no room) is asked about (headLane).
func namesDeadLetter(desc *workflowservice.DescribeWorkflowExecutionResponse, endpoint string) bool {
	p := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[contract.DeadLetteredEndpointIDsKey.GetName()]
	var ids []string
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &ids) != nil {
		return false
	}
	return slices.Contains(ids, endpoint)
}

// headLane is the state of head h's lane as its running workflow has it:
// waiting when it waits for its lane's release. The ledger's waiting says
// so; its delivering or dead-lettered does not say otherwise, since Reset
// takes a workflow back to before its release (or to waiting on a dead
// letter a replay had ended) without touching the ledger, and a workflow
// started again by a sweep, a replay or a release (after Terminate) is
// held when its sequencer, reset, lost the release too. Then the
// workflow's state query answers; one that cannot answer because its first
// task is still put off (HeldStartDelay) was started held.
func (s *Starter) headLane(ctx context.Context, h store.StuckHead) (contract.State, error) {
	if h.State == contract.StateWaiting {
		return contract.StateWaiting, nil
	}
	st, err := s.eventStatus(ctx, h.Event.ID)
	var notReady *serviceerror.WorkflowNotReady
	if errors.As(err, &notReady) {
		return contract.StateWaiting, nil
	}
	if err != nil {
		return "", err
	}
	l, ok := st.Lane(h.EndpointID)
	if !ok {
		return "", nil
	}
	return l.State, nil
}

// eventStatus asks the event's workflow for its state.
func (s *Starter) eventStatus(ctx context.Context, id string) (contract.EventStatus, error) {
	var st contract.EventStatus
	v, err := s.temporal.QueryWorkflow(ctx, s.workflowID(id), "", contract.QueryState)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// restart starts the workflow of an unfinished event again where the
// ledger has it (ledgerInput): each delivery waiting on its dead letter
// when it has one, released when it was; an event none of whose deliveries
// was released goes through its sequencer as at acceptance (which answers
// what is released). It records why.
func (s *Starter) restart(ctx context.Context, ev store.Event, why string) error {
	s.logger.Warn("starting an event's workflow again", "event_id", ev.ID, "correlation_id", ev.CorrelationID, "reason", why)
	in, err := s.ledgerInput(ctx, ev)
	if err != nil {
		return err
	}
	released := false
	for _, l := range in.Lanes {
		released = released || l.Released != nil
	}
	if !released {
		runID, err := s.start(ctx, ev)
		if err != nil {
			return err
		}
		return s.store.EventRestarted(ctx, ev.ID, why+"; started again", runID)
	}
	runID, err := s.execute(ctx, ev, in)
	if err != nil {
		return err
	}
	// Recorded before the resync, whose releases compare the ledger's run
	// with the one they signal.
	if err := s.store.EventRestarted(ctx, ev.ID, why+"; started again, "+startedAs(in), runID); err != nil {
		return err
	}
	// Lanes the ledger has waiting get their release from the sequencer.
	return s.resync(ctx, ev.CorrelationID)
}

// resendLostClaim sends again the replay or skip that an operator was
// answered 202 for when its delivery still waits on the dead letter after
// StuckAfter: its signal never arrived (Temporal and the ledger failed
// together, so the API could not undo its claim), or a Reset dropped it. A
// repeat is harmless: the workflow acts on a generation once, and the claim
// on the row (which this very action holds) lets it.
func (s *Starter) resendLostClaim(ctx context.Context, h store.StuckHead) (bool, error) {
	d, err := s.store.DeadLetterGet(ctx, h.Event.ID, h.EndpointID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.Status == store.DeadLetterOpen) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	claimed := d.ReplayedAt
	if d.Status == store.DeadLetterSkipped {
		claimed = d.SkippedAt
	}
	if claimed == nil || time.Since(*claimed) < s.cfg.StuckAfter {
		return false, nil // the workflow may not have got to it yet
	}
	st, err := s.eventStatus(ctx, h.Event.ID)
	if err != nil {
		return false, err
	}
	// A workflow that a Reset took back to an earlier dead letter (with the
	// claim's signal left out) waits too: the claim names a later
	// generation, which it takes.
	l, ok := st.Lane(h.EndpointID)
	if !ok || l.State != contract.StateDeadLettered || l.Generation > d.Generation {
		return false, nil
	}
	s.logger.Warn("sending again a replay or skip that never reached its workflow", "event_id", h.Event.ID, "endpoint_id", h.EndpointID, "generation", d.Generation, "action", d.Status)
	dl := claimedDeadLetter(d)
	if dl.Replay != nil {
		return true, s.temporal.SignalWorkflow(ctx, s.workflowID(d.EventID), "", contract.SignalReplay, *dl.Replay)
	}
	return true, s.temporal.SignalWorkflow(ctx, s.workflowID(d.EventID), "", contract.SignalSkip, *dl.Skip)
}
