package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
)

// EventInput is an accepted event and the delivery settings fixed at
// acceptance.
type EventInput struct {
	Event contract.DeliverInput `json:"event"`
	// RecoveryWindow is how long delivery is retried, counted from release.
	RecoveryWindow time.Duration `json:"recovery_window"`
	// Released is the sequencer's release when it came in its answer to the
	// event's arrival (the event was next, nothing was in flight), or as the
	// ledger mirrors it when the workflow of a released event is started
	// again; nil: the event waits for the release signal.
	Released *contract.Release `json:"released,omitempty"`
	// DeadLetter is set when the workflow of a dead-lettered event is
	// started again (an operator terminated it): it waits for a replay or
	// skip of that dead letter first.
	DeadLetter *DeadLetter `json:"dead_letter,omitempty"`
}

// DeadLetter is the dead letter an event's workflow waits on.
type DeadLetter struct {
	Generation int32  `json:"generation"`
	Reason     string `json:"reason,omitempty"`
}

// EventResult is how the event ended.
type EventResult struct {
	State    contract.State `json:"state"`
	Attempts int32          `json:"attempts"`
}

// DeliverOptions are the activity options of one delivery window: retry at
// about 0, 1, 5, 21, 85 s…, every attempt within the window counted from
// release, each attempt bounded a little above the HTTP timeout.
func DeliverOptions(window, httpTimeout time.Duration) workflow.ActivityOptions {
	if httpTimeout <= 0 {
		httpTimeout = 15 * time.Second
	}
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: window,
		StartToCloseTimeout:    httpTimeout + 10*time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 4,
			// The window, not a fixed cap, ends the retries: the attempt after
			// 85 s would come at 341 s, past a 5-minute window. Temporal
			// refuses a maximum below the initial interval.
			MaximumInterval: max(window, time.Second),
			NonRetryableErrorTypes: []string{
				contract.ErrTypePermanent, contract.ErrTypeEndpointGone, contract.ErrTypeEndpointDisabled,
			},
		},
	}
}

// ledgerOptions are for writes to hookflow's own Postgres: they retry until
// they succeed, because losing one (a dead letter above all) is not an option.
func ledgerOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	}
}

// localOptions are for the local activities that talk to the ledger or to
// Temporal (a sequencer's load, a hand-over to it): they retry through an
// outage of either for as long as it lasts, because giving up would strand
// the correlation. Each try may wait a while: under a backlog a sequencer's
// task can take time to come round, and a retry only attaches to the same
// update again.
// Each call returns its own RetryPolicy, so no caller can change another's.
func localOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 30 * 24 * time.Hour,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	}
}

// FirstAttemptOptions are the local activity options of a window's first
// attempt: one try, bounded a little above the HTTP timeout (the hand-over
// to the sequencer that follows a delivery has its own bound inside).
func FirstAttemptOptions(httpTimeout time.Duration) workflow.LocalActivityOptions {
	if httpTimeout <= 0 {
		httpTimeout = 15 * time.Second
	}
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: httpTimeout + 10*time.Second,
		StartToCloseTimeout:    httpTimeout + 10*time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

// EventWorkflow delivers one event in its correlation's order. It exists
// from the moment the event is accepted (the API starts it), waits for its
// sequencer's release (in its input when the event was next, else the
// release signal), delivers within the recovery window, and hands over to
// the sequencer when done (the delivering attempt does, which releases the
// successor). When delivery gives up it writes a dead letter and waits for
// an operator's replay or skip of it; the sequencer stays gated on it
// meanwhile, so order is never broken silently.
func EventWorkflow(ctx workflow.Context, in EventInput) (EventResult, error) {
	w := &eventRun{ctx: ctx, in: in, ev: in.Event, logger: workflow.GetLogger(ctx)}
	w.status.State = contract.StateWaiting
	if in.Released != nil {
		w.status.State = contract.StateDelivering
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueryState, func() (contract.EventStatus, error) { return w.status, nil }); err != nil {
		return EventResult{}, err
	}
	// CorrelationId, Sequence and DeliveryState are set at start (starter),
	// which costs no history event.
	var gen int32
	if in.Released != nil {
		w.ev.Skipped, w.ev.Previous = in.Released.Skipped, in.Released.Previous()
	}
	switch {
	case in.DeadLetter != nil:
		// Started again on its dead letter (from the ledger, by the starter):
		// released before, with the skipped sequences the replay still owes
		// the receiver.
		gen = in.DeadLetter.Generation
		w.status = contract.EventStatus{State: contract.StateDeadLettered, Generation: gen, Reason: in.DeadLetter.Reason}
	case in.Released != nil:
	default:
		var rel contract.Release
		workflow.GetSignalChannel(ctx, contract.SignalRelease).Receive(ctx, &rel)
		w.ev.Skipped, w.ev.Previous = rel.Skipped, rel.Previous()
	}

	ledger := workflow.WithActivityOptions(ctx, ledgerOptions())
	for {
		if gen == 0 {
			res, err := w.deliverWindow()
			switch {
			case err == nil && res.Skipped:
				return w.foundFinished(contract.StateSkipped)
			case err == nil && res.DeadLettered > 0:
				// Reset to before its dead letter: it waits on it again.
				gen = res.DeadLettered
				w.status.Generation = gen
				w.setState(contract.StateDeadLettered)
			case err == nil:
				return w.delivered(res)
			default:
				var finished contract.State
				if gen, finished, err = w.deadLetter(err); err != nil {
					return EventResult{}, err
				}
				if finished != "" {
					return w.foundFinished(finished)
				}
			}
		}
		replay, skip, err := w.awaitOperator(gen)
		if err != nil {
			return EventResult{}, err
		}
		if replay != nil {
			gen = replay.Generation
		} else {
			gen = skip.Generation
		}
		w.status.Generation = gen
		// The claim on the dead letter row decides between an API call and a
		// signal sent by hand: an action that lost it takes no effect, and
		// the workflow waits for the one that won (the API signals it).
		var claim contract.OperatorResult
		if skip != nil {
			in := contract.SkipInput{EventID: w.ev.EventID, CorrelationID: w.ev.CorrelationID, Sequence: w.ev.Sequence, Generation: gen, By: skip.By, Note: skip.Note}
			if err := workflow.ExecuteActivity(ledger, contract.ActivitySkip, in).Get(ctx, &claim); err != nil {
				return EventResult{}, fmt.Errorf("record skip: %w", err)
			}
			if claim.Lost != "" {
				w.logger.Warn("skip not taken: the dead letter was claimed otherwise first", "generation", gen, "claimed", claim.Lost)
				if claim.Generation > 0 {
					gen, w.status.Generation = claim.Generation, claim.Generation // the ledger's
				}
				continue
			}
			w.setState(contract.StateSkipped)
			return EventResult{State: contract.StateSkipped}, nil
		}
		rin := contract.ReplayedInput{EventID: w.ev.EventID, Generation: gen, By: replay.By}
		if err := workflow.ExecuteActivity(ledger, contract.ActivityReplayed, rin).Get(ctx, &claim); err != nil {
			return EventResult{}, fmt.Errorf("record replay: %w", err)
		}
		if claim.Lost != "" {
			w.logger.Warn("replay not taken: the dead letter was claimed otherwise first", "generation", gen, "claimed", claim.Lost)
			if claim.Generation > 0 {
				gen, w.status.Generation = claim.Generation, claim.Generation // the ledger's
			}
			continue
		}
		gen = 0
		w.status.Generation, w.status.Reason = 0, ""
		w.setState(contract.StateDelivering)
	}
}

// eventRun is one EventWorkflow's state.
type eventRun struct {
	ctx    workflow.Context
	in     EventInput
	ev     contract.DeliverInput
	logger interface {
		Warn(string, ...any)
		Info(string, ...any)
	}
	status contract.EventStatus
	// windowStart is when the current delivery window began.
	windowStart time.Time
	// windows counts the delivery windows of this run; with the run's ID it
	// names the window a dead letter ends.
	windows int
}

// setState records the state for the query and the DeliveryState search
// attribute the Web UI filters on.
func (w *eventRun) setState(s contract.State) {
	if w.status.State == s {
		return
	}
	w.status.State = s
	if err := workflow.UpsertTypedSearchAttributes(w.ctx, contract.DeliveryStateKey.ValueSet(string(s))); err != nil {
		w.logger.Warn("upsert search attributes", "error", err)
	}
}

// delivered ends the workflow of a delivered event. The delivering attempt
// handed the event over to its sequencer unless that failed: then it is
// repeated until it succeeds.
func (w *eventRun) delivered(res contract.DeliverResult) (EventResult, error) {
	w.setState(contract.StateDelivered)
	if res.HandOffPending {
		if err := w.handOver(false); err != nil {
			return EventResult{}, err
		}
	}
	return EventResult{State: contract.StateDelivered, Attempts: res.Attempt}, nil
}

// foundFinished ends the workflow of an event the ledger has as finished
// although its delivery seemed to fail: the delivering attempt's result
// never reached the workflow. Its hand-over may not have happened either,
// so it is made again (a repeat is harmless).
func (w *eventRun) foundFinished(state contract.State) (EventResult, error) {
	w.logger.Warn("the ledger has the event as finished; not dead-lettering it", "state", state)
	w.setState(state)
	if err := w.handOver(state == contract.StateSkipped); err != nil {
		return EventResult{}, err
	}
	return EventResult{State: state}, nil
}

// handOver tells the sequencer that the event is finished (Finish), until
// it succeeds.
func (w *eventRun) handOver(skipped bool) error {
	in := contract.FinishInput{CorrelationID: w.ev.CorrelationID, Sequence: w.ev.Sequence, EventID: w.ev.EventID, Skipped: skipped}
	if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(w.ctx, localOptions()), contract.ActivityFinish, in).Get(w.ctx, nil); err != nil {
		return fmt.Errorf("hand over to the sequencer: %w", err)
	}
	return nil
}

// deadLetter waits out what is left of the window of a delivery that did
// not give up for good, writes the dead letter and returns its generation;
// or the event's final state when the ledger has it finished after all.
func (w *eventRun) deadLetter(failure error) (int32, contract.State, error) {
	ctx := w.ctx
	reason, permanent := failureReason(failure)
	if !permanent {
		// Temporal stops retrying as soon as the next attempt would fall
		// past the window; the event still owns its whole window, so the
		// dead letter is written when the window ends, not earlier.
		if rest := w.windowEnd().Sub(workflow.Now(ctx)); rest > 0 {
			if err := workflow.Sleep(ctx, rest); err != nil {
				return 0, "", err
			}
		}
	}
	var res contract.DeadLetterResult
	window := fmt.Sprintf("%s/%d", workflow.GetInfo(ctx).WorkflowExecution.RunID, w.windows)
	in := contract.DeadLetterInput{Event: w.ev, Reason: reason, Window: window}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ledgerOptions()), contract.ActivityWriteDeadLetter, in).Get(ctx, &res); err != nil {
		return 0, "", fmt.Errorf("write dead letter: %w", err)
	}
	if res.Finished != "" {
		return 0, res.Finished, nil
	}
	w.status.Generation, w.status.Reason = res.Generation, reason
	w.setState(contract.StateDeadLettered)
	w.logger.Warn("event dead-lettered", "correlation_id", w.ev.CorrelationID, "sequence", w.ev.Sequence, "generation", res.Generation, "reason", reason)
	return res.Generation, "", nil
}

// awaitOperator waits for a replay or a skip of dead letter gen, or of a
// later one, and returns it with the generation it is for. One that names
// an earlier generation is ignored, and so is one without a generation
// (sent by hand from the Web UI) that was sent before this dead letter was
// written: both were meant for something else (a double click, a replay
// pressed while the event was still delivering) and must not act on this
// one. One that names a later generation was sent for a dead letter that a
// run an operator's Reset discarded wrote: the ledger has it, and the
// claim on its row (Skip, Replayed) decides whether it acts.
func (w *eventRun) awaitOperator(gen int32) (*contract.Replay, *contract.Skip, error) {
	ctx := w.ctx
	replayCh := workflow.GetSignalChannel(ctx, contract.SignalReplay)
	skipCh := workflow.GetSignalChannel(ctx, contract.SignalSkip)
	var replay contract.Replay
	var skip contract.Skip
	for replayCh.ReceiveAsync(&replay) {
		if replay.Generation >= gen {
			return &replay, nil, nil
		}
		w.logger.Info("ignoring a replay sent before this dead letter", "generation", replay.Generation, "current", gen)
	}
	for skipCh.ReceiveAsync(&skip) {
		if skip.Generation >= gen {
			return nil, &skip, nil
		}
		w.logger.Info("ignoring a skip sent before this dead letter", "generation", skip.Generation, "current", gen)
	}
	for {
		var gotReplay, gotSkip bool
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(replayCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &replay); gotReplay = true })
		sel.AddReceive(skipCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &skip); gotSkip = true })
		sel.Select(ctx)
		switch {
		case gotReplay && (replay.Generation >= gen || replay.Generation == 0):
			replay.Generation = max(replay.Generation, gen)
			return &replay, nil, nil
		case gotSkip && (skip.Generation >= gen || skip.Generation == 0):
			skip.Generation = max(skip.Generation, gen)
			return nil, &skip, nil
		}
		w.logger.Info("ignoring a replay or skip of an earlier dead letter", "current", gen)
	}
}

func (w *eventRun) windowEnd() time.Time { return w.windowStart.Add(w.in.RecoveryWindow) }

// deliverWindow delivers within one recovery window. The first attempt is a
// local activity, which needs no activity task and adds one marker to the
// history. If it fails in a way worth retrying, the rest of the window runs
// as a regular activity on the same schedule as DeliverOptions (about 1, 5,
// 21, 85 s after the first attempt), so a long outage is retried by
// Temporal's timers, not by a workflow task held open.
func (w *eventRun) deliverWindow() (contract.DeliverResult, error) {
	ctx, ev := w.ctx, w.ev
	w.windowStart = workflow.Now(ctx)
	w.windows++
	var res contract.DeliverResult
	lctx := workflow.WithLocalActivityOptions(ctx, FirstAttemptOptions(ev.Timeout))
	err := workflow.ExecuteLocalActivity(lctx, contract.ActivityDeliver, ev).Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	if _, permanent := failureReason(err); permanent {
		return res, err
	}
	wait := time.Second
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NextRetryDelay() > 0 {
		wait = appErr.NextRetryDelay() // the receiver's Retry-After
	}
	if wait >= w.windowEnd().Sub(workflow.Now(ctx)) {
		return res, err // no attempt fits in the window any more
	}
	w.setState(contract.StateDelivering)
	if err := workflow.Sleep(ctx, wait); err != nil {
		return res, err
	}
	// The timer may fire late (no worker was up): what is left of the
	// window bounds the rest, and nothing left means it is spent.
	rest := w.windowEnd().Sub(workflow.Now(ctx))
	if rest <= 0 {
		return res, err
	}
	opts := DeliverOptions(w.in.RecoveryWindow, ev.Timeout)
	opts.ScheduleToCloseTimeout = rest
	opts.RetryPolicy.InitialInterval = 4 * time.Second
	// A window shorter than that (an operator's or a test's) still retries.
	opts.RetryPolicy.MaximumInterval = max(opts.RetryPolicy.MaximumInterval, opts.RetryPolicy.InitialInterval)
	ev.AttemptOffset = 1
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), contract.ActivityDeliver, ev).Get(ctx, &res)
	return res, err
}

// failureReason explains why delivery stopped and whether it stopped before
// the window was spent (a permanent rejection).
func failureReason(err error) (string, bool) {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case contract.ErrTypePermanent:
			return "permanent rejection: " + appErr.Message(), true
		case contract.ErrTypeEndpointGone:
			return "endpoint gone (410), endpoint disabled: " + appErr.Message(), true
		case contract.ErrTypeEndpointDisabled:
			return "endpoint disabled: " + appErr.Message(), true
		}
	}
	// Anything else means the retries ran out within the recovery window.
	last := "no answer"
	var toErr *temporal.TimeoutError
	switch {
	case appErr != nil:
		last = appErr.Message()
	case errors.As(err, &toErr):
		last = "timed out"
	}
	return "recovery window spent; last attempt: " + last, false
}
