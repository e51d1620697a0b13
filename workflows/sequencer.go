package workflows

import (
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
)

// Defaults of SequencerInput's tunables.
const (
	// DefaultMaxHistory is the history length past which a sequencer
	// continues as new. Most of its tasks are the speculative tasks of
	// updates, which a worker that does not have the sequencer cached must
	// replay within the task's timeout; a short history keeps that quick
	// (a 2,300-event sequencer once never got past its replay on a busy
	// machine).
	DefaultMaxHistory = 1000
	// DefaultIdleTimeout ends a sequencer with nothing parked or released.
	// It is long: a start of the same workflow ID within a second of the
	// last run's is refused, and a fresh run pays a ledger load.
	DefaultIdleTimeout = 10 * time.Minute
)

// SequencerInput starts (or continues) a correlation's sequencer.
type SequencerInput struct {
	CorrelationID string `json:"correlation_id"`
	// State is carried across continue-as-new; nil on a fresh start, which
	// loads the correlation from the ledger.
	State *contract.SequencerState `json:"state,omitempty"`
	// MaxHistory is the history length past which it continues as new.
	MaxHistory int `json:"max_history,omitempty"`
	// IdleTimeout ends a sequencer with nothing parked or released.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
}

// SequencerWorkflow is the one authority on the order of a correlation's
// events: it releases sequence N only after N-1 is delivered or skipped.
// It learns of events by the arrive update (which the API sends when it
// accepts one) and of finished ones by the finished update (which the
// delivering attempt or the skip sends); each answer names the event
// released by it, if any, and the caller passes the release on: in the
// workflow's start input when the event is released on arrival, by the
// release signal otherwise. The sequencer itself sends nothing, so an
// event costs it no command.
//
// A fresh run (the first, or after an idle end, or after an operator
// terminated one) loads the correlation from the ledger: the cursor its
// last run moved, the skipped tail, and every stored event not finished,
// parked. The resync update merges the ledger in the same way into a
// running one, which repairs a sequencer that an operator reset to an
// earlier state. Both only ever move it forward: the ledger's cursor passes
// an event only once that event is delivered or skipped.
//
// It continues as new before its history grows long and ends when it has
// been idle for IdleTimeout.
func SequencerWorkflow(ctx workflow.Context, in SequencerInput) error {
	s := &sequencer{logger: workflow.GetLogger(ctx), correlation: in.CorrelationID, parked: map[int64]string{}}
	if in.State != nil {
		s.restore(*in.State)
	}
	maxHistory := in.MaxHistory
	if maxHistory <= 0 {
		maxHistory = DefaultMaxHistory
	}
	idle := in.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions())
	resync := func(ctx workflow.Context) error {
		var l contract.SequencerLoad
		if err := workflow.ExecuteLocalActivity(lctx, contract.ActivityLoadSequencer, in.CorrelationID).Get(ctx, &l); err != nil {
			return err
		}
		s.merge(l)
		return nil
	}

	// The handlers are registered before the first blocking call, so the
	// update that starts a run is not refused; they wait for the load.
	loaded := in.State != nil
	lastChange := workflow.Now(ctx)
	changes := 0
	handle := func(ctx workflow.Context) error {
		if err := workflow.Await(ctx, func() bool { return loaded }); err != nil {
			return err
		}
		changes++
		lastChange = workflow.Now(ctx)
		return nil
	}
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateArrive, func(ctx workflow.Context, ar contract.Arrival) (contract.Announcement, error) {
		if err := handle(ctx); err != nil {
			return contract.Announcement{}, err
		}
		return s.arrive(ar), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateFinished, func(ctx workflow.Context, d contract.Done) (contract.Handoff, error) {
		if err := handle(ctx); err != nil {
			return contract.Handoff{}, err
		}
		if !s.finished(d) {
			// A finished event this run did not release, past its cursor:
			// it lost its state (an operator's reset). The event's finisher
			// wrote the ledger first, so the ledger knows better.
			s.logger.Warn("finished event unknown to the sequencer; resyncing from the ledger", "sequence", d.Sequence, "event_id", d.EventID)
			if err := resync(ctx); err != nil {
				return contract.Handoff{}, err
			}
		}
		return s.handoffAfter(d.Sequence), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateResync, func(ctx workflow.Context) (contract.Handoff, error) {
		if err := handle(ctx); err != nil {
			return contract.Handoff{}, err
		}
		if err := resync(ctx); err != nil {
			return contract.Handoff{}, err
		}
		return s.handoffAfter(0), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueryState, func() (contract.SequencerState, error) { return s.snapshot(), nil }); err != nil {
		return err
	}
	if !loaded {
		if err := resync(ctx); err != nil {
			return err
		}
		loaded = true
	}

	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	var idleTimer workflow.Future
	for {
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() > maxHistory || info.GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			st := s.snapshot()
			return workflow.NewContinueAsNewError(ctx, SequencerWorkflow, SequencerInput{
				CorrelationID: in.CorrelationID, State: &st, MaxHistory: in.MaxHistory, IdleTimeout: in.IdleTimeout,
			})
		}
		// One timer per idle period, not one per update: each would cost
		// the history a start and a cancel.
		if !s.busy() && idleTimer == nil {
			rest := idle - workflow.Now(ctx).Sub(lastChange)
			if rest <= 0 && workflow.AllHandlersFinished(ctx) {
				return nil
			}
			idleTimer = workflow.NewTimer(timerCtx, max(rest, time.Second))
		}
		seen := changes
		if err := workflow.Await(ctx, func() bool { return changes != seen || (idleTimer != nil && idleTimer.IsReady()) }); err != nil {
			return err
		}
		if idleTimer != nil && idleTimer.IsReady() {
			idleTimer = nil
		}
	}
}

// sequencer is a SequencerWorkflow's state and its rules, apart from how
// messages reach it.
type sequencer struct {
	logger      interface{ Warn(string, ...any) }
	correlation string
	next        int64
	released    *contract.Arrival
	// parked maps a sequence to the event that arrived with it; it is only
	// ever read by key or through snapshot's sorted copy, so its iteration
	// order never decides anything.
	parked  map[int64]string
	skipped []int64
}

func (s *sequencer) restore(st contract.SequencerState) {
	s.next, s.released, s.skipped = st.Next, st.Released, st.Skipped
	for _, p := range st.Parked {
		s.parked[p.Sequence] = p.EventID
	}
}

func (s *sequencer) snapshot() contract.SequencerState {
	st := contract.SequencerState{Next: s.next, Released: s.released, Skipped: s.skipped, Parked: make([]contract.Arrival, 0, len(s.parked))}
	for seq, id := range s.parked {
		st.Parked = append(st.Parked, contract.Arrival{Sequence: seq, EventID: id})
	}
	sort.Slice(st.Parked, func(i, j int) bool { return st.Parked[i].Sequence < st.Parked[j].Sequence })
	return st
}

func (s *sequencer) busy() bool { return s.released != nil || len(s.parked) > 0 }

// arrive records an event's arrival and releases it when it is next and
// nothing is in flight. A repeated arrival gets the answer the first got.
func (s *sequencer) arrive(a contract.Arrival) contract.Announcement {
	if a.Sequence < s.next {
		return contract.Announcement{Finished: true}
	}
	if r := s.released; r != nil && r.Sequence == a.Sequence {
		return contract.Announcement{Released: r.EventID == a.EventID, Skipped: s.skipped}
	}
	if prev, ok := s.parked[a.Sequence]; ok && prev != a.EventID {
		// The ledger refuses a second key for a sequence, so this is a bug.
		s.logger.Warn("two events claim one sequence; keeping the first", "sequence", a.Sequence, "kept", prev, "ignored", a.EventID)
		return contract.Announcement{}
	}
	s.parked[a.Sequence] = a.EventID
	s.releaseNext()
	if r := s.released; r != nil && r.EventID == a.EventID {
		return contract.Announcement{Released: true, Skipped: s.skipped}
	}
	return contract.Announcement{}
}

// finished records that the released event is finished and releases the
// next one that has arrived. It reports false for a Done past the cursor
// that this sequencer did not release: its state is behind the ledger's.
// A repeated Done (at or before the cursor) changes nothing.
func (s *sequencer) finished(d contract.Done) bool {
	switch r := s.released; {
	case r != nil && r.Sequence == d.Sequence:
		s.next = d.Sequence + 1
		s.released = nil
		if d.Skipped {
			s.skipped = append(s.skipped, d.Sequence)
		} else {
			s.skipped = nil
		}
		s.releaseNext()
	case d.Sequence >= s.next:
		return false
	}
	return true
}

// handoffAfter names the event released after sequence seq, if any.
func (s *sequencer) handoffAfter(seq int64) contract.Handoff {
	if r := s.released; r != nil && r.Sequence > seq {
		return contract.Handoff{EventID: r.EventID, Release: contract.Release{Sequence: r.Sequence, Skipped: s.skipped}}
	}
	return contract.Handoff{}
}

// releaseNext releases the next sequence when it has arrived and nothing is
// in flight.
func (s *sequencer) releaseNext() {
	if s.released != nil {
		return
	}
	if id, ok := s.parked[s.next]; ok {
		delete(s.parked, s.next)
		s.released = &contract.Arrival{Sequence: s.next, EventID: id}
	}
}

// merge brings in what the ledger knows: a cursor past this one means those
// events finished (finishers write the ledger before they tell the
// sequencer), and stored events not finished have arrived. Then the next one
// is released if it can be.
func (s *sequencer) merge(l contract.SequencerLoad) {
	if l.Next > s.next {
		s.next, s.skipped = l.Next, l.Skipped
		if s.released != nil && s.released.Sequence < l.Next {
			s.released = nil
		}
		for _, p := range s.snapshot().Parked {
			if p.Sequence < l.Next {
				delete(s.parked, p.Sequence)
			}
		}
	}
	for _, p := range l.Pending {
		if p.Sequence < s.next || (s.released != nil && s.released.Sequence == p.Sequence) {
			continue
		}
		if _, ok := s.parked[p.Sequence]; !ok {
			s.parked[p.Sequence] = p.EventID
		}
	}
	s.releaseNext()
}
