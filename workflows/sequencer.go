package workflows

import (
	"slices"
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
// events. It keeps a lane per endpoint: it releases an event to endpoint E
// only once every earlier event of the correlation has arrived (so it knows
// which of them are meant for E) and every earlier one meant for E is
// delivered or skipped there. A dead letter at E holds back only E's lane;
// a missing sequence holds back every lane, since it may be meant for any.
// It learns of events by the arrive update (which the API sends when it
// accepts one, naming the endpoints it was routed to) and of finished
// deliveries by the finished update (which the delivering attempt or the
// skip sends); each answer names the lanes released by it, and the caller
// passes them on: in the workflow's start input for an event's own lanes
// released on arrival, by the release signal otherwise. The sequencer
// itself sends nothing, so a delivery costs it no command.
//
// A fresh run (the first, or after an idle end, or after an operator
// terminated one) loads the correlation from the ledger: its cursor, every
// stored event from it on with the lanes each has open, and each lane's
// position. The resync update merges the ledger in the same way into a
// running one, which repairs a sequencer that an operator reset to an
// earlier state. Both only ever move it forward: the ledger has a delivery
// finished only once it is delivered or skipped.
//
// It continues as new before its history grows long and ends when it has
// been idle for IdleTimeout.
func SequencerWorkflow(ctx workflow.Context, in SequencerInput) error {
	s := newSequencer(workflow.GetLogger(ctx), in.CorrelationID)
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
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateFinished, func(ctx workflow.Context, d contract.Done) (contract.Handoffs, error) {
		if err := handle(ctx); err != nil {
			return contract.Handoffs{}, err
		}
		known, repeated := s.finished(d)
		if !known {
			// A finished delivery this run did not release, past its
			// cursor: it lost its state (an operator's reset). The
			// delivery's finisher wrote the ledger first, so the ledger
			// knows better.
			s.logger.Warn("finished delivery unknown to the sequencer; resyncing from the ledger", "sequence", d.Sequence, "event_id", d.EventID)
			if err := resync(ctx); err != nil {
				return contract.Handoffs{}, err
			}
		}
		return s.withInFlight(s.releases(), repeated), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateResync, func(ctx workflow.Context) (contract.Handoffs, error) {
		if err := handle(ctx); err != nil {
			return contract.Handoffs{}, err
		}
		if err := resync(ctx); err != nil {
			return contract.Handoffs{}, err
		}
		// A resync answers every lane's release in flight, new or not: the
		// caller repairs a release that was lost.
		return s.inFlight(), nil
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
		// What the load releases (merge leaves it to releases) goes out in
		// the answer of the update that started this run.
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

// pending is an arrived event at or past the cursor.
type pending struct {
	id string
	// open maps each endpoint whose delivery is not finished to whether it
	// is released.
	open map[string]bool
}

// lane is one endpoint's position in the correlation.
type lane struct {
	previous     int64
	skipped      []int64
	lastFinished int64
	inFlight     int64
	// from: every sequence in [cursor, from) is not meant for this lane or
	// finished in it, so the search for its next event starts here.
	from int64
}

// sequencer is a SequencerWorkflow's state and its rules, apart from how
// messages reach it. Maps are only read by key or in sorted order, so their
// iteration order never decides anything.
type sequencer struct {
	logger      interface{ Warn(string, ...any) }
	correlation string
	next        int64
	events      map[int64]*pending
	lanes       map[string]*lane
	// fresh are the releases decided and not answered yet, by event.
	fresh map[string]*contract.Release
	// voided are the sequences an operator voided (their tombstones are
	// events for nobody) that some lane has not moved past yet, in order:
	// each lane's next release names those after its previous sequence
	// among its skipped ones. Operators make them, a few at a time, and
	// they go once every lane is past them.
	voided []int64
}

func newSequencer(logger interface{ Warn(string, ...any) }, correlation string) *sequencer {
	return &sequencer{logger: logger, correlation: correlation, next: 1,
		events: map[int64]*pending{}, lanes: map[string]*lane{}, fresh: map[string]*contract.Release{}}
}

func (s *sequencer) restore(st contract.SequencerState) {
	s.next = max(st.Next, 1)
	s.voided = slices.Clone(st.Voided)
	for _, p := range st.Events {
		e := &pending{id: p.EventID, open: map[string]bool{}}
		for _, ep := range p.Open {
			e.open[ep] = false
		}
		for _, ep := range p.Released {
			e.open[ep] = true
		}
		s.events[p.Sequence] = e
	}
	for _, l := range st.Lanes {
		s.lanes[l.Endpoint] = &lane{previous: l.Previous, skipped: l.Skipped, lastFinished: l.LastFinished, inFlight: l.InFlight, from: s.next}
	}
}

func sortedKeys[K interface{ ~string | ~int64 }, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s *sequencer) snapshot() contract.SequencerState {
	st := contract.SequencerState{Next: s.next}
	for _, seq := range sortedKeys(s.events) {
		e := s.events[seq]
		p := contract.PendingEvent{Sequence: seq, EventID: e.id}
		for _, ep := range sortedKeys(e.open) {
			if e.open[ep] {
				p.Released = append(p.Released, ep)
			} else {
				p.Open = append(p.Open, ep)
			}
		}
		st.Events = append(st.Events, p)
	}
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		st.Lanes = append(st.Lanes, contract.LaneState{Endpoint: ep, Previous: l.previous, Skipped: l.skipped, LastFinished: l.lastFinished, InFlight: l.inFlight})
	}
	st.Voided = slices.Clone(s.voided)
	return st
}

func (s *sequencer) busy() bool { return len(s.events) > 0 }

func (s *sequencer) lane(ep string) *lane {
	l, ok := s.lanes[ep]
	if !ok {
		l = &lane{from: s.next}
		s.lanes[ep] = l
	}
	return l
}

// arrive records an event's arrival and releases what it can: the event's
// own lanes when each is next in its lane, and lanes of later events that
// waited for this sequence to arrive. A repeated arrival gets the answer
// the first got, as far as the event's own lanes go.
func (s *sequencer) arrive(a contract.Arrival) contract.Announcement {
	if a.Sequence < s.next {
		return contract.Announcement{Finished: true}
	}
	e, ok := s.events[a.Sequence]
	switch {
	case ok && e.id != a.EventID:
		// The ledger refuses a second key for a sequence, so this is a bug.
		s.logger.Warn("two events claim one sequence; keeping the first", "sequence", a.Sequence, "kept", e.id, "ignored", a.EventID)
		return contract.Announcement{}
	case !ok:
		e = &pending{id: a.EventID, open: map[string]bool{}}
		for _, ep := range a.Endpoints {
			e.open[ep] = false
			s.lane(ep)
		}
		s.events[a.Sequence] = e
	}
	s.advance()
	hs := s.releases()
	var ann contract.Announcement
	for _, h := range hs.Handoffs {
		if h.EventID == a.EventID {
			continue
		}
		ann.Handoffs = append(ann.Handoffs, h)
	}
	// The event's lanes released now or before: a repeat of the arrival
	// (the API's start retried) gets them again.
	if e, ok := s.events[a.Sequence]; ok {
		for _, ep := range sortedKeys(e.open) {
			if e.open[ep] {
				ann.Released = append(ann.Released, s.laneRelease(ep))
			}
		}
	}
	return ann
}

// laneRelease is the release of the lane's event in flight: its previous
// sequence, and the sequences skipped since, in order: the lane's own
// skipped deliveries and the voided sequences between the two.
func (s *sequencer) laneRelease(ep string) contract.LaneRelease {
	l := s.lanes[ep]
	skipped := l.skipped
	for _, v := range s.voided {
		if v > l.previous && v < l.inFlight && !slices.Contains(skipped, v) {
			skipped = append(slices.Clip(skipped), v)
		}
	}
	if len(skipped) > len(l.skipped) {
		slices.Sort(skipped)
	}
	return contract.LaneRelease{Endpoint: ep, Previous: l.previous, Skipped: skipped}
}

// addVoided adds voided sequences, keeping the list sorted and unique.
func (s *sequencer) addVoided(vs []int64) {
	for _, v := range vs {
		if i, found := slices.BinarySearch(s.voided, v); !found {
			s.voided = slices.Insert(s.voided, i, v)
		}
	}
}

// pruneVoided drops the voided sequences every lane is past (its previous
// sequence is at or after them) once the cursor is past them too: no
// release can name them any more.
func (s *sequencer) pruneVoided() {
	s.voided = slices.DeleteFunc(s.voided, func(v int64) bool {
		if v >= s.next {
			return false
		}
		for _, ep := range sortedKeys(s.lanes) {
			if s.lanes[ep].previous < v {
				return false
			}
		}
		return true
	})
}

// finished records finished deliveries. It reports false for one past the
// cursor that this sequencer did not release: its state is behind the
// ledger's. A repeated Done changes nothing; it returns the endpoints it
// repeats.
func (s *sequencer) finished(d contract.Done) (known bool, repeated []string) {
	known = true
	for _, ld := range d.Lanes {
		l := s.lanes[ld.Endpoint]
		switch {
		case l != nil && l.inFlight == d.Sequence:
			l.inFlight, l.lastFinished, l.from = 0, d.Sequence, d.Sequence+1
			if ld.Skipped {
				l.skipped = append(l.skipped, d.Sequence)
			} else {
				l.previous, l.skipped = d.Sequence, nil
			}
			if e, ok := s.events[d.Sequence]; ok {
				delete(e.open, ld.Endpoint)
			}
		case d.Sequence < s.next || (l != nil && l.lastFinished >= d.Sequence):
			repeated = append(repeated, ld.Endpoint)
		default:
			known = false
		}
	}
	s.advance()
	return known, repeated
}

// withInFlight adds to hs the release of the event each lane of eps has in
// flight. A repeated Done comes from a finisher that retried because the
// answer to its first try was lost, and with it the release that answer
// carried: answering it again lets the release still reach its event,
// rather than wait for the sweep's resync. A release sent twice is
// harmless: a lane takes the first.
func (s *sequencer) withInFlight(hs contract.Handoffs, eps []string) contract.Handoffs {
	for _, ep := range eps {
		l := s.lanes[ep]
		if l == nil || l.inFlight == 0 || s.events[l.inFlight] == nil {
			continue
		}
		i := slices.IndexFunc(hs.Handoffs, func(h contract.Handoff) bool { return h.Release.Sequence == l.inFlight })
		if i < 0 {
			hs.Handoffs = append(hs.Handoffs, contract.Handoff{EventID: s.events[l.inFlight].id, Release: contract.Release{Sequence: l.inFlight}})
			i = len(hs.Handoffs) - 1
		}
		if !slices.ContainsFunc(hs.Handoffs[i].Release.Lanes, func(r contract.LaneRelease) bool { return r.Endpoint == ep }) {
			hs.Handoffs[i].Release.Lanes = append(hs.Handoffs[i].Release.Lanes, s.laneRelease(ep))
		}
	}
	sort.Slice(hs.Handoffs, func(i, j int) bool { return hs.Handoffs[i].Release.Sequence < hs.Handoffs[j].Release.Sequence })
	return hs
}

// advance moves the cursor past the events finished in every lane.
func (s *sequencer) advance() {
	defer s.pruneVoided()
	for {
		e, ok := s.events[s.next]
		if !ok || len(e.open) > 0 {
			return
		}
		delete(s.events, s.next)
		s.next++
	}
}

// releases releases each idle lane's next event when every sequence before
// it has arrived, and answers the releases decided since the last answer,
// one per event.
func (s *sequencer) releases() contract.Handoffs {
	s.decide()
	var out contract.Handoffs
	for _, id := range sortedKeys(s.fresh) {
		out.Handoffs = append(out.Handoffs, contract.Handoff{EventID: id, Release: *s.fresh[id]})
	}
	s.fresh = map[string]*contract.Release{}
	sort.Slice(out.Handoffs, func(i, j int) bool { return out.Handoffs[i].Release.Sequence < out.Handoffs[j].Release.Sequence })
	return out
}

// decide releases each idle lane's next event when every sequence before it
// has arrived, keeping the releases in fresh until an answer carries them.
func (s *sequencer) decide() {
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		if l.inFlight != 0 {
			continue
		}
		for seq := max(l.from, s.next); ; seq++ {
			e, ok := s.events[seq]
			if !ok {
				l.from = seq // a gap: every lane waits for it
				break
			}
			if released, open := e.open[ep]; open && !released {
				e.open[ep] = true
				l.inFlight, l.from = seq, seq
				r := s.fresh[e.id]
				if r == nil {
					r = &contract.Release{Sequence: seq}
					s.fresh[e.id] = r
				}
				r.Lanes = append(r.Lanes, s.laneRelease(ep))
				break
			}
		}
	}
}

// inFlight answers the releases of every lane in flight, after releasing
// what can be.
func (s *sequencer) inFlight() contract.Handoffs {
	s.decide()
	s.fresh = map[string]*contract.Release{}
	byEvent := map[int64]*contract.Release{}
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		if l.inFlight == 0 {
			continue
		}
		r := byEvent[l.inFlight]
		if r == nil {
			r = &contract.Release{Sequence: l.inFlight}
			byEvent[l.inFlight] = r
		}
		r.Lanes = append(r.Lanes, s.laneRelease(ep))
	}
	var out contract.Handoffs
	for _, seq := range sortedKeys(byEvent) {
		out.Handoffs = append(out.Handoffs, contract.Handoff{EventID: s.events[seq].id, Release: *byEvent[seq]})
	}
	return out
}

// merge brings in what the ledger knows: a cursor past this one means those
// events finished in every lane; a lane the ledger has further on finished
// its deliveries up to there (finishers write the ledger before they tell
// the sequencer); stored events have arrived, with the lanes the ledger has
// open. Then each lane's next event is released if it can be.
func (s *sequencer) merge(l contract.SequencerLoad) {
	s.addVoided(l.Voided)
	if l.Next > s.next {
		for _, seq := range sortedKeys(s.events) {
			if seq < l.Next {
				delete(s.events, seq)
			}
		}
		s.next = l.Next
		// Every sequence below the cursor is finished in every lane,
		// whether the ledger lists the lane or not: a lane left in flight
		// on an event no longer held would never release again (and
		// inFlight would find no event to name).
		for _, ep := range sortedKeys(s.lanes) {
			if ln := s.lanes[ep]; ln.inFlight != 0 && ln.inFlight < s.next {
				ln.inFlight = 0
			}
		}
	}
	for _, ll := range l.Lanes {
		ln := s.lane(ll.Endpoint)
		if ll.LastFinished > ln.lastFinished {
			ln.previous, ln.skipped, ln.lastFinished = ll.Previous, ll.Skipped, ll.LastFinished
			if ln.inFlight != 0 && ln.inFlight <= ll.LastFinished {
				ln.inFlight = 0
			}
		}
	}
	for _, p := range l.Events {
		if p.Sequence < s.next {
			continue
		}
		open := map[string]bool{}
		for _, ep := range p.Open {
			open[ep] = true
		}
		e, ok := s.events[p.Sequence]
		if !ok {
			e = &pending{id: p.EventID, open: map[string]bool{}}
			for _, ep := range p.Open {
				e.open[ep] = false
				s.lane(ep)
			}
			s.events[p.Sequence] = e
			continue
		}
		for _, ep := range sortedKeys(e.open) {
			if !open[ep] { // finished, as the ledger has it
				delete(e.open, ep)
				if ln := s.lanes[ep]; ln != nil && ln.inFlight == p.Sequence {
					ln.inFlight = 0
				}
			}
		}
	}
	for _, ln := range s.lanes {
		ln.from = s.next
	}
	s.advance()
	s.decide()
}
