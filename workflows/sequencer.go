package workflows

import (
	"cmp"
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
	// Tenant and CorrelationID are the correlation: order is per tenant.
	Tenant        string `json:"tenant_id"`
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
// Its state is bounded by its busy lanes, not by the events they hold nor
// the lanes ever routed: which sequences have arrived (a frontier and the
// runs past a gap), and for each lane its position and at most
// contract.MaxQueuedPerLane of its next events, fewer when their IDs are
// long (the byte budgets of internal/contract/budget.go). An idle lane
// (nothing queued, in flight or to load) past contract.MaxIdleLanes is
// dropped, and an event for it loads its position from the ledger again
// before it is answered. A lane held behind a dead letter while the others go on leaves
// the rest of its events in the ledger, and loads them from there (the
// LoadLanes local activity, a few dozen at a time, in the answer that
// needs them) once it moves again.
//
// A fresh run (the first, or after an idle end, or after an operator
// terminated one) loads the correlation from the ledger: which sequences
// have arrived from its cursor on, and each lane's position with its first
// open deliveries. The resync update merges the ledger in the same way into
// a running one, which repairs a sequencer that an operator reset to an
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
		began := s.beginMerge()
		var l contract.SequencerLoad
		if err := workflow.ExecuteLocalActivity(lctx, contract.ActivityLoadSequencer, in.Tenant, in.CorrelationID).Get(ctx, &l); err != nil {
			s.abortMerge(began)
			return err
		}
		s.merge(l, began)
		return nil
	}
	// settle loads the lanes whose next events wait in the ledger alone,
	// before an answer: a lane that fell behind (a dead letter held it)
	// reads its next events from there, a few at a time, rather than keep
	// them all.
	settle := func(ctx workflow.Context) error {
		// Each round loads at most contract.MaxLanesPerLoad lanes; a lane
		// once loaded keeps its next event, so the rounds end when every
		// lane that needs a load had one.
		for range 16 {
			eps := s.needLoads()
			if len(eps) == 0 {
				return nil
			}
			var lanes []contract.LaneState
			if err := workflow.ExecuteLocalActivity(lctx, contract.ActivityLoadLanes, contract.LoadLanesInput{Tenant: in.Tenant, CorrelationID: in.CorrelationID, Lanes: eps}).Get(ctx, &lanes); err != nil {
				s.abortLoad(eps)
				return err
			}
			byEndpoint := map[string]contract.LaneState{}
			for _, ll := range lanes {
				byEndpoint[ll.Endpoint] = ll
			}
			for _, la := range eps {
				s.endLoad(s.lanes[la.Endpoint], byEndpoint[la.Endpoint])
			}
			s.pruneVoided()
		}
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
		s.arrive(ar)
		if err := settle(ctx); err != nil {
			return contract.Announcement{}, err
		}
		return s.announce(ar), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateFinished, func(ctx workflow.Context, d contract.Done) (contract.Handoffs, error) {
		if err := handle(ctx); err != nil {
			return contract.Handoffs{}, err
		}
		known, repeated := s.finished(d)
		if !known {
			// A finished delivery this run did not release and is not past:
			// it lost its state (an operator's reset). The delivery's
			// finisher wrote the ledger first, so the ledger knows better.
			s.logger.Warn("finished delivery unknown to the sequencer; resyncing from the ledger", "sequence", d.Sequence, "event_id", d.EventID)
			if err := resync(ctx); err != nil {
				return contract.Handoffs{}, err
			}
		}
		if err := settle(ctx); err != nil {
			return contract.Handoffs{}, err
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
		if err := settle(ctx); err != nil {
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
		if err := settle(ctx); err != nil {
			return err
		}
		// What the load releases (decide leaves it in fresh) goes out in
		// the answer of the update that started this run.
		s.decide()
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
				Tenant: in.Tenant, CorrelationID: in.CorrelationID, State: &st, MaxHistory: in.MaxHistory, IdleTimeout: in.IdleTimeout,
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

// lane is one endpoint's position in the correlation and its next events.
type lane struct {
	previous     int64
	skipped      []int64
	lastFinished int64
	inFlight     int64
	inFlightID   string
	// queue are the lane's open deliveries not released, in order: every
	// one from its position on, or, when partial, every one up to
	// knownThrough (the ledger may hold more past it). At most
	// contract.MaxQueuedPerLane.
	queue        []contract.QueuedEvent
	partial      bool
	knownThrough int64
	// loading: a load of the lane from the ledger is under way; the lane
	// releases nothing until it is in.
	loading bool
}

// sequencer is a SequencerWorkflow's state and its rules, apart from how
// messages reach it. Maps are only read by key or in sorted order, so their
// iteration order never decides anything. Its size is bounded by its lanes
// (each queues at most contract.MaxQueuedPerLane events) and the gaps it
// sees, not by the events held: an event finished in a lane leaves that
// lane's queue, and nothing else keeps it.
type sequencer struct {
	logger      interface{ Warn(string, ...any) }
	correlation string
	// frontier is the first sequence not arrived; arrived the runs past it
	// that have (after a gap).
	frontier int64
	arrived  []contract.SequenceRange
	lanes    map[string]*lane
	// fresh are the releases decided and not answered yet, by event.
	fresh map[string]*contract.Release
	// voided are the sequences an operator voided (their tombstones are
	// events for nobody) that some lane has not moved past yet, in order:
	// each lane's next release names those after its previous sequence
	// among its skipped ones. Operators make them, a few at a time, and
	// they go once every lane is past them, or once contract.MaxVoidedKept
	// newer ones came.
	voided []int64
	// merging counts the whole-correlation loads under way (beginMerge to
	// merge or abortMerge). While one is, no lane is dropped: a load that
	// read the ledger before the lane finished would otherwise make it
	// again from its older snapshot, with finished events still open.
	merging int
	// maxIdle is how many idle lanes it keeps (contract.MaxIdleLanes; the
	// sequencer's model lowers it, so that its few lanes are dropped and
	// reloaded as a correlation with many would be).
	maxIdle int
	// heard is, by endpoint, the last sequence a finished update named
	// there that the sequencer did not know (an operator's Reset made it
	// forget the release): the ledger is past it there. A load under way
	// may have read the ledger before that finish was written, and would
	// otherwise bring the delivery back open, to be released again and
	// held in flight for good, since its finish came already (placeHeard).
	// Kept only while a load is under way; not part of the state.
	heard map[string]int64
}

func newSequencer(logger interface{ Warn(string, ...any) }, correlation string) *sequencer {
	return &sequencer{logger: logger, correlation: correlation, frontier: 1, maxIdle: contract.MaxIdleLanes,
		lanes: map[string]*lane{}, fresh: map[string]*contract.Release{}}
}

func (s *sequencer) restore(st contract.SequencerState) {
	s.frontier = max(st.Frontier, 1)
	s.arrived = slices.Clone(st.Arrived)
	s.voided = slices.Clone(contract.CapVoided(st.Voided))
	for _, l := range st.Lanes {
		s.lanes[l.Endpoint] = &lane{previous: l.Previous, skipped: contract.CapSkipped(l.Skipped), lastFinished: l.LastFinished,
			inFlight: l.InFlight, inFlightID: l.InFlightEvent, queue: slices.Clone(l.Queued), partial: l.Partial, knownThrough: l.KnownThrough}
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
	st := contract.SequencerState{Next: s.cursor(), Frontier: s.frontier, Arrived: slices.Clone(s.arrived), Voided: slices.Clone(s.voided)}
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		st.Lanes = append(st.Lanes, contract.LaneState{Endpoint: ep, Previous: l.previous, Skipped: l.skipped, LastFinished: l.lastFinished,
			InFlight: l.inFlight, InFlightEvent: l.inFlightID, Queued: slices.Clone(l.queue), Partial: l.partial, KnownThrough: l.knownThrough})
	}
	return st
}

// cursor is the first sequence not finished in every lane, as far as this
// sequencer knows: a lane whose next events wait in the ledger alone counts
// from the one after its last finished.
func (s *sequencer) cursor() int64 {
	c := s.frontier
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		switch {
		case l.inFlight != 0:
			c = min(c, l.inFlight)
		case len(l.queue) > 0:
			c = min(c, l.queue[0].Sequence)
		case l.partial || l.loading:
			c = min(c, l.lastFinished+1)
		}
	}
	return c
}

// busy: something is in flight, queued, waiting in the ledger or behind a
// gap.
func (s *sequencer) busy() bool {
	if len(s.arrived) > 0 {
		return true
	}
	for _, l := range s.lanes {
		if l.inFlight != 0 || len(l.queue) > 0 || l.partial || l.loading {
			return true
		}
	}
	return false
}

func (s *sequencer) lane(ep string) *lane {
	l, ok := s.lanes[ep]
	if !ok {
		l = &lane{}
		s.lanes[ep] = l
	}
	return l
}

// markArrived records that sequence seq has arrived.
func (s *sequencer) markArrived(seq int64) {
	s.addArrived(contract.SequenceRange{From: seq, To: seq})
}

// addArrived records that the run r has arrived: the frontier moves past
// it when it starts at or before it, through the runs it then reaches.
func (s *sequencer) addArrived(r contract.SequenceRange) {
	if r.To < s.frontier {
		return
	}
	r.From = max(r.From, s.frontier)
	i, _ := slices.BinarySearchFunc(s.arrived, r.From, func(a contract.SequenceRange, from int64) int { return cmp.Compare(a.From, from) })
	s.arrived = slices.Insert(s.arrived, i, r)
	// Merge the runs that overlap or touch, in order.
	merged := s.arrived[:0]
	for _, a := range s.arrived {
		if n := len(merged); n > 0 && a.From <= merged[n-1].To+1 {
			merged[n-1].To = max(merged[n-1].To, a.To)
			continue
		}
		merged = append(merged, a)
	}
	s.arrived = merged
	for len(s.arrived) > 0 && s.arrived[0].From <= s.frontier {
		s.frontier = max(s.frontier, s.arrived[0].To+1)
		s.arrived = s.arrived[1:]
	}
	if len(s.arrived) > contract.MaxArrivedRanges {
		s.arrived = s.arrived[:contract.MaxArrivedRanges]
	}
	s.arrived = slices.Clip(s.arrived)
}

// enqueue adds an open delivery of the lane to its queue, unless the lane
// is past it or has it already, or it lies past what the lane knows (the
// ledger has it, and the lane's next load reads it). A queue over its bound
// drops its last event, and from then on knows only what comes before it.
func (s *sequencer) enqueue(l *lane, q contract.QueuedEvent) {
	q.State = ""
	if q.Sequence <= l.lastFinished || q.Sequence == l.inFlight || (l.partial && q.Sequence > l.knownThrough) {
		return
	}
	i, found := slices.BinarySearchFunc(l.queue, q.Sequence, func(e contract.QueuedEvent, seq int64) int { return cmp.Compare(e.Sequence, seq) })
	if found {
		if l.queue[i].EventID != q.EventID {
			// The ledger refuses a second key for a sequence, so this is a bug.
			s.logger.Warn("two events claim one sequence; keeping the first", "sequence", q.Sequence, "kept", l.queue[i].EventID, "ignored", q.EventID)
		}
		return
	}
	l.queue = slices.Insert(l.queue, i, q)
	if len(l.queue) > contract.MaxQueuedPerLane || len(l.queue) > 1 && queuedBytes(l.queue) > contract.MaxQueuedBytesPerLane {
		s.cutQueue(l, len(l.queue)-1)
	}
}

// queuedBytes is what the queue q takes in a state at most.
func queuedBytes(q []contract.QueuedEvent) int {
	n := 0
	for _, e := range q {
		n += contract.QueuedBytes(e)
	}
	return n
}

// cutQueue keeps the lane's first n queued events (n ≥ 1), and from then on
// it knows only what comes before the first it dropped: the ledger keeps
// the rest, and the lane loads them when it reaches them.
func (s *sequencer) cutQueue(l *lane, n int) {
	if n >= len(l.queue) {
		return
	}
	through := l.queue[n].Sequence - 1
	if l.partial {
		through = min(through, l.knownThrough)
	}
	l.queue = slices.Clip(l.queue[:n])
	l.partial, l.knownThrough = true, through
}

// trimQueues keeps the lanes' queued events under contract.MaxQueuedBytes
// in all: past it, lanes (in order of endpoint) keep their next event
// alone, so each can still release, and load the rest when they reach it.
// A lane loading is left as it is: its load decides what it knows.
func (s *sequencer) trimQueues() {
	total := 0
	for _, l := range s.lanes {
		total += queuedBytes(l.queue)
	}
	if total <= contract.MaxQueuedBytes {
		return
	}
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		if l.loading || len(l.queue) <= 1 {
			continue
		}
		total -= queuedBytes(l.queue[1:])
		s.cutQueue(l, 1)
		if total <= contract.MaxQueuedBytes {
			return
		}
	}
}

// idle: the lane has nothing queued, in flight or left to load; the
// ledger has its position.
func (l *lane) idle() bool {
	return l.inFlight == 0 && len(l.queue) == 0 && !l.partial && !l.loading
}

// dropIdle drops the idle lanes past contract.MaxIdleLanes, those that
// finished least lately first: the ledger has their position, and an
// event for one loads it again (needLoads).
func (s *sequencer) dropIdle() {
	if s.merging > 0 {
		return
	}
	var idle []string
	for _, ep := range sortedKeys(s.lanes) {
		if s.lanes[ep].idle() {
			idle = append(idle, ep)
		}
	}
	if len(idle) <= s.maxIdle {
		return
	}
	sort.SliceStable(idle, func(i, j int) bool { return s.lanes[idle[i]].lastFinished < s.lanes[idle[j]].lastFinished })
	for _, ep := range idle[:len(idle)-s.maxIdle] {
		delete(s.lanes, ep)
	}
}

// reloadLane makes ep a lane that knows nothing but that the ledger has
// its position and open deliveries: it loads them (needLoads) before it
// releases anything.
func (s *sequencer) reloadLane(ep string) *lane {
	l := &lane{partial: true}
	s.lanes[ep] = l
	return l
}

// arrive records an event's arrival: the sequence has arrived, and each of
// its lanes has it open.
//
// A lane the sequencer does not hold is one the ledger may have a position
// for (it dropped it when idle, or a load left it out): the
// lane loads its position and open deliveries, this event among them (the
// API stores an event before it arrives), before it releases anything.
func (s *sequencer) arrive(a contract.Arrival) {
	s.markArrived(a.Sequence)
	for _, ep := range a.Endpoints {
		l, known := s.lanes[ep]
		if !known {
			l = s.reloadLane(ep)
		}
		s.enqueue(l, contract.QueuedEvent{Sequence: a.Sequence, EventID: a.EventID})
	}
	s.trimQueues()
	s.dropIdle()
}

// announce answers an arrival, after it and the loads it needed: the
// releases it made of other events, the event's own lanes released now or
// before (a repeat of the arrival, when the API's start is retried, gets
// them again), and whether every one of its lanes is past it.
func (s *sequencer) announce(a contract.Arrival) contract.Announcement {
	var ann contract.Announcement
	for _, h := range s.releases().Handoffs {
		if h.EventID == a.EventID {
			continue
		}
		ann.Handoffs = append(ann.Handoffs, h)
	}
	finished := true
	for _, ep := range slices.Sorted(slices.Values(a.Endpoints)) {
		l := s.lanes[ep]
		if l == nil {
			// Dropped as idle after the arrival: an idle lane queued it
			// unless it was past it.
			continue
		}
		if l.inFlight == a.Sequence {
			ann.Released = append(ann.Released, s.laneRelease(ep))
		}
		finished = finished && l.lastFinished >= a.Sequence
	}
	ann.Finished = finished && len(a.Endpoints) > 0
	return ann
}

// laneRelease is the release of the lane's event in flight: its previous
// sequence, and the sequences skipped since, in order: the lane's own
// skipped deliveries and the voided sequences between the two.
//
// The list is contract.ReleaseSkipped's, as the ledger's path builds it
// too: bounded, the lane's own skips kept before voided sequences.
func (s *sequencer) laneRelease(ep string) contract.LaneRelease {
	l := s.lanes[ep]
	return contract.LaneRelease{Endpoint: ep, Previous: l.previous, Skipped: contract.ReleaseSkipped(l.skipped, s.voided, l.previous, l.inFlight)}
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
// sequence is at or after them), once they are behind the frontier: no
// release can name them any more; and all but the newest
// contract.MaxVoidedKept, so that a lane whose previous sequence never
// moves (a deleted endpoint's) does not keep every void for good (a
// release names at most contract.MaxSkippedListed, voided ones last). It
// also keeps the queues under their budget in all (trimQueues): it runs
// after every change that adds to them but an arrival.
func (s *sequencer) pruneVoided() {
	defer s.trimQueues()
	s.voided = contract.CapVoided(s.voided)
	s.voided = slices.DeleteFunc(s.voided, func(v int64) bool {
		if v >= s.frontier {
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

// finished records finished deliveries. It reports false for one this
// sequencer did not release and is not past: its state is behind the
// ledger's. A repeated Done changes nothing; it returns the endpoints it
// repeats.
func (s *sequencer) finished(d contract.Done) (known bool, repeated []string) {
	known = true
	for _, ld := range d.Lanes {
		l := s.lanes[ld.Endpoint]
		switch {
		case l != nil && l.inFlight == d.Sequence:
			l.inFlight, l.inFlightID, l.lastFinished = 0, "", d.Sequence
			if ld.Skipped {
				l.skipped = contract.CapSkipped(append(l.skipped, d.Sequence))
			} else {
				l.previous, l.skipped = d.Sequence, nil
			}
		case l != nil && l.lastFinished >= d.Sequence:
			repeated = append(repeated, ld.Endpoint)
		default:
			known = false
			if s.heard == nil {
				s.heard = map[string]int64{}
			}
			s.heard[ld.Endpoint] = max(s.heard[ld.Endpoint], d.Sequence)
		}
	}
	s.pruneVoided()
	s.dropIdle()
	s.forgetHeard()
	return known, repeated
}

// placeHeard checks a load that just came into lane ep against the
// finishes the lane heard of and did not know (heard): a lane the load
// leaves behind such a finish has it from a read made before the finish
// was written. What it says of the lane past its position is then stale:
// the lane forgets it, with what it holds in flight up to there (the
// ledger finished it), and loads again (needLoads) before it releases
// anything. A lane still loading is checked when its own load lands.
func (s *sequencer) placeHeard(ep string, l *lane) {
	d := s.heard[ep]
	if d <= l.lastFinished || l.loading || l.inFlight > d {
		return
	}
	l.inFlight, l.inFlightID = 0, ""
	l.queue, l.partial, l.knownThrough = nil, true, l.lastFinished
}

// forgetHeard drops the finishes heard once no load is under way: a load
// that starts later reads the ledger after they were written.
func (s *sequencer) forgetHeard() {
	if s.heard == nil || s.merging > 0 {
		return
	}
	for _, l := range s.lanes {
		if l.loading {
			return
		}
	}
	s.heard = nil
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
		if l == nil || l.inFlight == 0 {
			continue
		}
		i := slices.IndexFunc(hs.Handoffs, func(h contract.Handoff) bool { return h.Release.Sequence == l.inFlight })
		if i < 0 {
			hs.Handoffs = append(hs.Handoffs, contract.Handoff{EventID: l.inFlightID, Release: contract.Release{Sequence: l.inFlight}})
			i = len(hs.Handoffs) - 1
		}
		if !slices.ContainsFunc(hs.Handoffs[i].Release.Lanes, func(r contract.LaneRelease) bool { return r.Endpoint == ep }) {
			hs.Handoffs[i].Release.Lanes = append(hs.Handoffs[i].Release.Lanes, s.laneRelease(ep))
		}
	}
	sort.Slice(hs.Handoffs, func(i, j int) bool { return hs.Handoffs[i].Release.Sequence < hs.Handoffs[j].Release.Sequence })
	return hs
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
// A lane's queue holds its next event whenever one is known: the queue is
// every open delivery of the lane from its position on, up to what it
// knows, and a lane that knows nothing loads first (needLoads).
func (s *sequencer) decide() {
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		if l.inFlight != 0 || l.loading || len(l.queue) == 0 || l.queue[0].Sequence >= s.frontier {
			continue
		}
		head := l.queue[0]
		l.queue = slices.Clip(l.queue[1:])
		l.inFlight, l.inFlightID = head.Sequence, head.EventID
		r := s.fresh[head.EventID]
		if r == nil {
			r = &contract.Release{Sequence: head.Sequence}
			s.fresh[head.EventID] = r
		}
		r.Lanes = append(r.Lanes, s.laneRelease(ep))
	}
}

// inFlight answers the releases of every lane in flight, after releasing
// what can be.
func (s *sequencer) inFlight() contract.Handoffs {
	s.decide()
	s.fresh = map[string]*contract.Release{}
	byEvent := map[int64]*contract.Release{}
	ids := map[int64]string{}
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		if l.inFlight == 0 {
			continue
		}
		r := byEvent[l.inFlight]
		if r == nil {
			r = &contract.Release{Sequence: l.inFlight}
			byEvent[l.inFlight], ids[l.inFlight] = r, l.inFlightID
		}
		r.Lanes = append(r.Lanes, s.laneRelease(ep))
	}
	var out contract.Handoffs
	for _, seq := range sortedKeys(byEvent) {
		out.Handoffs = append(out.Handoffs, contract.Handoff{EventID: ids[seq], Release: *byEvent[seq]})
	}
	return out
}

// needLoads starts the load of every idle lane whose next event waits in
// the ledger alone (its queue ran dry while it knew only part of its
// events), and answers what to ask the ledger. While a lane loads, its
// queue starts empty and takes the arrivals as they come, as a lane that
// knows everything would: the load then adds what the ledger had.
func (s *sequencer) needLoads() []contract.LaneAfter {
	s.forgetHeard()
	var out []contract.LaneAfter
	for _, ep := range sortedKeys(s.lanes) {
		l := s.lanes[ep]
		if l.loading || l.inFlight != 0 || !l.partial || len(l.queue) > 0 {
			continue
		}
		if len(out) == contract.MaxLanesPerLoad {
			// The rest load in the next round: one load's answer stays
			// under its budget.
			break
		}
		s.beginLoad(l)
		out = append(out, contract.LaneAfter{Endpoint: ep, After: l.lastFinished})
	}
	return out
}

func (s *sequencer) beginLoad(l *lane) {
	l.loading, l.queue, l.partial, l.knownThrough = true, nil, false, 0
}

// endLoad brings in a lane's load: its position when the ledger has it
// further on, and its open deliveries, every one from its position on, or,
// when the load is Partial, those up to the load's KnownThrough.
func (s *sequencer) endLoad(l *lane, ll contract.LaneState) {
	s.addVoided(ll.Voided)
	s.movePosition(l, ll)
	l.loading = false
	// A delivery in flight stays open in the ledger until it finishes: one
	// the load does not list where it lists everything finished (a lane
	// with no row in the ledger has no position to say so).
	if l.inFlight != 0 && (!ll.Partial || l.inFlight <= ll.KnownThrough) &&
		!slices.ContainsFunc(ll.Queued, func(q contract.QueuedEvent) bool { return q.Sequence == l.inFlight }) {
		l.lastFinished = max(l.lastFinished, l.inFlight)
		l.inFlight, l.inFlightID = 0, ""
	}
	s.addOpen(l, ll)
	s.placeHeard(ll.Endpoint, l)
}

// absorb brings the ledger's view of a lane into one whose own load, if
// any, is not this one: its position, and its open deliveries added to
// those it knows. Unlike endLoad it ends no load and finishes nothing in
// flight: the lane may have released an event stored after the ledger was
// read.
func (s *sequencer) absorb(l *lane, ll contract.LaneState) {
	s.addVoided(ll.Voided)
	s.movePosition(l, ll)
	s.addOpen(l, ll)
	s.placeHeard(ll.Endpoint, l)
}

// addOpen adds a load's open deliveries to the lane: all of them, or, when
// the load is Partial, those up to its KnownThrough, past which the lane
// then knows nothing until it loads again.
func (s *sequencer) addOpen(l *lane, ll contract.LaneState) {
	if ll.Partial {
		if l.partial {
			l.knownThrough = min(l.knownThrough, ll.KnownThrough)
		} else {
			l.partial, l.knownThrough = true, ll.KnownThrough
		}
		l.queue = slices.DeleteFunc(l.queue, func(q contract.QueuedEvent) bool { return q.Sequence > l.knownThrough })
	}
	for _, q := range ll.Queued {
		s.enqueue(l, q)
	}
}

// abortMerge gives up a whole-correlation load (the ledger did not answer):
// each lane it began knows nothing past its position.
func (s *sequencer) abortMerge(began map[string]bool) {
	s.merging--
	for _, ep := range sortedKeys(began) {
		s.abortLoad([]contract.LaneAfter{{Endpoint: ep}})
	}
}

// abortLoad gives up the loads of lanes eps (the ledger did not answer): each
// knows nothing past its position, and loads again when it next may.
func (s *sequencer) abortLoad(eps []contract.LaneAfter) {
	for _, la := range eps {
		l := s.lanes[la.Endpoint]
		l.loading, l.queue, l.partial, l.knownThrough = false, nil, true, l.lastFinished
	}
}

// movePosition moves the lane to the ledger's position when the ledger has
// it further on: finishers write the ledger before they tell the
// sequencer, so a lane the ledger has further on finished its deliveries up
// to there.
func (s *sequencer) movePosition(l *lane, ll contract.LaneState) {
	if ll.LastFinished <= l.lastFinished {
		return
	}
	l.previous, l.skipped, l.lastFinished = ll.Previous, contract.CapSkipped(ll.Skipped), ll.LastFinished
	if l.inFlight != 0 && l.inFlight <= ll.LastFinished {
		l.inFlight, l.inFlightID = 0, ""
	}
	l.queue = slices.DeleteFunc(l.queue, func(q contract.QueuedEvent) bool { return q.Sequence <= l.lastFinished })
}

// beginMerge starts a load of the whole correlation: every lane not loading
// already starts its load (the one under way brings its own); it returns
// those that did.
func (s *sequencer) beginMerge() map[string]bool {
	s.merging++
	began := map[string]bool{}
	for _, ep := range sortedKeys(s.lanes) {
		if l := s.lanes[ep]; !l.loading {
			s.beginLoad(l)
			began[ep] = true
		}
	}
	return began
}

// merge brings in what the ledger knows of the whole correlation (a fresh
// run's load, a resync): the sequences that have arrived, each lane's
// position when the ledger has it further on, and the lanes' open
// deliveries: every lane it names takes them (those whose load began with
// it, began, or that it names first, end their load with it). It only
// ever moves the sequencer forward.
func (s *sequencer) merge(l contract.SequencerLoad, began map[string]bool) {
	s.merging--
	s.addVoided(l.Voided)
	s.addArrived(contract.SequenceRange{From: 1, To: l.Frontier - 1})
	for _, r := range l.Arrived {
		s.addArrived(r)
	}
	loaded := map[string]bool{}
	for _, ll := range l.Lanes {
		ln, known := s.lanes[ll.Endpoint]
		switch {
		case !known:
			ln = s.lane(ll.Endpoint)
			s.beginLoad(ln)
			fallthrough
		case began[ll.Endpoint]:
			s.endLoad(ln, ll)
			loaded[ll.Endpoint] = true
		default:
			// A lane this load did not begin: an arrival made it while the
			// load ran, or it is loading on its own. The frontier moves to
			// the ledger's, past sequences whose arrivals may still be on
			// their way, so the lane takes the open deliveries the ledger
			// gives it: otherwise it would release a later event before an
			// earlier one it has not heard of.
			s.absorb(ln, ll)
		}
	}
	// A lane the ledger does not name has no open delivery in it, and the
	// load says nothing of its position: the lane is dropped, and one that
	// took arrivals while the load ran, or that another load left partial,
	// loads itself first, as an arrival on a lane not held does. While
	// another load is under way the lane is kept, knowing nothing past its
	// position until it loads: that load may have read the ledger before
	// this one, and would make a dropped lane again from its older view.
	// Kept, it holds nothing in flight: what it held was released before
	// this load began (a lane releases nothing while it loads), so stored
	// before the load read the ledger, which had nothing open in the lane.
	// It is finished, and its finish may never come (a Reset forgot it).
	for _, ep := range sortedKeys(began) {
		ln := s.lanes[ep]
		switch {
		case loaded[ep]:
		case len(ln.queue) > 0 || ln.partial:
			s.reloadLane(ep)
		case s.merging > 0:
			ln.inFlight, ln.inFlightID = 0, ""
			s.abortLoad([]contract.LaneAfter{{Endpoint: ep}})
		default:
			delete(s.lanes, ep)
		}
	}
	s.pruneVoided()
	s.dropIdle()
	s.forgetHeard()
}
