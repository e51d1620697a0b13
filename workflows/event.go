package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/store"
)

// EventInput is an accepted event and the delivery settings fixed at
// acceptance.
type EventInput struct {
	Event activities.DeliverInput `json:"event"`
	// RecoveryWindow is how long delivery is retried, counted from release.
	RecoveryWindow time.Duration `json:"recovery_window"`
	// Protocol is ProtocolLedger or ProtocolFastPath for every event started
	// now (as stored with the event); zero in the inputs of workflows
	// started before either existed.
	Protocol int `json:"protocol,omitempty"`
	// ReleasedAtStart, under ProtocolLedger, says the event was its
	// correlation's next when it started (the cursor only moves past an
	// event when that event finishes, so it stays released); without it the
	// event waits for the release signal.
	ReleasedAtStart *Release `json:"released_at_start,omitempty"`
}

// EventResult is how the event ended.
type EventResult struct {
	State    string `json:"state"`
	Attempts int32  `json:"attempts"`
}

// EventState is what QueryState answers for an event.
type EventState struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
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
			// 85 s would come at 341 s, past a 5-minute window.
			MaximumInterval: window,
			NonRetryableErrorTypes: []string{
				activities.ErrTypePermanent, activities.ErrTypeEndpointGone, activities.ErrTypeEndpointDisabled,
			},
		},
	}
}

// ledgerOptions are for writes to hookflow's own Postgres: they retry until
// they succeed, because losing one (a dead letter above all) is not an option.
var ledgerOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
	},
}

// localOptions are for the local activities that talk to Temporal or the
// ledger (announcing an arrival, loading a cursor): they retry through an
// outage of either for as long as it lasts, because giving up would strand
// the event or the correlation.
var localOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    10 * time.Second,
	ScheduleToCloseTimeout: 30 * 24 * time.Hour,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
}

// Protocols of EventInput: how an event workflow talks to its sequencer and
// makes its first attempt. The protocol is part of the workflow's input,
// fixed when it starts, so a workflow keeps the one it began with across
// worker upgrades (its replays stay deterministic) at no history cost, unlike
// workflow.GetVersion's marker and search attribute upsert.
const (
	// ProtocolSignals: arrival by signal-with-start, release by signal, every
	// attempt a regular activity, done by an external signal. Workflows
	// started before the fast path run it to their end.
	ProtocolSignals = 0
	// ProtocolFastPath: arrival by update-with-start, whose answer releases
	// an event that is next in line (no release signal); the first attempt
	// as a local activity, the rest of the window as a regular activity; done
	// signalled from a local activity. New events of a correlation that
	// still has unfinished events of an older protocol start with it.
	ProtocolFastPath = 1
	// ProtocolLedger: no sequencer. The event is released when the ledger's
	// cursor for its correlation reaches it: at start (the starter read the
	// cursor: ReleasedAtStart), or later by the release signal of the event
	// before it, whose delivered attempt (or skip) moved the cursor. The
	// first attempt and the rest of the window as in ProtocolFastPath. What
	// every other new event starts with.
	ProtocolLedger = 2
)

// sequencerCallOptions are for the local activities that wait on the
// sequencer's answer (announce, finish): under a backlog the sequencer's
// workflow task can take a while to come round, and a retry only attaches
// to the same update again, so each try waits longer than localOptions'.
var sequencerCallOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: localOptions.ScheduleToCloseTimeout,
	RetryPolicy:            localOptions.RetryPolicy,
}

// EventWorkflow delivers one event in its correlation's order: it announces
// itself to the sequencer, waits to be released, delivers within the
// recovery window, and tells the sequencer it is done. When delivery gives
// up it writes a dead letter and waits for an operator's replay or skip; the
// sequencer stays gated on it meanwhile, so order is never broken silently.
func EventWorkflow(ctx workflow.Context, in EventInput) (EventResult, error) {
	logger := workflow.GetLogger(ctx)
	ev := in.Event
	fast := in.Protocol >= ProtocolFastPath
	state := EventState{State: store.StateWaiting}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (EventState, error) { return state, nil }); err != nil {
		return EventResult{}, err
	}
	setState := func(s string) {
		state.State = s
		if err := workflow.UpsertTypedSearchAttributes(ctx, activities.DeliveryStateKey.ValueSet(s)); err != nil {
			logger.Warn("upsert search attributes", "error", err)
		}
	}
	// CorrelationId, Sequence and DeliveryState=waiting are set at start
	// (starter), which costs no history event.

	byLedger := in.Protocol >= ProtocolLedger
	var skipped []int64
	var err error
	if byLedger {
		skipped = awaitLedgerRelease(ctx, in.ReleasedAtStart)
		ev.HandOff = true
	} else if skipped, err = awaitRelease(ctx, ev, fast); err != nil {
		return EventResult{}, err
	}
	ev.Skipped = skipped

	var a *activities.Activities
	replayCh := workflow.GetSignalChannel(ctx, SignalReplay)
	skipCh := workflow.GetSignalChannel(ctx, SignalSkip)
	ledger := workflow.WithActivityOptions(ctx, ledgerOptions)
	for window := 0; ; window++ {
		var res activities.DeliverResult
		windowEnd := workflow.Now(ctx).Add(in.RecoveryWindow)
		if fast && window == 0 {
			res, err = deliverFast(ctx, ev, in.RecoveryWindow, windowEnd, func() { setState(store.StateDelivering) })
		} else {
			setState(store.StateDelivering)
			dctx := workflow.WithActivityOptions(ctx, DeliverOptions(in.RecoveryWindow, ev.Timeout))
			err = workflow.ExecuteActivity(dctx, a.Deliver, ev).Get(ctx, &res)
		}
		if err == nil {
			setState(store.StateDelivered)
			if err := finish(ctx, ev, false, fast, res.HandOffPending); err != nil {
				return EventResult{}, err
			}
			return EventResult{State: store.StateDelivered, Attempts: res.Attempt}, nil
		}

		reason, permanent := failureReason(err)
		if !permanent {
			// Temporal stops retrying as soon as the next attempt would fall
			// past the window; the event still owns its whole window, so the
			// dead letter is written when the window ends, not earlier.
			if rest := windowEnd.Sub(workflow.Now(ctx)); rest > 0 {
				if err := workflow.Sleep(ctx, rest); err != nil {
					return EventResult{}, err
				}
			}
		}
		state.Reason = reason
		if err := workflow.ExecuteActivity(ledger, a.WriteDeadLetter, activities.DeadLetterInput{Event: ev, Reason: reason}).Get(ctx, nil); err != nil {
			return EventResult{}, fmt.Errorf("write dead letter: %w", err)
		}
		setState(store.StateDeadLettered)
		logger.Warn("event dead-lettered", "correlation_id", ev.CorrelationID, "sequence", ev.Sequence, "reason", reason)

		var replay Replay
		var skip Skip
		skipped := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(replayCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &replay) })
		sel.AddReceive(skipCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &skip); skipped = true })
		sel.Select(ctx)

		if skipped {
			in := activities.SkipInput{EventID: ev.EventID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, By: skip.By, Note: skip.Note, HandOff: ev.HandOff}
			if err := workflow.ExecuteActivity(ledger, a.Skip, in).Get(ctx, nil); err != nil {
				return EventResult{}, fmt.Errorf("record skip: %w", err)
			}
			setState(store.StateSkipped)
			if err := finish(ctx, ev, true, fast, false); err != nil {
				return EventResult{}, err
			}
			return EventResult{State: store.StateSkipped}, nil
		}
		if err := workflow.ExecuteActivity(ledger, a.Replayed, ev.EventID).Get(ctx, nil); err != nil {
			return EventResult{}, fmt.Errorf("record replay: %w", err)
		}
		state.Reason = ""
	}
}

// awaitRelease announces the event to its correlation's sequencer and
// returns once the event may deliver, with the skipped sequences its
// envelope must carry. On the fast path an event that is next in line is
// released in the announcement's answer; any other waits for the release
// signal.
func awaitRelease(ctx workflow.Context, ev activities.DeliverInput, fast bool) ([]int64, error) {
	var a *activities.Activities
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions)
	arrival := activities.Arrival{Sequence: ev.Sequence, EventID: ev.EventID}
	start := SequencerInput{CorrelationID: ev.CorrelationID}
	if fast {
		start.MaxHistory = FastPathMaxHistory
		lctx := workflow.WithLocalActivityOptions(ctx, sequencerCallOptions)
		in := activities.AnnounceInput{
			SequencerID: SequencerID(ev.CorrelationID), TaskQueue: SequencerTaskQueue(workflow.GetInfo(ctx).TaskQueueName),
			SequencerType: SequencerWorkflowName, Update: UpdateArrive,
			Arrival: arrival, StartArg: start, CorrelationID: ev.CorrelationID,
		}
		var ann activities.Announcement
		if err := workflow.ExecuteLocalActivity(lctx, a.Announce, in).Get(ctx, &ann); err != nil {
			return nil, fmt.Errorf("announce to sequencer: %w", err)
		}
		if ann.Released {
			return ann.Skipped, nil
		}
	} else {
		in := activities.ArriveInput{
			SequencerID: SequencerID(ev.CorrelationID), SequencerType: SequencerWorkflowName, Signal: SignalArrived,
			Arrival: arrival, StartArg: start, CorrelationID: ev.CorrelationID,
		}
		if err := workflow.ExecuteLocalActivity(lctx, a.Arrive, in).Get(ctx, nil); err != nil {
			return nil, fmt.Errorf("announce to sequencer: %w", err)
		}
	}
	var rel Release
	workflow.GetSignalChannel(ctx, SignalRelease).Receive(ctx, &rel)
	return rel.Skipped, nil
}

// awaitLedgerRelease returns once the ledger releases the event
// (ProtocolLedger), with the skipped sequences its envelope must carry.
// Every starter of a ledger event passes ReleasedAtStart (an event that must
// wait gets no workflow until released), so this returns at once; the wait
// for a release signal is for a workflow started without it, which
// starter.StartReleased signals when it finds it running.
func awaitLedgerRelease(ctx workflow.Context, atStart *Release) []int64 {
	if atStart != nil {
		return atStart.Skipped
	}
	var rel Release
	workflow.GetSignalChannel(ctx, SignalRelease).Receive(ctx, &rel)
	return rel.Skipped
}

// deliverFast makes the window's first attempt as a local activity, which
// needs no activity task and adds one marker to the history. If that
// attempt fails in a way worth retrying, the rest of the window runs as a
// regular activity on the same schedule as DeliverOptions (about 1, 5, 21,
// 85 s after the first attempt), so a long outage is retried by Temporal's
// timers, not by a workflow task held open. markDelivering records that the
// event left the fast path.
func deliverFast(ctx workflow.Context, ev activities.DeliverInput, window time.Duration, windowEnd time.Time, markDelivering func()) (activities.DeliverResult, error) {
	var a *activities.Activities
	var res activities.DeliverResult
	lctx := workflow.WithLocalActivityOptions(ctx, FirstAttemptOptions(ev.Timeout))
	err := workflow.ExecuteLocalActivity(lctx, a.Deliver, ev).Get(ctx, &res)
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
	if wait >= windowEnd.Sub(workflow.Now(ctx)) {
		return res, err // no attempt fits in the window any more
	}
	markDelivering()
	if err := workflow.Sleep(ctx, wait); err != nil {
		return res, err
	}
	// The timer may fire late (no worker was up): what is left of the
	// window bounds the rest, and nothing left means it is spent.
	rest := windowEnd.Sub(workflow.Now(ctx))
	if rest <= 0 {
		return res, err
	}
	opts := DeliverOptions(window, ev.Timeout)
	opts.ScheduleToCloseTimeout = rest
	opts.RetryPolicy.InitialInterval = 4 * time.Second
	ev.AttemptOffset = 1
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.Deliver, ev).Get(ctx, &res)
	return res, err
}

// FirstAttemptOptions are the local activity options of the fast path's
// first attempt: one try, bounded a little above the HTTP timeout.
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

// finish tells whoever releases the event's successor that the event is
// finished. Under ProtocolLedger the delivering attempt or the skip did it
// (moved the cursor and signalled the successor), unless that signal failed
// (handOffPending): then a local activity repeats it until it succeeds.
// Otherwise the sequencer is told (signalDone).
func finish(ctx workflow.Context, ev activities.DeliverInput, skipped, fast, handOffPending bool) error {
	if !ev.HandOff {
		return signalDone(ctx, ev, skipped, fast)
	}
	if !handOffPending {
		return nil
	}
	var a *activities.Activities
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions)
	in := activities.HandOffInput{CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, Skipped: skipped}
	if err := workflow.ExecuteLocalActivity(lctx, a.HandOff, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("release successor: %w", err)
	}
	return nil
}

// signalDone tells the sequencer the event is finished: on the fast path by
// an update from a local activity (one marker), which also releases the
// successor the sequencer names; otherwise by an external signal.
func signalDone(ctx workflow.Context, ev activities.DeliverInput, skipped, fast bool) error {
	done := Done{Sequence: ev.Sequence, EventID: ev.EventID, Skipped: skipped}
	var err error
	if fast {
		var a *activities.Activities
		lctx := workflow.WithLocalActivityOptions(ctx, sequencerCallOptions)
		in := activities.FinishInput{
			SequencerID: SequencerID(ev.CorrelationID), EventID: ev.EventID,
			Update: UpdateFinished, ReleaseSignal: SignalRelease, Done: done,
		}
		err = workflow.ExecuteLocalActivity(lctx, a.Finish, in).Get(ctx, nil)
	} else {
		err = workflow.SignalExternalWorkflow(ctx, SequencerID(ev.CorrelationID), "", SignalDone, done).Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("signal sequencer done: %w", err)
	}
	return nil
}

// failureReason explains why delivery stopped and whether it stopped before
// the window was spent (a permanent rejection).
func failureReason(err error) (string, bool) {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.ErrTypePermanent:
			return "permanent rejection: " + appErr.Message(), true
		case activities.ErrTypeEndpointGone:
			return "endpoint gone (410), endpoint disabled: " + appErr.Message(), true
		case activities.ErrTypeEndpointDisabled:
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
