package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
)

// EventInput is an accepted event, its deliveries (lanes) and the delivery
// settings fixed at acceptance.
type EventInput struct {
	// Event is the event as every delivery sends it, less its payload (the
	// ledger's, which Deliver reads); EndpointID, Previous and Skipped are
	// each lane's.
	Event contract.DeliverInput `json:"event"`
	// RecoveryWindow is how long delivery is retried, counted from release,
	// in a lane whose endpoint has no window of its own (the server's,
	// HOOKFLOW_RECOVERY_WINDOW); Event.Timeout is the HTTP timeout likewise.
	RecoveryWindow time.Duration `json:"recovery_window"`
	// Lanes are the deliveries this run makes: every endpoint the event was
	// routed to at acceptance, less those the ledger has finished when the
	// workflow is started again. None for an event nobody subscribes to.
	// After a continue-as-new: every lane of the run before, each where it
	// stood.
	Lanes []LaneInput `json:"lanes,omitempty"`
	// MaxHistory is the history length past which the workflow continues
	// as new (0: DefaultEventMaxHistory).
	MaxHistory int `json:"max_history,omitempty"`
	// HandOverBatch is how long a delivered lane waits for its peers'
	// first attempts before it is handed over without them (0:
	// HandOverBatch, the constant); the tests that count hand-overs set it
	// long, so that a loaded machine's slow answers still fall in one batch.
	HandOverBatch time.Duration `json:"hand_over_batch,omitempty"`
	// Published is what the run before a continue-as-new last set in the
	// search attributes (which carry over); nil: what the starter set at
	// start, the lanes' aggregate.
	Published *Published `json:"published,omitempty"`
}

// Published is what an event's run last set in its search attributes.
type Published struct {
	State        contract.State `json:"state"`
	DeadLettered []string       `json:"dead_lettered,omitempty"`
}

// DefaultEventMaxHistory is the history length past which an
// EventWorkflow continues as new, at the first moment every lane is
// between attempts (waiting for its release, on an open circuit, for its
// window to end, or on its dead letter). Temporal ends a run at 51,200
// events; a lane waiting on an open circuit adds about 11 a wait.
const DefaultEventMaxHistory = 2000

// eventHoldFactor times the MaxHistory is the history length past which a
// lane whose wait ends stays where it is until the workflow has continued
// as new, rather than make its next attempt: another lane's attempt in
// flight keeps the workflow from continuing meanwhile, and waiting for it
// is better than growing to Temporal's limit.
const eventHoldFactor = 5

// minEventMaxHistory is the least MaxHistory taken: a fresh run's first
// workflow task already sees 3 events (more with signals), and a run that
// continued as new before making any progress would do so for ever.
const minEventMaxHistory = 20

// LaneInput is one delivery of an event.
type LaneInput struct {
	Endpoint string `json:"endpoint_id"`
	// Released is the sequencer's release when it came in its answer to the
	// event's arrival (next in its lane, nothing in flight there), or as the
	// ledger has it when the workflow of a released delivery is started
	// again; nil: the lane waits for the release signal.
	Released *contract.LaneRelease `json:"released,omitempty"`
	// DeadLetter is set when the workflow of a dead-lettered delivery is
	// started again (an operator terminated it): the lane waits for a
	// replay or skip of that dead letter first.
	DeadLetter *DeadLetter `json:"dead_letter,omitempty"`
	// RecoveryWindow and Timeout are the endpoint's delivery settings as the
	// event was routed (the ledger's deliveries row has them), fixed for
	// the delivery; 0 is the event's (EventInput.RecoveryWindow,
	// Event.Timeout: the server's).
	RecoveryWindow time.Duration `json:"recovery_window,omitempty"`
	Timeout        time.Duration `json:"timeout,omitempty"`
	// Finished is how the lane ended in the run before a continue-as-new,
	// which kept it for the query and the result; it does nothing more.
	Finished contract.State `json:"finished,omitempty"`
	// Attempts is the attempt that delivered a finished lane; Windows
	// counts the lane's delivery windows in the runs before.
	Attempts int32 `json:"attempts,omitempty"`
	Windows  int   `json:"windows,omitempty"`
	// Follows is the generation of the dead letter whose replay began the
	// lane's window (contract.DeadLetterInput.Follows).
	Follows int32 `json:"follows,omitempty"`
	// Resume is where the lane's delivery window stood when the run before
	// continued as new (Released is set too): the window goes on from
	// there, counted from its own start.
	Resume *LaneResume `json:"resume,omitempty"`
}

// LaneResume is a delivery window a run handed to the next at a
// continue-as-new, taken at a moment no attempt of it was in flight.
type LaneResume struct {
	// WindowStart is when the window began (moved on by throttled waits):
	// the new run spends the same window, not a fresh one.
	WindowStart time.Time `json:"window_start"`
	// Retrying: the first attempt failed and the window's rest runs as
	// regular activities, counting attempts on from AttemptOffset; Failure
	// is the dead letter's reason should the window end with no other
	// answer.
	Retrying      bool   `json:"retrying,omitempty"`
	AttemptOffset int32  `json:"attempt_offset,omitempty"`
	Failure       string `json:"failure,omitempty"`
	// WaitUntil is when the lane's wait on its endpoint's open circuit
	// would have ended (its timer, cut to the window's end); the new run
	// waits out what is left. Woken: a circuit-closed signal came for it,
	// which ends that wait at once.
	WaitUntil time.Time `json:"wait_until,omitzero"`
	Woken     bool      `json:"woken,omitempty"`
	// DeadLetterDue: the window failed, and the lane waited for its end to
	// write the dead letter with this reason.
	DeadLetterDue string `json:"dead_letter_due,omitempty"`
	// TurnUntil is when the lane's throttled attempt would have been made
	// (waitTurn: its endpoint's rate limit or cap on attempts in flight, or
	// its tenant disabled); the new run waits out what is left, and
	// WindowStart is already moved on by what was waited. TurnSlot: the
	// attempt holds a send slot reserved for then. Probe: the attempt
	// probes an open circuit (a replay's first).
	TurnUntil time.Time `json:"turn_until,omitzero"`
	TurnSlot  bool      `json:"turn_slot,omitempty"`
	Probe     bool      `json:"probe,omitempty"`
}

// DeadLetter is the dead letter a delivery waits on.
type DeadLetter struct {
	Generation int32  `json:"generation"`
	Reason     string `json:"reason,omitempty"`
	// Replay or Skip is an operator's action on it that the ledger has
	// claimed already: its signal went to a run that ended before it acted
	// (Terminate) or was lost (Reset). The operator was answered 202, so the
	// new run carries it out, as if the signal had come to it; undoing the
	// claim instead would race the API's next claim of the same row.
	Replay *contract.Replay `json:"replay,omitempty"`
	Skip   *contract.Skip   `json:"skip,omitempty"`
}

// EventResult is how the event's deliveries ended.
type EventResult struct {
	State contract.State `json:"state"`
	Lanes []LaneResult   `json:"lanes,omitempty"`
}

// LaneResult is how one delivery ended.
type LaneResult struct {
	Endpoint string         `json:"endpoint_id"`
	State    contract.State `json:"state"`
	Attempts int32          `json:"attempts,omitempty"`
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

// LedgerTimeout bounds one try of a write to hookflow's own Postgres. It is
// also how long a try lost on its way (to a worker killed, or through a
// Temporal restart that dropped the task's answer) holds its lane before
// Temporal tries again: an operator's replay taken just before an outage
// shows only once that is past.
const LedgerTimeout = 30 * time.Second

// ledgerOptions are for writes to hookflow's own Postgres: they retry until
// they succeed, because losing one (a dead letter above all) is not an option.
func ledgerOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: LedgerTimeout,
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

// EventWorkflow delivers one event to every endpoint it was routed to, each
// in its lane's order. It exists from the moment the event is accepted (the
// API starts it) and runs a lane per delivery: the lane waits for its
// sequencer's release (in the input when it was next, else by the release
// signal), delivers within the recovery window, and hands over to the
// sequencer when done (the delivering attempt does, which releases the
// lane's successor). When delivery gives up it writes the delivery's dead
// letter and waits for an operator's replay or skip of it; the sequencer
// keeps that lane, and only that lane, gated on it meanwhile, so order is
// never broken silently. The workflow ends when every lane has.
//
// Request Cancellation (the Web UI's button, client.CancelWorkflow) is
// refused: the run goes on as if it had not been pressed (refuseCancellation).
func EventWorkflow(ctx workflow.Context, in EventInput) (EventResult, error) {
	ctx = refuseCancellation(ctx)
	// The payload is the ledger's (Deliver and WriteDeadLetter read it
	// there): an input from before the starter dropped it must not copy it
	// into every activity input, nor into a continue-as-new.
	in.Event.Data = nil
	w := &eventRun{in: in, logger: workflow.GetLogger(ctx), lanes: map[string]*laneRun{}, maxHistory: max(cmp.Or(in.MaxHistory, DefaultEventMaxHistory), minEventMaxHistory)}
	for _, li := range in.Lanes {
		l := &laneRun{w: w, endpoint: li.Endpoint, in: li, ev: in.Event, window: cmp.Or(li.RecoveryWindow, in.RecoveryWindow),
			release: workflow.NewBufferedChannel(ctx, 4), replay: workflow.NewBufferedChannel(ctx, 16), skip: workflow.NewBufferedChannel(ctx, 16),
			circuitClosed: workflow.NewBufferedChannel(ctx, 1), attempts: li.Attempts, windows: li.Windows, follows: li.Follows}
		l.ev.EndpointID = li.Endpoint
		l.ev.Timeout = cmp.Or(li.Timeout, in.Event.Timeout)
		l.status = contract.LaneStatus{Endpoint: li.Endpoint, State: contract.StateWaiting}
		switch {
		case li.Finished != "":
			l.status.State = li.Finished
		case li.DeadLetter != nil:
			l.status = contract.LaneStatus{Endpoint: li.Endpoint, State: contract.StateDeadLettered, Generation: li.DeadLetter.Generation, Reason: li.DeadLetter.Reason}
			if r := li.DeadLetter.Replay; r != nil {
				l.replay.SendAsync(*r)
			}
			if sk := li.DeadLetter.Skip; sk != nil {
				l.skip.SendAsync(*sk)
			}
		case li.Released != nil:
			l.status.State = contract.StateDelivering
			if r := li.Resume; r != nil {
				l.windowStart = r.WindowStart
				if r.Woken {
					l.circuitClosed.SendAsync(contract.CircuitClosed{EndpointID: li.Endpoint})
				}
			}
		}
		if li.Released != nil {
			l.ev = l.ev.WithRelease(*li.Released)
		}
		w.order = append(w.order, l)
		w.lanes[li.Endpoint] = l
	}
	// What the starter set at start (starter.stateOf), so that only a change
	// is upserted.
	w.published, w.deadLettered = w.aggregate(), w.deadLetteredEndpoints()
	if p := in.Published; p != nil {
		w.published, w.deadLettered = p.State, p.DeadLettered
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueryState, func() (contract.EventStatus, error) { return w.status(), nil }); err != nil {
		return EventResult{}, err
	}
	// CorrelationId, Sequence, DeliveryState, EndpointIds and
	// DeadLetteredEndpointIds are set at start (starter), which costs no
	// history event.
	workflow.Go(ctx, w.dispatch)
	running := len(w.order)
	var failure error
	for _, l := range w.order {
		// Each lane blocks on its own coroutine's context: a blocking call
		// made with another coroutine's panics.
		workflow.Go(ctx, func(ctx workflow.Context) {
			if err := l.run(ctx); err != nil && failure == nil {
				failure = err
			}
			l.done = true
			running--
		})
	}
	if len(w.order) > 1 {
		workflow.Go(ctx, func(ctx workflow.Context) {
			// It runs until the workflow ends, and returns only on a failure.
			if err := w.handOverTogether(ctx); failure == nil {
				failure = err
			}
		})
	}
	ended := func() bool { return running == 0 && len(w.handOvers) == 0 && !w.handing && w.pauses == 0 }
	if err := workflow.Await(ctx, func() bool {
		return ended() || failure != nil || w.mayContinueAsNew(ctx)
	}); err != nil {
		return EventResult{}, err
	}
	if failure != nil {
		return EventResult{}, failure
	}
	if !ended() {
		return EventResult{}, w.continueAsNew(ctx)
	}
	w.publish(ctx)
	res := EventResult{State: w.aggregate()}
	for _, l := range w.order {
		res.Lanes = append(res.Lanes, LaneResult{Endpoint: l.endpoint, State: l.status.State, Attempts: l.attempts})
	}
	return res, nil
}

// refuseCancellation returns the context the whole run works in: one that
// a cancellation request does not reach. An event's workflow owns its lanes
// until each is delivered, skipped or dead-lettered, and its sequencer holds
// each lane's successors until then: a run that gave up on a cancellation
// would leave every lane of the event waiting for a hand-over that never
// comes, and a run that went on with a cancelled context would see every
// wait and activity fail at once. So a cancellation is logged and ignored;
// an operator who wants a delivery given up skips its dead letter, which
// the sequencer hears of.
func refuseCancellation(ctx workflow.Context) workflow.Context {
	run, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		ctx.Done().Receive(ctx, nil)
		workflow.GetLogger(ctx).Warn("ignoring a cancellation request: an event's deliveries end delivered, skipped or dead-lettered, never cancelled")
	})
	return run
}

// eventRun is one EventWorkflow's state: its lanes, and what it last
// published in the search attributes.
type eventRun struct {
	in     EventInput
	logger interface {
		Warn(string, ...any)
		Info(string, ...any)
	}
	lanes map[string]*laneRun
	order []*laneRun
	// published is the DeliveryState last set, deadLettered the
	// DeadLetteredEndpointIds.
	published    contract.State
	deadLettered []string
	// firstAttempts counts the lanes whose first attempt (a local
	// activity) is in flight; handOvers are the delivered lanes whose
	// hand-over to the sequencer waits for them (at most HandOverBatch), so
	// that lanes released together and delivered together are handed over
	// in one update; handing is set while a batch is gathered or handed
	// over; pauses counts the HandOverPause local activities not ended,
	// which the workflow waits for before it ends.
	firstAttempts int
	handOvers     []contract.LaneDone
	handing       bool
	pauses        int
	// maxHistory is the history length past which the run continues as
	// new (EventInput.MaxHistory).
	maxHistory int
}

// historyLong: the run should continue as new once it can.
func (w *eventRun) historyLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() > w.maxHistory || info.GetContinueAsNewSuggested()
}

// hold: the history is so long that a lane whose wait ends makes no
// attempt, and waits where it is for the continue-as-new (eventHoldFactor).
func (w *eventRun) hold(ctx workflow.Context) bool {
	return workflow.GetInfo(ctx).GetCurrentHistoryLength() > eventHoldFactor*w.maxHistory
}

// mayContinueAsNew: the history is long, and nothing is in flight: every
// lane not ended is parked between attempts (laneRun.parked), and no
// hand-over is pending or under way. Then no activity's result can be
// lost by ending the run, and each lane's state is all the next run needs.
func (w *eventRun) mayContinueAsNew(ctx workflow.Context) bool {
	if w.firstAttempts > 0 || len(w.handOvers) > 0 || w.handing || w.pauses > 0 || !w.historyLong(ctx) {
		return false
	}
	for _, l := range w.order {
		if !l.done && l.parked == parkedNot {
			return false
		}
	}
	return true
}

// continueAsNew ends the run into a new one that carries every lane where
// it stands (laneRun.carry): the timers of the lanes' waits are dropped, and
// the new run waits out what is left of each. The signals not yet routed
// are folded into the lanes' state, not lost: dispatch leaves them in
// their channels until it takes them (it waits on their lengths, never in
// a receive that would take one out of a channel into its coroutine), so
// every one that came is in a lane's channel or in a signal channel here.
func (w *eventRun) continueAsNew(ctx workflow.Context) error {
	carried := make([]LaneInput, 0, len(w.order))
	byEndpoint := map[string]*LaneInput{}
	now := workflow.Now(ctx)
	for _, l := range w.order {
		carried = append(carried, l.carry(now))
	}
	for i := range carried {
		byEndpoint[carried[i].Endpoint] = &carried[i]
	}
	for _, rel := range drain[contract.Release](ctx, contract.SignalRelease) {
		for _, lr := range rel.Lanes {
			if li := byEndpoint[lr.Endpoint]; li != nil && li.Finished == "" && li.Released == nil && li.DeadLetter == nil {
				li.Released = &lr
			}
		}
	}
	for _, r := range drain[contract.Replay](ctx, contract.SignalReplay) {
		if l := w.operatorLane(r.EndpointID, contract.SignalReplay); l != nil {
			// As awaitOperator takes it: one for an earlier dead letter acts
			// on nothing.
			if li := byEndpoint[l.endpoint]; li.DeadLetter != nil && li.DeadLetter.Replay == nil && (r.Generation == 0 || r.Generation >= li.DeadLetter.Generation) {
				r.Generation = max(r.Generation, li.DeadLetter.Generation)
				li.DeadLetter.Replay = &r
			}
		}
	}
	for _, sk := range drain[contract.Skip](ctx, contract.SignalSkip) {
		if l := w.operatorLane(sk.EndpointID, contract.SignalSkip); l != nil {
			if li := byEndpoint[l.endpoint]; li.DeadLetter != nil && li.DeadLetter.Skip == nil && (sk.Generation == 0 || sk.Generation >= li.DeadLetter.Generation) {
				sk.Generation = max(sk.Generation, li.DeadLetter.Generation)
				li.DeadLetter.Skip = &sk
			}
		}
	}
	for _, cc := range drain[contract.CircuitClosed](ctx, contract.SignalCircuitClosed) {
		if li := byEndpoint[cc.EndpointID]; li != nil && li.Resume != nil {
			li.Resume.Woken = true
		}
	}
	in := w.in
	in.Lanes, in.MaxHistory = carried, w.in.MaxHistory
	in.Published = &Published{State: w.published, DeadLettered: w.deadLettered}
	w.logger.Info("continuing as new", "history_length", workflow.GetInfo(ctx).GetCurrentHistoryLength(), "lanes", len(carried))
	return workflow.NewContinueAsNewError(ctx, contract.EventWorkflow, in)
}

// drain takes every signal of that name not yet received.
func drain[T any](ctx workflow.Context, name string) []T {
	ch := workflow.GetSignalChannel(ctx, name)
	var out []T
	for {
		var v T
		if !ch.ReceiveAsync(&v) {
			return out
		}
		out = append(out, v)
	}
}

func (w *eventRun) status() contract.EventStatus {
	st := contract.EventStatus{State: w.aggregate()}
	for _, l := range w.order {
		st.Lanes = append(st.Lanes, l.status)
	}
	return st
}

func (w *eventRun) aggregate() contract.State {
	states := make([]contract.State, 0, len(w.order))
	for _, l := range w.order {
		states = append(states, l.status.State)
	}
	return contract.Aggregate(states)
}

// publish sets the search attributes the Web UI filters on (DeliveryState,
// DeadLetteredEndpointIds) when they changed. A release is not published
// (waiting → delivering costs the history an event for a state that lasts a
// round trip); a retry, a dead letter, a replay and the end are.
func (w *eventRun) publish(ctx workflow.Context) {
	state, dead := w.aggregate(), w.deadLetteredEndpoints()
	var updates []temporal.SearchAttributeUpdate
	if state != w.published {
		updates = append(updates, contract.DeliveryStateKey.ValueSet(string(state)))
	}
	if !slices.Equal(dead, w.deadLettered) {
		if fit, _ := contract.FitKeywordList(dead); len(fit) == 0 {
			updates = append(updates, contract.DeadLetteredEndpointIDsKey.ValueUnset())
		} else {
			updates = append(updates, contract.DeadLetteredEndpointIDsKey.ValueSet(fit))
		}
	}
	if len(updates) == 0 {
		return
	}
	w.published, w.deadLettered = state, dead
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		w.logger.Warn("upsert search attributes", "error", err)
	}
}

// deadLetteredEndpoints are the endpoints whose delivery waits on a dead
// letter, in the lanes' order.
func (w *eventRun) deadLetteredEndpoints() []string {
	var dead []string
	for _, l := range w.order {
		if l.status.State == contract.StateDeadLettered {
			dead = append(dead, l.endpoint)
		}
	}
	return dead
}

// HandOverBatch is how long, unless EventInput.HandOverBatch says
// otherwise, a delivered lane of an event with several lanes waits for its peers' first attempts before it is handed over to its
// sequencer without them: the lanes released together that deliver within
// it are handed over in one finished update (one Finish local activity),
// whose answer releases their successors; a lane that answers later is
// handed over by itself when it does. So a slow receiver delays the other
// lanes of the events it shares by at most this, never by its own latency.
const HandOverBatch = 100 * time.Millisecond

// handOverTogether tells the sequencer of the delivered lanes of an event
// with several (their attempts defer the hand-over, DeliverInput
// DeferHandOver), in batches: at once when no first attempt is in flight,
// else once they all end or HandOverBatch after the batch's first delivery,
// whichever comes first. The wait is a local activity (HandOverPause),
// because the first attempts in flight hold the workflow task open and a
// timer would fire only after it. The lanes left in flight are handed
// over in a batch of their own when they deliver.
func (w *eventRun) handOverTogether(ctx workflow.Context) error {
	batch := cmp.Or(w.in.HandOverBatch, HandOverBatch)
	pauseOpts := workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: batch + 10*time.Second,
		StartToCloseTimeout:    batch + 10*time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	}
	for {
		if err := workflow.Await(ctx, func() bool { return len(w.handOvers) > 0 }); err != nil {
			return err
		}
		w.handing = true
		if w.firstAttempts > 0 {
			pause := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, pauseOpts), contract.ActivityHandOverPause, batch)
			w.pauses++
			workflow.Go(ctx, func(ctx workflow.Context) {
				// Its end is awaited, not its result: a pause that failed has
				// ended too.
				_ = pause.Get(ctx, nil)
				w.pauses--
			})
			if err := workflow.Await(ctx, func() bool { return w.firstAttempts == 0 || pause.IsReady() }); err != nil {
				return err
			}
		}
		lanes := w.handOvers
		w.handOvers = nil
		ev := w.in.Event
		in := contract.FinishInput{Tenant: ev.Tenant, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EventID: ev.EventID, Lanes: lanes}
		if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localOptions()), contract.ActivityFinish, in).Get(ctx, nil); err != nil {
			return fmt.Errorf("hand over to the sequencer: %w", err)
		}
		w.handing = false
	}
}

// dispatch passes the signals on to the lanes they name: a release to each
// of its lanes; a replay or skip to the lane of its endpoint_id, or, without
// one (sent by hand as {}), to the one lane waiting on a dead letter, or to
// the only lane. One that names no lane of this event, or that is
// ambiguous, is dropped with a warning: it acts on nothing.
//
// It never blocks on a lane: a lane takes one release and then none, and a
// finished lane takes nothing, yet a resync answers every lane in flight
// again, so the sweep repeats the release of a dead-lettered delivery each
// time it runs. A blocking send would stop at the first full channel and
// route nothing more, the operator's replay included.
func (w *eventRun) dispatch(ctx workflow.Context) {
	releaseCh := workflow.GetSignalChannel(ctx, contract.SignalRelease)
	replayCh := workflow.GetSignalChannel(ctx, contract.SignalReplay)
	skipCh := workflow.GetSignalChannel(ctx, contract.SignalSkip)
	closedCh := workflow.GetSignalChannel(ctx, contract.SignalCircuitClosed)
	for {
		// It waits on the channels' lengths, not in a Selector: a blocked
		// receive takes a signal out of its channel as it comes, and a
		// continue-as-new decided before this coroutine ran again would
		// not find it there (continueAsNew drains the channels).
		if err := workflow.Await(ctx, func() bool {
			return releaseCh.Len()+replayCh.Len()+skipCh.Len()+closedCh.Len() > 0
		}); err != nil {
			// Only a cancelled context answers so, and the run's is never
			// cancelled (refuseCancellation); looping on it would never yield.
			return
		}
		var rel contract.Release
		for releaseCh.ReceiveAsync(&rel) {
			w.routeRelease(rel)
			rel = contract.Release{}
		}
		var r contract.Replay
		for replayCh.ReceiveAsync(&r) {
			if l := w.operatorLane(r.EndpointID, contract.SignalReplay); l != nil && !l.replay.SendAsync(r) {
				w.logger.Warn("ignoring a replay: the delivery has too many replays and skips not taken", "endpoint_id", l.endpoint, "state", l.status.State)
			}
			r = contract.Replay{}
		}
		var sk contract.Skip
		for skipCh.ReceiveAsync(&sk) {
			if l := w.operatorLane(sk.EndpointID, contract.SignalSkip); l != nil && !l.skip.SendAsync(sk) {
				w.logger.Warn("ignoring a skip: the delivery has too many replays and skips not taken", "endpoint_id", l.endpoint, "state", l.status.State)
			}
			sk = contract.Skip{}
		}
		var cc contract.CircuitClosed
		for closedCh.ReceiveAsync(&cc) {
			if l := w.lanes[cc.EndpointID]; l == nil {
				w.logger.Warn("ignoring a circuit-closed signal for an endpoint this event is not delivered to", "endpoint_id", cc.EndpointID)
			} else {
				// One kept is enough: a full channel has one waiting already.
				l.circuitClosed.SendAsync(cc)
			}
			cc = contract.CircuitClosed{}
		}
	}
}

// routeRelease passes a release on to each of its lanes.
func (w *eventRun) routeRelease(rel contract.Release) {
	for _, lr := range rel.Lanes {
		if l := w.lanes[lr.Endpoint]; l != nil && !l.release.SendAsync(lr) {
			// It has a release waiting already: this one repeats it.
			w.logger.Info("ignoring a repeated release", "endpoint_id", lr.Endpoint, "sequence", rel.Sequence)
		}
	}
}

// operatorLane is the lane an operator's signal is for.
func (w *eventRun) operatorLane(endpoint, signal string) *laneRun {
	if endpoint != "" {
		l := w.lanes[endpoint]
		if l == nil {
			w.logger.Warn("ignoring an operator's signal for an endpoint this event is not delivered to", "signal", signal, "endpoint_id", endpoint)
		}
		return l
	}
	if len(w.order) == 1 {
		return w.order[0]
	}
	var dead []*laneRun
	for _, l := range w.order {
		if l.status.State == contract.StateDeadLettered {
			dead = append(dead, l)
		}
	}
	if len(dead) == 1 {
		return dead[0]
	}
	w.logger.Warn("ignoring an operator's signal without endpoint_id: it must name one of the event's dead-lettered deliveries", "signal", signal, "dead_lettered", len(dead))
	return nil
}

// laneRun is one delivery of the event.
type laneRun struct {
	w        *eventRun
	endpoint string
	in       LaneInput
	ev       contract.DeliverInput
	status   contract.LaneStatus
	attempts int32
	// release, replay, skip and circuitClosed carry the signals dispatch
	// routed here.
	release, replay, skip, circuitClosed workflow.Channel
	// window is the lane's recovery window: its endpoint's, or the event's.
	window time.Duration
	// windowStart is when the current delivery window began.
	windowStart time.Time
	// windows counts the delivery windows of this lane in this run; with
	// the run's ID and the endpoint it names the window a dead letter ends.
	windows int
	// follows is the generation of the dead letter whose replay began the
	// current window (0: the first): what the window's dead letter is
	// written after, in any run (a Reset's included).
	follows int32
	// replayed: the next window is a replay's, whose first attempt probes
	// an open circuit (DeliverInput.Probe).
	replayed bool
	// done: run returned.
	done bool
	// parked is what the lane waits on while no attempt of it is in
	// flight, the moments a continue-as-new may carry it (carry); the
	// window's state below goes with parkedCircuit and parkedWindowEnd.
	parked parkedOn
	// retrying, offset and failure: the window's rest runs as regular
	// activities, counting attempts on from offset, and failure is the dead
	// letter's reason if nothing else answers before the window ends.
	retrying bool
	offset   int32
	failure  string
	// waitUntil is when the wait on an open circuit ends; dueReason is the
	// reason of the dead letter written when the window ends.
	waitUntil time.Time
	dueReason string
	// turnStart and turnUntil are when a throttled wait (parkedTurn) began
	// and ends; turnSlot: its attempt holds a reserved send slot; probe:
	// its attempt probes an open circuit.
	turnStart, turnUntil time.Time
	turnSlot, probe      bool
}

// parkedOn is what a lane with no attempt in flight waits on.
type parkedOn int

const (
	parkedNot       parkedOn = iota
	parkedRelease            // its sequencer's release
	parkedCircuit            // its endpoint's open circuit (waitCircuit)
	parkedWindowEnd          // its window's end, to write its dead letter
	parkedOperator           // a replay or skip of its dead letter
	parkedTurn               // its throttled attempt's turn (waitTurn)
)

// carry is the lane's input to the run a continue-as-new starts: where it
// stands, with what its channels hold that it has not taken (a release, a
// replay or skip of its dead letter, a circuit's close). Only a parked or
// ended lane is carried (mayContinueAsNew); now is when.
func (l *laneRun) carry(now time.Time) LaneInput {
	li := LaneInput{Endpoint: l.endpoint, RecoveryWindow: l.in.RecoveryWindow, Timeout: l.in.Timeout, Attempts: l.attempts, Windows: l.windows, Follows: l.follows}
	if l.done {
		li.Finished = l.status.State
		return li
	}
	release := contract.LaneRelease{Endpoint: l.endpoint, Previous: l.ev.Previous, Skipped: l.ev.Skipped}
	switch l.parked {
	case parkedRelease:
		var rel contract.LaneRelease
		if l.release.ReceiveAsync(&rel) {
			li.Released = &rel
		}
	case parkedCircuit, parkedWindowEnd:
		li.Released = &release
		li.Resume = &LaneResume{WindowStart: l.windowStart, Retrying: l.retrying, AttemptOffset: l.offset, Failure: l.failure}
		if l.parked == parkedWindowEnd {
			li.Resume.DeadLetterDue = l.dueReason
		} else {
			li.Resume.WaitUntil = l.waitUntil
			li.Resume.Woken = l.circuitClosed.ReceiveAsync(nil)
		}
	case parkedTurn:
		// Waiting one's turn spends no window: the time waited so far moves
		// the window's start on, as the wait's end would have, and the new
		// run waits out the rest.
		li.Released = &release
		li.Resume = &LaneResume{WindowStart: l.windowStart.Add(now.Sub(l.turnStart)), Retrying: l.retrying, AttemptOffset: l.offset, Failure: l.failure,
			TurnUntil: l.turnUntil, TurnSlot: l.turnSlot, Probe: l.probe, Woken: l.circuitClosed.ReceiveAsync(nil)}
	case parkedOperator:
		li.Released = &release
		dl := &DeadLetter{Generation: l.status.Generation, Reason: l.status.Reason}
		var r contract.Replay
		for dl.Replay == nil && l.replay.ReceiveAsync(&r) {
			if r.Generation == 0 || r.Generation >= dl.Generation {
				r.Generation = max(r.Generation, dl.Generation)
				dl.Replay = &r
			}
		}
		var sk contract.Skip
		for dl.Skip == nil && l.skip.ReceiveAsync(&sk) {
			if sk.Generation == 0 || sk.Generation >= dl.Generation {
				sk.Generation = max(sk.Generation, dl.Generation)
				dl.Skip = &sk
			}
		}
		li.DeadLetter = dl
	}
	return li
}

// holdIfLong keeps a lane whose wait just ended parked, for good, once the
// history is past holding (eventRun.hold): the continue-as-new ends the run
// as soon as the other lanes' attempts in flight are in, and the lane's
// next attempt is the new run's, at once.
func (l *laneRun) holdIfLong(ctx workflow.Context) error {
	if !l.w.hold(ctx) {
		return nil
	}
	l.waitUntil = workflow.Now(ctx)
	return workflow.Await(ctx, func() bool { return false })
}

// setState records the lane's state for the query and, when publish is
// set, the event's search attributes.
func (l *laneRun) setState(ctx workflow.Context, s contract.State, publish bool) {
	l.status.State = s
	if publish {
		l.w.publish(ctx)
	}
}

// run is the lane: its release, its delivery windows, its dead letters and
// an operator's answers to them, until it is delivered or skipped.
func (l *laneRun) run(ctx workflow.Context) error {
	var gen int32
	switch {
	case l.in.DeadLetter != nil:
		// Started again on its dead letter (from the ledger, by the
		// starter): released before, with the lane's position the replay
		// still owes the receiver.
		gen = l.in.DeadLetter.Generation
	case l.in.Finished != "":
		return nil // ended in an earlier run
	case l.in.Released != nil:
	default:
		var rel contract.LaneRelease
		l.parked = parkedRelease
		l.release.Receive(ctx, &rel)
		l.parked = parkedNot
		l.ev = l.ev.WithRelease(rel)
		l.setState(ctx, contract.StateDelivering, false)
	}

	ledger := workflow.WithActivityOptions(ctx, ledgerOptions())
	resume := l.in.Resume
	for {
		if gen == 0 {
			var res contract.DeliverResult
			var err error
			if resume != nil && resume.DeadLetterDue != "" {
				err = dueFailure(resume.DeadLetterDue) // the window failed in the run before
			} else {
				res, err = l.deliverWindow(ctx, resume)
			}
			resume = nil
			switch {
			case err == nil && res.Skipped:
				return l.foundFinished(ctx, contract.StateSkipped)
			case err == nil && res.DeadLettered > 0:
				// Reset to before its dead letter: it waits on it again.
				gen = res.DeadLettered
				l.status.Generation = gen
				l.setState(ctx, contract.StateDeadLettered, true)
			case err == nil:
				return l.delivered(ctx, res)
			default:
				var finished contract.State
				if gen, finished, err = l.deadLetter(ctx, err); err != nil {
					return err
				}
				if finished != "" {
					return l.foundFinished(ctx, finished)
				}
			}
		}
		replay, skip := l.awaitOperator(ctx, gen)
		if replay != nil {
			gen = replay.Generation
		} else {
			gen = skip.Generation
		}
		l.status.Generation = gen
		// The claim on the dead letter row decides between an API call and a
		// signal sent by hand: an action that lost it takes no effect, and
		// the lane waits for the one that won (the API signals it).
		var claim contract.OperatorResult
		if skip != nil {
			in := contract.SkipInput{Tenant: l.ev.Tenant, EventID: l.ev.EventID, EndpointID: l.endpoint, CorrelationID: l.ev.CorrelationID, Sequence: l.ev.Sequence, Generation: gen, By: skip.By, Note: skip.Note}
			if err := workflow.ExecuteActivity(ledger, contract.ActivitySkip, in).Get(ctx, &claim); err != nil {
				return fmt.Errorf("record skip: %w", err)
			}
			if claim.Lost != "" {
				l.w.logger.Warn("skip not taken: the dead letter was claimed otherwise first", "endpoint_id", l.endpoint, "generation", gen, "claimed", claim.Lost)
				if claim.Generation > 0 {
					gen, l.status.Generation = claim.Generation, claim.Generation // the ledger's
				}
				continue
			}
			l.status.Generation, l.status.Reason = 0, ""
			// Published now, not when the event ends: its other lanes may
			// run on for long, and DeadLetteredEndpointIds must stop naming
			// this one. (A delivered lane was delivering, not dead-lettered:
			// its end changes no endpoint list and waits for the event's.)
			l.setState(ctx, contract.StateSkipped, true)
			return nil
		}
		rin := contract.ReplayedInput{Tenant: l.ev.Tenant, EventID: l.ev.EventID, EndpointID: l.endpoint, Generation: gen, By: replay.By}
		if err := workflow.ExecuteActivity(ledger, contract.ActivityReplayed, rin).Get(ctx, &claim); err != nil {
			return fmt.Errorf("record replay: %w", err)
		}
		if claim.Lost != "" {
			l.w.logger.Warn("replay not taken: the dead letter was claimed otherwise first", "endpoint_id", l.endpoint, "generation", gen, "claimed", claim.Lost)
			if claim.Generation > 0 {
				gen, l.status.Generation = claim.Generation, claim.Generation // the ledger's
			}
			continue
		}
		l.follows, gen = gen, 0
		l.replayed = true
		l.status.Generation, l.status.Reason = 0, ""
		l.setState(ctx, contract.StateDelivering, true)
	}
}

// delivered ends a delivered lane. The delivering attempt handed it over to
// its sequencer unless that failed: then it is repeated until it succeeds.
func (l *laneRun) delivered(ctx workflow.Context, res contract.DeliverResult) error {
	l.attempts = res.Attempt
	l.setState(ctx, contract.StateDelivered, false)
	switch {
	case res.HandOffPending && l.ev.DeferHandOver:
		l.w.handOvers = append(l.w.handOvers, contract.LaneDone{Endpoint: l.endpoint})
	case res.HandOffPending:
		return l.handOver(ctx, false)
	}
	return nil
}

// foundFinished ends a lane the ledger has as finished although its
// delivery seemed to fail: the delivering attempt's result never reached
// the workflow. Its hand-over may not have happened either, so it is made
// again (a repeat is harmless).
func (l *laneRun) foundFinished(ctx workflow.Context, state contract.State) error {
	l.w.logger.Warn("the ledger has the delivery as finished; not dead-lettering it", "endpoint_id", l.endpoint, "state", state)
	l.status.Generation, l.status.Reason = 0, ""
	l.setState(ctx, state, false)
	return l.handOver(ctx, state == contract.StateSkipped)
}

// handOver tells the sequencer that the delivery is finished (Finish),
// until it succeeds.
func (l *laneRun) handOver(ctx workflow.Context, skipped bool) error {
	in := contract.FinishInput{Tenant: l.ev.Tenant, CorrelationID: l.ev.CorrelationID, Sequence: l.ev.Sequence, EventID: l.ev.EventID,
		Lanes: []contract.LaneDone{{Endpoint: l.endpoint, Skipped: skipped}}}
	if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localOptions()), contract.ActivityFinish, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("hand over to the sequencer: %w", err)
	}
	return nil
}

// deadLetter waits out what is left of the window of a delivery that did
// not give up for good, writes the dead letter and returns its generation;
// or the delivery's final state when the ledger has it finished after all.
func (l *laneRun) deadLetter(ctx workflow.Context, failure error) (int32, contract.State, error) {
	reason, permanent := failureReason(failure)
	if !permanent {
		// Temporal stops retrying as soon as the next attempt would fall
		// past the window; the delivery still owns its whole window, so the
		// dead letter is written when the window ends, not earlier.
		if rest := l.windowEnd().Sub(workflow.Now(ctx)); rest > 0 {
			l.parked, l.dueReason = parkedWindowEnd, reason
			if err := workflow.Sleep(ctx, rest); err != nil {
				return 0, "", err
			}
			if err := l.holdIfLong(ctx); err != nil {
				return 0, "", err
			}
			l.parked = parkedNot
		}
	}
	var res contract.DeadLetterResult
	window := fmt.Sprintf("%s/%s/%d", workflow.GetInfo(ctx).WorkflowExecution.RunID, l.endpoint, l.windows)
	in := contract.DeadLetterInput{Event: l.ev, Reason: reason, Window: window, WindowStart: l.windowStart, Follows: l.follows}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ledgerOptions()), contract.ActivityWriteDeadLetter, in).Get(ctx, &res); err != nil {
		return 0, "", fmt.Errorf("write dead letter: %w", err)
	}
	if res.Finished != "" {
		return 0, res.Finished, nil
	}
	// The ledger had the window's dead letter already (a Reset ran the
	// window again) with an operator's action claimed on it: the lane
	// takes it as the signal it stands for (awaitOperator). A Reset may have dropped the signal itself (its reapply left
	// signals out), and the API's 202 promised the action.
	switch res.Claimed {
	case contract.DeadLetterClaimReplayed:
		l.replay.SendAsync(contract.Replay{EndpointID: l.endpoint, Generation: res.Generation, By: res.By})
	case contract.DeadLetterClaimSkipped:
		l.skip.SendAsync(contract.Skip{EndpointID: l.endpoint, Generation: res.Generation, By: res.By, Note: res.Note})
	}
	l.status.Generation, l.status.Reason = res.Generation, reason
	l.setState(ctx, contract.StateDeadLettered, true)
	l.w.logger.Warn("delivery dead-lettered", "correlation_id", l.ev.CorrelationID, "sequence", l.ev.Sequence, "endpoint_id", l.endpoint, "generation", res.Generation, "reason", reason)
	return res.Generation, "", nil
}

// awaitOperator waits for a replay or a skip of dead letter gen, or of a
// later one, and returns it with the generation it is for. One that names
// an earlier generation is ignored, and so is one without a generation
// (sent by hand from the Web UI) that was sent before this dead letter was
// written: both were meant for something else (a double click, a replay
// pressed while the delivery was still running) and must not act on this
// one. One that names a later generation was sent for a dead letter that a
// run an operator's Reset discarded wrote: the ledger has it, and the
// claim on its row (Skip, Replayed) decides whether it acts.
func (l *laneRun) awaitOperator(ctx workflow.Context, gen int32) (*contract.Replay, *contract.Skip) {
	l.parked = parkedOperator
	defer func() { l.parked = parkedNot }()
	var replay contract.Replay
	var skip contract.Skip
	for l.replay.ReceiveAsync(&replay) {
		if replay.Generation >= gen {
			return &replay, nil
		}
		l.w.logger.Info("ignoring a replay sent before this dead letter", "endpoint_id", l.endpoint, "generation", replay.Generation, "current", gen)
	}
	for l.skip.ReceiveAsync(&skip) {
		if skip.Generation >= gen {
			return nil, &skip
		}
		l.w.logger.Info("ignoring a skip sent before this dead letter", "endpoint_id", l.endpoint, "generation", skip.Generation, "current", gen)
	}
	for {
		var gotReplay, gotSkip bool
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(l.replay, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &replay); gotReplay = true })
		sel.AddReceive(l.skip, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &skip); gotSkip = true })
		sel.Select(ctx)
		switch {
		case gotReplay && (replay.Generation >= gen || replay.Generation == 0):
			replay.Generation = max(replay.Generation, gen)
			return &replay, nil
		case gotSkip && (skip.Generation >= gen || skip.Generation == 0):
			skip.Generation = max(skip.Generation, gen)
			return nil, &skip
		}
		l.w.logger.Info("ignoring a replay or skip of an earlier dead letter", "endpoint_id", l.endpoint, "current", gen)
	}
}

func (l *laneRun) windowEnd() time.Time { return l.windowStart.Add(l.window) }

// deliverWindow delivers within one recovery window. The first attempt is a
// local activity, which needs no activity task and adds one marker to the
// history (the lanes released together run theirs side by side, in one
// workflow task). If it fails in a way worth retrying, the rest of the
// window runs as a regular activity on the same schedule as DeliverOptions
// (about 1, 5, 21, 85 s after the first attempt), so a long outage is
// retried by Temporal's timers, not by a workflow task held open.
//
// A window resumed after a continue-as-new (resume) goes on where it stood:
// from its own start, waiting out the rest of its wait on the open circuit,
// in the phase it was in.
func (l *laneRun) deliverWindow(ctx workflow.Context, resume *LaneResume) (contract.DeliverResult, error) {
	// An event with several lanes hands their deliveries over together
	// (handOverTogether).
	l.ev.DeferHandOver = len(l.w.order) > 1
	ev := l.ev
	if resume == nil {
		ev.Probe, l.replayed = l.replayed, false
		l.windowStart = workflow.Now(ctx)
		l.windows++
		l.retrying, l.offset, l.failure = false, 0, ""
	} else {
		l.retrying, l.offset, l.failure = resume.Retrying, resume.AttemptOffset, resume.Failure
		ev.Probe = resume.Probe
		if d := resume.WaitUntil.Sub(workflow.Now(ctx)); d > 0 {
			if err := l.waitCircuit(ctx, d); err != nil {
				return contract.DeliverResult{}, err
			}
		}
		if !resume.TurnUntil.IsZero() {
			if err := l.waitTurn(ctx, &ev, resume.TurnUntil.Sub(workflow.Now(ctx)), resume.TurnSlot); err != nil {
				return contract.DeliverResult{}, err
			}
		}
		if resume.Retrying {
			ev.AttemptOffset = resume.AttemptOffset
			return l.retryWindow(ctx, ev, dueFailure(resume.Failure))
		}
	}
	var res contract.DeliverResult
	var err error
	for {
		lctx := workflow.WithLocalActivityOptions(ctx, FirstAttemptOptions(ev.Timeout))
		l.w.firstAttempts++
		res = contract.DeliverResult{}
		err = workflow.ExecuteLocalActivity(lctx, contract.ActivityDeliver, ev).Get(ctx, &res)
		l.w.firstAttempts--
		if err == nil && res.CircuitOpen > 0 {
			ev.Probe = false // another probe was out: this one waits its turn
			// A slot reserved before the wait is stale once the circuit
			// closes: every head that held one would send at once.
			ev.SlotReserved = false
			if err := l.waitCircuit(ctx, res.CircuitOpen); err != nil {
				return contract.DeliverResult{}, err
			}
			continue
		}
		if err != nil || res.Throttled <= 0 {
			break
		}
		if err := l.waitTurn(ctx, &ev, res.Throttled, !res.InFlightFull); err != nil {
			return res, err
		}
	}
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
	if wait >= l.windowEnd().Sub(workflow.Now(ctx)) {
		return res, err // no attempt fits in the window any more
	}
	l.setState(ctx, contract.StateDelivering, true)
	if err := workflow.Sleep(ctx, wait); err != nil {
		return res, err
	}
	ev.AttemptOffset, ev.SlotReserved, ev.Probe = 1, false, false
	return l.retryWindow(ctx, ev, err)
}

// retryWindow is the rest of a window after its first attempt failed (or
// a window resumed there): regular activities, retried by Temporal on
// DeliverOptions' schedule, until one answers or the window is spent;
// failure is what the window ends with when nothing else answers.
func (l *laneRun) retryWindow(ctx workflow.Context, ev contract.DeliverInput, failure error) (contract.DeliverResult, error) {
	reason, _ := failureReason(failure)
	l.retrying, l.offset, l.failure = true, ev.AttemptOffset, reason
	for {
		// The timer may fire late (no worker was up): what is left of the
		// window bounds the rest, and nothing left means it is spent.
		rest := l.windowEnd().Sub(workflow.Now(ctx))
		if rest <= 0 {
			return contract.DeliverResult{}, failure
		}
		opts := DeliverOptions(l.window, ev.Timeout)
		opts.ScheduleToCloseTimeout = rest
		opts.RetryPolicy.InitialInterval = 4 * time.Second
		// A window shorter than that (an operator's or a test's) still retries.
		opts.RetryPolicy.MaximumInterval = max(opts.RetryPolicy.MaximumInterval, opts.RetryPolicy.InitialInterval)
		res := contract.DeliverResult{}
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), contract.ActivityDeliver, ev).Get(ctx, &res)
		if err == nil && res.CircuitOpen > 0 {
			// Nothing was sent: the attempt is made again, with its number,
			// in a fresh slot (as in the first attempt's loop).
			ev.AttemptOffset, ev.SlotReserved = res.Attempt-1, false
			l.offset = ev.AttemptOffset
			if err := l.waitCircuit(ctx, res.CircuitOpen); err != nil {
				return contract.DeliverResult{}, err
			}
			continue
		}
		if err != nil || res.Throttled <= 0 {
			return res, err
		}
		// The throttled attempt is made again, with its number.
		ev.AttemptOffset = res.Attempt - 1
		l.offset = ev.AttemptOffset
		if err := l.waitTurn(ctx, &ev, res.Throttled, !res.InFlightFull); err != nil {
			return res, err
		}
	}
}

// dueFailure is a window's failure carried over a continue-as-new by its
// reason (LaneResume.Failure, DeadLetterDue): failureReason gives it back
// as it was, a failure that did not give up before the window's end.
type dueFailure string

func (f dueFailure) Error() string { return string(f) }

// lateSlot is how late a throttled attempt's timer may fire and still send
// in the slot it reserved; later (no worker was up), it reserves again
// rather than send in a burst with every other late lane of its endpoint.
const lateSlot = time.Second

// waitTurn waits out a throttled attempt's turn (d) under its endpoint's
// rate limit (reserved: a send slot is reserved for the attempt at its
// turn), or its cap on attempts in flight or its tenant disabled (no slot),
// on one timer, and moves the window's start on by the time waited:
// waiting one's turn is not a failure, so it never spends the window, and
// a throttled delivery is never dead-lettered for it. Order holds: the
// lane's head waits, and nothing behind it is released meanwhile.
//
// A lane wake (SignalCircuitClosed, which the starter also sends when an
// operator changes the endpoint's rate_limit and resets its reserved
// slots) ends the wait early, without the slot: the attempt reserves a
// fresh one under the endpoint's rate as it is now, so a faster rate takes
// effect at once and a woken head never sends in a slot the reset gave
// away. One kept from before the wait ends it at once, as in waitCircuit:
// it may be the wake for the reset this head's slot came before.
//
// The lane is parked meanwhile (parkedTurn): a tenant disabled for hours,
// re-checked every minute, or a long queue for a place in flight, must let
// the event continue as new like any other wait, or its history would grow
// to Temporal's limit. A d at or below zero (a turn a continue-as-new
// carried, come already) makes the attempt at once.
func (l *laneRun) waitTurn(ctx workflow.Context, ev *contract.DeliverInput, d time.Duration, reserved bool) error {
	before := workflow.Now(ctx)
	woken := false
	if l.circuitClosed.ReceiveAsync(nil) {
		woken = true
	} else if d > 0 {
		l.parked, l.turnStart, l.turnUntil, l.turnSlot, l.probe = parkedTurn, before, before.Add(d), reserved, ev.Probe
		tctx, cancel := workflow.WithCancel(ctx)
		var err error
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(workflow.NewTimer(tctx, d), func(f workflow.Future) { err = f.Get(ctx, nil) })
		sel.AddReceive(l.circuitClosed, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); woken = true })
		sel.Select(ctx)
		cancel()
		if err == nil {
			err = l.holdIfLong(ctx)
		}
		l.parked = parkedNot
		if err != nil {
			return err
		}
	}
	waited := workflow.Now(ctx).Sub(before)
	l.windowStart = l.windowStart.Add(waited)
	ev.SlotReserved = reserved && !woken && waited-d < lateSlot
	return nil
}

// waitCircuit waits, on one timer, until the endpoint's open circuit may
// let an attempt through (d, as the attempt was told), the window ends, or
// the circuit closes (SignalCircuitClosed, which the starter sends to the
// lanes delivering to an endpoint when its circuit closes: a probe's
// success or an operator's enabling lets them send now, not when their
// timer says), whichever is first; the attempt is then made again. A close
// signalled before this wait began ends it at once: the attempt looks
// again, and if the circuit opened meanwhile it is told so and waits.
// Unlike waitTurn it spends the window: the endpoint is failing. An attempt
// told so at or past the window's end gets an error of type
// ErrTypeCircuitOpen, which dead-letters the delivery as
// contract.CircuitOpenReason: the look made at the window's end keeps a
// circuit that closed meanwhile from dead-lettering it. Order holds: the
// lane's head waits, and nothing behind it is released meanwhile.
func (l *laneRun) waitCircuit(ctx workflow.Context, d time.Duration) error {
	rest := l.windowEnd().Sub(workflow.Now(ctx))
	if rest <= 0 {
		return temporal.NewApplicationError(contract.CircuitOpenReason, contract.ErrTypeCircuitOpen)
	}
	if l.circuitClosed.ReceiveAsync(nil) {
		return nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	var err error
	sel := workflow.NewSelector(ctx)
	l.parked, l.waitUntil = parkedCircuit, workflow.Now(ctx).Add(min(d, rest))
	timer := workflow.NewTimerWithOptions(tctx, min(d, rest), workflow.TimerOptions{Summary: "endpoint circuit open"})
	sel.AddFuture(timer, func(f workflow.Future) { err = f.Get(ctx, nil) })
	sel.AddReceive(l.circuitClosed, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.Select(ctx)
	if err == nil {
		err = l.holdIfLong(ctx)
	}
	l.parked = parkedNot
	return err
}

// failureReason explains why delivery stopped and whether it stopped before
// the window was spent (a permanent rejection), in at most
// contract.MaxReasonBytes: the reason rides in the inputs of each lane
// (a continue-as-new's, a restart's), and the attempt keeps the whole
// answer.
func failureReason(err error) (string, bool) {
	reason, permanent := failureCause(err)
	return contract.CapReason(reason), permanent
}

func failureCause(err error) (string, bool) {
	var due dueFailure
	if errors.As(err, &due) {
		return string(due), false
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case contract.ErrTypePermanent:
			return "permanent rejection: " + appErr.Message(), true
		case contract.ErrTypeEndpointGone:
			return contract.EndpointGonePrefix + appErr.Message(), true
		case contract.ErrTypeEndpointDisabled:
			return contract.EndpointDisabledPrefix + appErr.Message(), true
		case contract.ErrTypeCircuitOpen:
			return contract.CircuitOpenReason, false
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
	return contract.WindowSpentPrefix + last, false
}
