package starter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

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
// that have not moved for StuckAfter are looked at (SweepHeads). Every API
// process runs it; the ledger's leases share the work among them. The two
// sweeps run on their own, so a slow pass of one never holds up the other.
func (s *Starter) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.every(ctx, "start queued events", s.SweepQueued)
	}()
	go func() {
		defer wg.Done()
		s.every(ctx, "repair stuck correlations", s.SweepHeads)
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
	start := func(ctx context.Context, ev store.Event) (bool, error) { return true, s.Start(ctx, ev) }
	return s.eachRow(ctx, "start queued event", events, start, func(ctx context.Context, ev store.Event) error {
		return s.store.EventSweepDeferred(ctx, ev.ID)
	}), nil
}

// SweepHeads looks at the next event of every correlation that has not
// moved for StuckAfter, one batch, and repairs what an operator broke: a
// workflow that was terminated (or failed) is started again where the
// ledger says the event stands; a head whose workflow waits for a release
// it lost (its sequencer was reset or terminated, or the workflow was reset
// to before its release) makes the sequencer resync from the ledger, which
// releases it again; a dead letter whose replay or skip never reached its
// workflow is reopened for the operator. A head that is simply slow (a
// dead letter waiting for its operator, a retry waiting for its timer) is
// left as it is. Each head is looked at under its own deadline
// (RowTimeout); one that fails is logged and put at the back of the line,
// and the others go on. The error is the claim's.
func (s *Starter) SweepHeads(ctx context.Context) (SweepResult, error) {
	heads, err := s.store.EventsStuckHeadsClaim(ctx, sweepBatch, s.cfg.StuckAfter)
	if err != nil {
		return SweepResult{}, err
	}
	return s.eachRow(ctx, "repair stuck correlation", heads, s.repairHead, func(ctx context.Context, ev store.Event) error {
		return s.store.CorrelationSweepDeferred(ctx, ev.CorrelationID)
	}), nil
}

// eachRow runs do on every row of a claimed batch, each under its own
// deadline, so a sequencer that never answers costs its rows RowTimeout
// each, not the sweep. A row that fails is logged, counted and put at the
// back of its sweep's line (deferRow), so it cannot take the front of every
// batch; the others go on. The further rows of a correlation that failed
// are deferred without a call: what failed is most likely its sequencer,
// and each would wait out its deadline in turn.
func (s *Starter) eachRow(ctx context.Context, what string, rows []store.Event, do func(context.Context, store.Event) (bool, error), deferRow func(context.Context, store.Event) error) SweepResult {
	res := SweepResult{Claimed: len(rows)}
	failed := map[string]bool{}
	for _, ev := range rows {
		if ctx.Err() != nil {
			break
		}
		var err error
		if !failed[ev.CorrelationID] {
			rctx, cancel := context.WithTimeout(ctx, s.cfg.RowTimeout)
			var done bool
			done, err = do(rctx, ev)
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
			failed[ev.CorrelationID] = true
			s.logger.Warn(what+" failed; it goes to the back of the line", "event_id", ev.ID, "correlation_id", ev.CorrelationID, "error", err)
		}
		res.Failed++
		dctx, cancel := context.WithTimeout(ctx, s.cfg.RowTimeout)
		if err := deferRow(dctx, ev); err != nil {
			s.logger.Warn(what+": could not put it at the back of the line", "event_id", ev.ID, "correlation_id", ev.CorrelationID, "error", err)
		}
		cancel()
	}
	return res
}

func (s *Starter) repairHead(ctx context.Context, ev store.Event) (bool, error) {
	desc, err := s.temporal.DescribeWorkflowExecution(ctx, ev.ID, "")
	if err != nil && !isNotFound(err) {
		return false, err
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	switch {
	case err != nil:
		return true, s.restart(ctx, ev, "its workflow did not exist")
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		// It finished, and its ledger row says otherwise only until the
		// finisher's retry writes it: nothing to repair here.
		return false, nil
	case status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		what := strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_"))
		return true, s.restart(ctx, ev, "its workflow was "+what)
	case ev.State == contract.StateDeadLettered:
		return s.reopenLostClaim(ctx, ev)
	}
	waiting, err := s.awaitsRelease(ctx, ev)
	if err != nil || !waiting {
		return false, err
	}
	// It is the head, so the event before it is finished in the ledger: a
	// resync moves the sequencer up to the ledger's cursor (it only ever
	// moves forward) and releases it, or answers the release it made and
	// the workflow lost; either way the release is sent again, and it ends
	// a held workflow's start delay.
	s.logger.Warn("next event of a correlation waits for a release it will not get; resyncing its sequencer", "event_id", ev.ID, "correlation_id", ev.CorrelationID, "ledger_state", ev.State)
	return true, s.Resync(ctx, ev.CorrelationID)
}

// awaitsRelease reports whether the running workflow of head ev waits for
// its release. The ledger's waiting says so; its delivering does not say
// otherwise, since Reset takes a workflow back to before its release
// without touching the ledger, and a workflow started again by a sweep, a
// replay or a release (after Terminate) is held when its sequencer, reset,
// lost the release too. Then the workflow's state query answers; one that
// cannot answer because its first task is still put off (HeldStartDelay)
// was started held.
func (s *Starter) awaitsRelease(ctx context.Context, ev store.Event) (bool, error) {
	if ev.State == contract.StateWaiting {
		return true, nil
	}
	st, err := s.eventStatus(ctx, ev.ID)
	var notReady *serviceerror.WorkflowNotReady
	if errors.As(err, &notReady) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return st.State == contract.StateWaiting, nil
}

// eventStatus asks the event's workflow for its state.
func (s *Starter) eventStatus(ctx context.Context, id string) (contract.EventStatus, error) {
	var st contract.EventStatus
	v, err := s.temporal.QueryWorkflow(ctx, id, "", contract.QueryState)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// restart starts the workflow of an unfinished event again where the
// ledger has it (ledgerInput): waiting on its dead letter when it has one,
// released when it was, else through its sequencer as at acceptance (which
// answers whether it is released). It records why.
func (s *Starter) restart(ctx context.Context, ev store.Event, why string) error {
	s.logger.Warn("starting an event's workflow again", "event_id", ev.ID, "correlation_id", ev.CorrelationID, "reason", why)
	in, d, err := s.ledgerInput(ctx, ev)
	if err != nil {
		return err
	}
	if in.Released == nil {
		runID, err := s.start(ctx, ev)
		if err != nil {
			return err
		}
		return s.store.EventRestarted(ctx, ev.ID, why+"; started again", runID)
	}
	if err := s.reopenClaim(ctx, d); err != nil {
		return err
	}
	runID, err := s.execute(ctx, ev, in)
	if err != nil {
		return err
	}
	return s.store.EventRestarted(ctx, ev.ID, why+"; started again, "+startedAs(in), runID)
}

// reopenLostClaim reopens a dead letter that an operator replayed or
// skipped when its workflow still waits on it after StuckAfter: the signal
// never arrived (Temporal and the ledger failed together, so the API could
// not undo its claim).
func (s *Starter) reopenLostClaim(ctx context.Context, ev store.Event) (bool, error) {
	d, err := s.store.DeadLetterGet(ctx, ev.ID)
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
	st, err := s.eventStatus(ctx, ev.ID)
	if err != nil {
		return false, err
	}
	// A workflow that a Reset took back to an earlier dead letter (with the
	// claim's signal left out) waits too: it takes the signal of the later
	// generation an operator sends once the row is open again.
	if st.State != contract.StateDeadLettered || st.Generation > d.Generation {
		return false, nil
	}
	s.logger.Warn("reopening a dead letter whose replay or skip never reached its workflow", "event_id", ev.ID, "generation", d.Generation)
	return true, s.store.DeadLetterReopen(ctx, d.EventID, d.Generation)
}
