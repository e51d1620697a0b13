package workflows

import (
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/activities"
)

// SequencerWorkflowName is the sequencer's registered workflow type.
const SequencerWorkflowName = "SequencerWorkflow"

// Defaults of SequencerInput's tunables.
const (
	DefaultMaxHistory  = 4000
	DefaultIdleTimeout = 10 * time.Minute
)

// FastPathMaxHistory is the continue-as-new threshold of the sequencers that
// fast-path events start. Their tasks are mostly updates' speculative
// workflow tasks, which a worker that does not have the sequencer cached
// must replay within the task's timeout, or the task is lost and retried
// from the start; seen in a bench run with two worker processes where a
// 2,300-event sequencer never got past its replay on a busy machine. A
// shorter history keeps that replay quick. Sequencers started before keep
// DefaultMaxHistory: it is part of their input, so their replays do not
// change.
const FastPathMaxHistory = 1000

// SequencerInput starts (or continues) a correlation's sequencer.
type SequencerInput struct {
	CorrelationID string `json:"correlation_id"`
	// State is carried across continue-as-new; nil on a fresh start, which
	// loads the cursor from the ledger.
	State *SequencerState `json:"state,omitempty"`
	// MaxHistory is the history length past which it continues as new.
	MaxHistory int `json:"max_history,omitempty"`
	// IdleTimeout ends a sequencer with nothing parked or in flight.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
}

// SequencerState is a sequencer's whole memory: the next sequence to
// release, the event released and not finished yet, and the arrivals parked
// until their turn. It stays small: parked arrivals are bounded by what the
// producer sent ahead.
type SequencerState struct {
	Next     int64                `json:"next"`
	Released *activities.Arrival  `json:"released,omitempty"`
	Parked   []activities.Arrival `json:"parked,omitempty"`
	// Skipped are sequences skipped since the last delivered one; every
	// release carries them to the receiver until an event is delivered.
	Skipped []int64 `json:"skipped,omitempty"`
}

// SequencerWorkflow releases a correlation's events strictly in sequence:
// N only after N-1 is done (delivered or skipped). Duplicate arrivals and
// duplicate done signals are ignored. It continues as new before its history
// grows large, draining buffered signals first so none is lost at the
// boundary, and ends when idle; a later arrival starts it again from the
// cursor kept in Postgres.
func SequencerWorkflow(ctx workflow.Context, in SequencerInput) error {
	logger := workflow.GetLogger(ctx)
	maxHistory := in.MaxHistory
	if maxHistory <= 0 {
		maxHistory = DefaultMaxHistory
	}
	idle := in.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}

	// The arrive update handler is registered before the first blocking call,
	// so an update-with-start that starts this run is not refused; it waits
	// for the state to be loaded.
	// Each handled update wakes the main loop (wake), which owns
	// continue-as-new and the idle end.
	st := in.State
	var releaseNow func(a activities.Arrival) activities.Announcement
	var handOff func(d Done) activities.Handoff
	lastActivity := workflow.Now(ctx)
	wake := workflow.NewBufferedChannel(ctx, 1)
	// ready holds an update until the state is loaded (handOff is set, with
	// releaseNow, before the first blocking call after loading) and wakes
	// the main loop.
	ready := func(ctx workflow.Context) error {
		if err := workflow.Await(ctx, func() bool { return handOff != nil }); err != nil {
			return err
		}
		lastActivity = workflow.Now(ctx)
		wake.SendAsync(true)
		return nil
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateArrive, func(ctx workflow.Context, a activities.Arrival) (activities.Announcement, error) {
		if err := ready(ctx); err != nil {
			return activities.Announcement{}, err
		}
		return releaseNow(a), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateFinished, func(ctx workflow.Context, d Done) (activities.Handoff, error) {
		if err := ready(ctx); err != nil {
			return activities.Handoff{}, err
		}
		return handOff(d), nil
	}); err != nil {
		return err
	}
	if st == nil {
		var a *activities.Activities
		lctx := workflow.WithLocalActivityOptions(ctx, localOptions)
		var cur activities.Cursor
		if err := workflow.ExecuteLocalActivity(lctx, a.LoadCursor, in.CorrelationID).Get(ctx, &cur); err != nil {
			return err
		}
		st = &SequencerState{Next: cur.Next, Skipped: cur.Skipped}
	}
	parked := make(map[int64]string, len(st.Parked))
	for _, p := range st.Parked {
		parked[p.Sequence] = p.EventID
	}
	snapshot := func() SequencerState {
		s := SequencerState{Next: st.Next, Released: st.Released, Skipped: st.Skipped, Parked: make([]activities.Arrival, 0, len(parked))}
		for seq, id := range parked {
			s.Parked = append(s.Parked, activities.Arrival{Sequence: seq, EventID: id})
		}
		sort.Slice(s.Parked, func(i, j int) bool { return s.Parked[i].Sequence < s.Parked[j].Sequence })
		return s
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (SequencerState, error) { return snapshot(), nil }); err != nil {
		return err
	}

	arrivedCh := workflow.GetSignalChannel(ctx, SignalArrived)
	doneCh := workflow.GetSignalChannel(ctx, SignalDone)
	var releases []workflow.Future

	onArrived := func(a activities.Arrival) {
		switch {
		case a.Sequence < st.Next:
			logger.Info("ignoring arrival of a finished sequence", "sequence", a.Sequence, "event_id", a.EventID)
		case st.Released != nil && st.Released.Sequence == a.Sequence:
			// A repeated announcement of the event in flight.
		default:
			if prev, ok := parked[a.Sequence]; ok && prev != a.EventID {
				logger.Error("two events claim one sequence; keeping the first", "sequence", a.Sequence, "kept", prev, "ignored", a.EventID)
				return
			}
			parked[a.Sequence] = a.EventID
		}
	}
	onDone := func(d Done) {
		if st.Released == nil || st.Released.Sequence != d.Sequence {
			return // a repeated done
		}
		st.Next = d.Sequence + 1
		st.Released = nil
		if d.Skipped {
			st.Skipped = append(st.Skipped, d.Sequence)
		} else {
			st.Skipped = nil
		}
	}
	releaseNext := func() {
		if st.Released != nil {
			return
		}
		id, ok := parked[st.Next]
		if !ok {
			return
		}
		delete(parked, st.Next)
		st.Released = &activities.Arrival{Sequence: st.Next, EventID: id}
		releases = append(releases, workflow.SignalExternalWorkflow(ctx, id, "", SignalRelease, Release{Sequence: st.Next, Skipped: st.Skipped}))
	}
	// releaseNow handles an arrival announced by update: an event that is
	// next with nothing in flight is released in the answer, without a
	// signal; any other is parked as a signalled arrival is. A repeated
	// announcement gets the answer the first one got.
	releaseNow = func(a activities.Arrival) activities.Announcement {
		if r := st.Released; r != nil && r.Sequence == a.Sequence {
			return activities.Announcement{Released: r.EventID == a.EventID, Skipped: st.Skipped}
		}
		onArrived(a)
		if st.Released == nil && a.Sequence == st.Next && parked[a.Sequence] == a.EventID {
			delete(parked, a.Sequence)
			st.Released = &activities.Arrival{Sequence: a.Sequence, EventID: a.EventID}
			return activities.Announcement{Released: true, Skipped: st.Skipped}
		}
		return activities.Announcement{}
	}
	// handOff handles a finished event reported by update: the sequencer
	// moves on and releases the next parked event without a signal of its
	// own; the answer names it, and the finished event's workflow signals
	// it. A repeated report gets the event released after it again.
	handOff = func(d Done) activities.Handoff {
		onDone(d)
		if st.Released == nil {
			if id, ok := parked[st.Next]; ok {
				delete(parked, st.Next)
				st.Released = &activities.Arrival{Sequence: st.Next, EventID: id}
			}
		}
		if r := st.Released; r != nil && r.Sequence > d.Sequence {
			return activities.Handoff{EventID: r.EventID, Release: Release{Sequence: r.Sequence, Skipped: st.Skipped}}
		}
		return activities.Handoff{}
	}
	drain := func() bool {
		got := false
		for {
			var a activities.Arrival
			if !arrivedCh.ReceiveAsync(&a) {
				break
			}
			onArrived(a)
			got = true
		}
		for {
			var d Done
			if !doneCh.ReceiveAsync(&d) {
				break
			}
			onDone(d)
			got = true
		}
		return got
	}
	settleReleases := func() {
		for _, f := range releases {
			if err := f.Get(ctx, nil); err != nil {
				logger.Error("release signal failed", "error", err)
			}
		}
		releases = releases[:0]
	}

	var idleTimer workflow.Future
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	for {
		releaseNext()
		busy := st.Released != nil || len(parked) > 0
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() > maxHistory || info.GetContinueAsNewSuggested() {
			drain()
			releaseNext()
			settleReleases()
			if !drain() && workflow.AllHandlersFinished(ctx) {
				s := snapshot()
				return workflow.NewContinueAsNewError(ctx, SequencerWorkflow, SequencerInput{
					CorrelationID: in.CorrelationID, State: &s, MaxHistory: in.MaxHistory, IdleTimeout: in.IdleTimeout,
				})
			}
			continue
		}
		if !busy && idleTimer == nil {
			idleTimer = workflow.NewTimer(timerCtx, idle)
		}

		fired := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(arrivedCh, func(c workflow.ReceiveChannel, _ bool) {
			var a activities.Arrival
			c.Receive(ctx, &a)
			onArrived(a)
		})
		sel.AddReceive(doneCh, func(c workflow.ReceiveChannel, _ bool) {
			var d Done
			c.Receive(ctx, &d)
			onDone(d)
		})
		sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		if idleTimer != nil {
			sel.AddFuture(idleTimer, func(workflow.Future) { fired = true })
		}
		sel.Select(ctx)
		if !fired {
			lastActivity = workflow.Now(ctx)
			continue
		}
		idleTimer = nil
		// A pending skip list need not keep it alive: a fresh run reloads it
		// from the ledger (LoadCursor).
		busy = st.Released != nil || len(parked) > 0
		if quiet := workflow.Now(ctx).Sub(lastActivity); busy || quiet < idle {
			if !busy {
				// One timer per idle period, not one per signal.
				idleTimer = workflow.NewTimer(timerCtx, idle-quiet)
			}
			continue
		}
		settleReleases()
		if drain() {
			lastActivity = workflow.Now(ctx)
			continue
		}
		return nil
	}
}
