package workflows

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hookflow/hookflow/internal/contract"
)

// The sequencer's model: a state-machine property test that drives the real
// decision logic (the sequencer struct, every method the workflow's
// handlers call, in the order they call them) through interleavings that a
// random scheduler picks, against a model of the ledger and of everything
// around a sequencer: the API that stores an event and then announces it,
// late or twice; the event workflows that deliver what they are released
// and hand over, late or twice; operators who void sequences the producer
// lost, skip or replay dead letters, create, disable and delete endpoints;
// and the Temporal Web UI's buttons on a sequencer: Terminate (a fresh run
// loads the ledger), Reset to an earlier state, and continue-as-new. An
// update handler runs until its local activity, and its answer waits until
// the scheduler completes that activity, which reads the ledger at a point
// the scheduler picks too, so a load can be stale by the time it lands and
// other updates run in between, as they do in the workflow.
//
// After every step it checks the lanes' invariants; at the end it plays the
// producer's missing sequences and every pending message and delivery out
// and checks that every accepted event ended delivered or skipped in every
// lane it was routed to. rapid shrinks a failing run to a short one and
// prints its steps; the seed it prints replays it (-rapid.seed).
//
// make test runs a fixed set of seeds (modelSeeds, about 20 seconds); the
// long run is `make model` (MODEL_CHECKS runs from a seed the clock picks),
// which prints the seed, the steps, the states per second and how often
// each transition ran.
var (
	modelChecks = flag.Int("model.checks", 0, "sequencer model: runs per seed (0: the fixed set's default)")
	modelSeed   = flag.Uint64("model.seed", 1, "sequencer model: the first seed (0: one chosen by the clock)")
	modelSteps  = flag.Int("model.steps", 300, "sequencer model: steps per run at most")
)

// modelSeeds is the fixed set make test runs, each for modelDefaultChecks
// runs.
var modelSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}

const modelDefaultChecks = 150

func TestSequencerModel(t *testing.T) {
	seeds, checks := modelSeeds, modelDefaultChecks
	if *modelChecks > 0 {
		seeds, checks = []uint64{*modelSeed}, *modelChecks
		if *modelSeed == 0 {
			seeds = []uint64{uint64(time.Now().UnixNano())}
		}
	}
	st := &modelStats{reached: map[string]int{}}
	start := time.Now()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			setRapidFlag(t, "rapid.seed", fmt.Sprint(seed))
			setRapidFlag(t, "rapid.checks", fmt.Sprint(checks))
			setRapidFlag(t, "rapid.steps", fmt.Sprint(*modelSteps))
			rapid.Check(t, func(rt *rapid.T) {
				m := newModel(rt, st)
				rt.Repeat(m.actions())
				m.drain(rt)
				st.add(m)
			})
		})
	}
	el := time.Since(start).Seconds()
	t.Logf("sequencer model: %d seeds × %d runs, %d runs, %d steps, %d states checked in %.1f s (%.0f states/s)",
		len(seeds), checks, st.runs, st.steps, st.states, el, float64(st.states)/el)
	t.Logf("transitions reached: %s", st.report())
	// A transition the generator never reaches is a hole in the model, not
	// a pass.
	for _, name := range modelTransitions {
		if st.reached[name] == 0 {
			t.Errorf("transition %q never ran", name)
		}
	}
}

// setRapidFlag sets one of rapid's flags for this test and restores it
// after: rapid reads its seed, runs and steps from flags only.
func setRapidFlag(t *testing.T, name, value string) {
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("rapid has no flag %s", name)
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

// modelTransitions are the scheduler's moves, each counted when it runs.
var modelTransitions = []string{
	"post", "arrive", "arrive-again", "load-read", "load-land", "load-fail", "deliver", "dead-letter",
	"replay", "skip", "finished", "finished-again", "resync", "void", "endpoint-create", "endpoint-disable",
	"endpoint-enable", "endpoint-delete", "continue-as-new", "terminate", "reset", "tenant-disable",
	"merge-absorbs-lane", "lane-load", "lane-overflow", "lane-drop", "merge-unnamed-reload", "merge-unnamed-drop",
	"finish-races-resync",
}

type modelStats struct {
	mu                  sync.Mutex
	runs, steps, states int
	reached             map[string]int
}

func (s *modelStats) add(m *model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.steps += m.steps
	s.states += m.states
	for k, v := range m.reached {
		s.reached[k] += v
	}
}

func (s *modelStats) report() string {
	var b strings.Builder
	for _, name := range modelTransitions {
		fmt.Fprintf(&b, "%s=%d ", name, s.reached[name])
	}
	return strings.TrimSpace(b.String())
}

// ---- the ledger's model ----

type dState int

const (
	dOpen dState = iota // waiting, delivering
	dDead               // an open dead letter
	dDelivered
	dSkipped
)

func (d dState) finished() bool { return d == dDelivered || d == dSkipped }

type mEvent struct {
	id     string
	seq    int64
	routed []string // sorted
	state  map[string]dState
}

type mLane struct {
	lastFinished, previous int64
	skipped                []int64
}

type mEndpoint struct {
	deleted, disabled bool
}

// mLedger is what Postgres holds: events with their deliveries, the lanes'
// positions (written in the transaction that finishes a delivery) and the
// voided sequences' tombstones.
type mLedger struct {
	endpoints map[string]*mEndpoint
	events    map[int64]*mEvent
	voided    map[int64]bool
	lanes     map[string]*mLane
}

func (l *mLedger) arrived(seq int64) bool { return l.events[seq] != nil || l.voided[seq] }

// next is the correlation's cursor: the first sequence not arrived or not
// finished in every lane.
func (l *mLedger) next() int64 {
	s := int64(1)
	for {
		if !l.arrived(s) {
			return s
		}
		if e := l.events[s]; e != nil {
			for _, ep := range e.routed {
				if !e.state[ep].finished() {
					return s
				}
			}
		}
		s++
	}
}

func (l *mLedger) lane(ep string, after int64, limit int) contract.LaneState {
	st := contract.LaneState{Endpoint: ep}
	if ln := l.lanes[ep]; ln != nil {
		st.LastFinished, st.Previous, st.Skipped = ln.lastFinished, ln.previous, slices.Clone(ln.skipped)
	}
	for _, seq := range sortedKeys(l.events) {
		e := l.events[seq]
		if seq <= after || !slices.Contains(e.routed, ep) || e.state[ep].finished() {
			continue
		}
		if len(st.Queued) == limit {
			st.Partial, st.KnownThrough = true, st.Queued[len(st.Queued)-1].Sequence
			break
		}
		st.Queued = append(st.Queued, contract.QueuedEvent{Sequence: seq, EventID: e.id})
	}
	return st
}

// load is CorrelationLoad as LoadSequencer answers it: one snapshot.
func (l *mLedger) load(limit int) contract.SequencerLoad {
	out := contract.SequencerLoad{Next: l.next()}
	f := out.Next
	for l.arrived(f) {
		f++
	}
	out.Frontier = f
	var top int64
	for seq := range l.events {
		top = max(top, seq)
	}
	for seq := range l.voided {
		top = max(top, seq)
	}
	for s := f + 1; s <= top; s++ {
		if !l.arrived(s) {
			continue
		}
		if n := len(out.Arrived); n > 0 && out.Arrived[n-1].To == s-1 {
			out.Arrived[n-1].To = s
		} else {
			out.Arrived = append(out.Arrived, contract.SequenceRange{From: s, To: s})
		}
	}
	// Only the lanes with open deliveries, as store.SequencerLoadOf reads
	// them: a lane the load leaves out says nothing of its position.
	eps := map[string]bool{}
	for _, e := range l.events {
		for _, ep := range e.routed {
			if !e.state[ep].finished() {
				eps[ep] = true
			}
		}
	}
	for _, ep := range sortedKeys(eps) {
		out.Lanes = append(out.Lanes, l.lane(ep, 0, limit))
	}
	out.Voided = sortedKeys(l.voided)
	return out
}

// finish records a delivery's end in the ledger, and its lane's position,
// once.
func (l *mLedger) finish(e *mEvent, ep string, skipped bool) bool {
	if e.state[ep].finished() {
		return false
	}
	ln := l.lanes[ep]
	if ln == nil {
		ln = &mLane{}
		l.lanes[ep] = ln
	}
	if skipped {
		e.state[ep] = dSkipped
		ln.skipped = append(ln.skipped, e.seq)
	} else {
		e.state[ep] = dDelivered
		ln.previous, ln.skipped = e.seq, nil
	}
	ln.lastFinished = max(ln.lastFinished, e.seq)
	return true
}

// ---- everything around the sequencer ----

type msgKind int

const (
	msgArrive msgKind = iota
	msgFinished
	msgResync
)

// message is an update on its way to the sequencer; its caller retries it
// until it is answered.
type message struct {
	kind    msgKind
	arrival contract.Arrival
	done    contract.Done
}

func (m message) String() string {
	switch m.kind {
	case msgArrive:
		return fmt.Sprintf("arrive(%d→%v)", m.arrival.Sequence, m.arrival.Endpoints)
	case msgFinished:
		return fmt.Sprintf("finished(%d %v)", m.done.Sequence, m.done.Lanes)
	}
	return "resync"
}

type laKind int

const (
	laNone laKind = iota
	laSequencer
	laLanes
)

// handler is an update handler of the running sequencer, blocked on its
// local activity (the load of the correlation or of some lanes).
type handler struct {
	msg   message
	first bool // the run's first load: the handlers wait for it
	la    laKind
	began map[string]bool
	eps   []contract.LaneAfter
	// read is the ledger as the activity read it; nil until it has.
	readSeq   *contract.SequencerLoad
	readLanes []contract.LaneState
	rounds    int
	known     bool
	repeated  []string
}

type key struct {
	seq int64
	ep  string
}

type model struct {
	ledger   mLedger
	s        *sequencer
	loaded   bool
	waiting  []message // updates accepted by a run whose first load is under way
	pending  []message
	answered []message // arrivals and finished updates answered: a retry repeats them
	handlers []*handler
	// released is what each delivery was released with (the first
	// release wins, as in the event workflow); delivering those not
	// finished, dead-lettered or not.
	released map[key]contract.LaneRelease
	// receivers' cursors: the last sequence applied per endpoint, as the
	// receiver kit's compare-and-swap keeps it.
	receiver map[string]int64
	// the producer's sequences, and those it has posted.
	total     int64
	posted    map[int64]bool
	nextEp    int
	tenantOff bool
	// maxIdle: the idle lanes a run keeps; seen and held, the run and its
	// lanes at the last check, to count the lanes a run let go.
	maxIdle int
	seen    *sequencer
	held    map[string]bool
	// snapshots are states the sequencer had between tasks: a Reset goes
	// back to one.
	snapshots []contract.SequencerState

	steps, states int
	reached       map[string]int
	// didReset: a Reset forgot finished updates already answered, so a
	// lane may hold a finished event in flight until the heads sweep
	// resyncs it; the stale-in-flight check stops there, but for the
	// finishes answered since the last Reset (answeredDone): those the
	// sequencer heard, and must not forget by itself.
	didReset     bool
	answeredDone map[key]bool
}

func newModel(t *rapid.T, st *modelStats) *model {
	m := &model{
		ledger:   mLedger{endpoints: map[string]*mEndpoint{}, events: map[int64]*mEvent{}, voided: map[int64]bool{}, lanes: map[string]*mLane{}},
		released: map[key]contract.LaneRelease{}, receiver: map[string]int64{}, posted: map[int64]bool{},
		reached: map[string]int{}, answeredDone: map[key]bool{},
	}
	for range rapid.IntRange(1, 3).Draw(t, "endpoints") {
		m.addEndpoint()
	}
	// Up to twice a lane's queue, so that a lane held behind a dead letter
	// overflows its queue and loads the rest from the ledger.
	m.total = int64(rapid.IntRange(1, 2*contract.MaxQueuedPerLane+8).Draw(t, "sequences"))
	m.maxIdle = rapid.IntRange(0, 2).Draw(t, "idle lanes kept")
	m.s = m.newSequencer()
	m.loaded = true // a correlation never seen: nothing to load
	return m
}

// newSequencer is a run of the sequencer that keeps at most maxIdle idle
// lanes, so that the model's few lanes are dropped when idle and loaded
// again when an event comes for one, as a correlation's many would be.
func (m *model) newSequencer() *sequencer {
	s := newSequencer(nopWarn{}, "corr")
	s.maxIdle = m.maxIdle
	return s
}

type nopWarn struct{}

func (nopWarn) Warn(string, ...any) {}

func (m *model) addEndpoint() string {
	m.nextEp++
	ep := fmt.Sprintf("ep%d", m.nextEp)
	m.ledger.endpoints[ep] = &mEndpoint{}
	return ep
}

func (m *model) live() []string {
	var out []string
	for _, ep := range sortedKeys(m.ledger.endpoints) {
		if !m.ledger.endpoints[ep].deleted {
			out = append(out, ep)
		}
	}
	return out
}

func (m *model) reach(name string) { m.reached[name]++; m.steps++ }

// actions are the scheduler's moves. rapid picks among them evenly, so the
// moves that make progress (deliveries, loads landing) stand more than once
// and the disruptive ones (failures, the Web UI's buttons, pauses) skip
// most of their turns: a run then gets far enough for them to hit a lane
// mid-flight.
func (m *model) actions() map[string]func(*rapid.T) {
	rare := func(f func(*rapid.T)) func(*rapid.T) {
		return func(t *rapid.T) {
			if rapid.IntRange(0, 3).Draw(t, "rare") > 0 {
				t.Skip("not this time")
			}
			f(t)
		}
	}
	return map[string]func(*rapid.T){
		"post":            m.post,
		"post2":           m.post,
		"post3":           m.post,
		"post4":           m.post,
		"arrive":          m.arrive,
		"arrive2":         m.arrive,
		"arrive3":         m.arrive,
		"arriveAgain":     m.arriveAgain,
		"loadRead":        m.loadRead,
		"loadRead2":       m.loadRead,
		"loadLand":        m.loadLand,
		"loadLand2":       m.loadLand,
		"loadFail":        rare(m.loadFail),
		"deliver":         m.deliver,
		"deliver2":        m.deliver,
		"deliver3":        m.deliver,
		"deadLetter":      m.deadLetter,
		"replay":          m.replay,
		"skip":            m.skip,
		"resync":          m.resync,
		"void":            rare(m.void),
		"endpointCreate":  rare(m.endpointCreate),
		"endpointDisable": rare(m.endpointDisable),
		"endpointDelete":  rare(m.endpointDelete),
		"tenantDisable":   rare(m.tenantDisable),
		"continueAsNew":   rare(m.continueAsNew),
		"terminate":       rare(m.terminate),
		"reset":           rare(m.reset),
		"finishRaces":     m.finishRacesResync,
		"finishRaces2":    m.finishRacesResync,
		"":                m.check,
	}
}

// post: the producer posts a sequence it has not (any order): the API
// stores it with its routing (every live endpoint it picks), then sends
// the arrival.
func (m *model) post(t *rapid.T) {
	var open []int64
	for s := int64(1); s <= m.total; s++ {
		if !m.posted[s] && !m.ledger.voided[s] {
			open = append(open, s)
		}
	}
	if len(open) == 0 {
		t.Skip("every sequence posted")
	}
	// Near in order, as producers are, with jumps.
	i := rapid.IntRange(0, min(len(open)-1, 4)).Draw(t, "post")
	m.store(t, open[i])
	m.reach("post")
}

func (m *model) store(t *rapid.T, seq int64) {
	m.posted[seq] = true
	e := &mEvent{id: fmt.Sprintf("evt-%d", seq), seq: seq, state: map[string]dState{}}
	for _, ep := range m.live() {
		if t == nil || rapid.IntRange(0, 3).Draw(t, "route-"+ep) > 0 {
			e.routed = append(e.routed, ep)
			e.state[ep] = dOpen
		}
	}
	m.ledger.events[seq] = e
	m.pending = append(m.pending, message{kind: msgArrive, arrival: contract.Arrival{Sequence: seq, EventID: e.id, Endpoints: slices.Clone(e.routed)}})
}

func (m *model) pick(t *rapid.T, n int, label string) int {
	if n == 0 {
		t.Skip("nothing to " + label)
	}
	return rapid.IntRange(0, n-1).Draw(t, label)
}

// arrive delivers a pending update (an arrival, a finished delivery or a
// resync) to the sequencer: its handler runs until it answers or blocks on
// a load.
func (m *model) arrive(t *rapid.T) {
	i := m.pick(t, len(m.pending), "message")
	msg := m.pending[i]
	m.pending = slices.Delete(m.pending, i, i+1)
	if !m.loaded {
		m.waiting = append(m.waiting, msg)
	} else {
		m.run(t, &handler{msg: msg})
	}
	switch msg.kind {
	case msgFinished:
		m.reach("finished")
	default:
		m.reach("arrive")
	}
}

// arriveAgain: a caller whose answer was lost retries an update answered
// already.
func (m *model) arriveAgain(t *rapid.T) {
	i := m.pick(t, len(m.answered), "repeat")
	msg := m.answered[i]
	m.pending = append(m.pending, msg)
	if msg.kind == msgFinished {
		m.reach("finished-again")
	} else {
		m.reach("arrive-again")
	}
}

// run starts a handler: it does what the workflow's handler does before its
// first local activity.
func (m *model) run(t *rapid.T, h *handler) {
	switch h.msg.kind {
	case msgArrive:
		m.s.arrive(h.msg.arrival)
		m.settle(t, h)
	case msgFinished:
		h.known, h.repeated = m.s.finished(h.msg.done)
		if !h.known {
			m.beginResync(h)
			return
		}
		m.settle(t, h)
	case msgResync:
		m.beginResync(h)
	}
}

func (m *model) beginResync(h *handler) {
	h.la, h.began, h.readSeq = laSequencer, m.s.beginMerge(), nil
	m.handlers = append(m.handlers, h)
}

// settle is the handlers' settle: up to four rounds of lane loads, then the
// answer.
func (m *model) settle(t *rapid.T, h *handler) {
	if h.rounds < 4 {
		if eps := m.s.needLoads(); len(eps) > 0 {
			m.reached["lane-load"]++
			h.rounds++
			h.la, h.eps, h.readSeq, h.readLanes = laLanes, eps, nil, nil
			m.handlers = append(m.handlers, h)
			return
		}
	}
	m.answer(t, h)
}

// loadRead: a handler's local activity reads the ledger.
func (m *model) loadRead(t *rapid.T) {
	var unread []*handler
	for _, h := range m.handlers {
		if (h.la == laSequencer && h.readSeq == nil) || (h.la == laLanes && h.readLanes == nil) {
			unread = append(unread, h)
		}
	}
	h := unread[m.pick(t, len(unread), "read")]
	if h.la == laSequencer {
		l := m.ledger.load(contract.MaxQueuedPerLane)
		h.readSeq = &l
	} else {
		h.readLanes = []contract.LaneState{}
		for _, la := range h.eps {
			h.readLanes = append(h.readLanes, m.ledger.lane(la.Endpoint, la.After, contract.MaxQueuedPerLane))
		}
	}
	m.reach("load-read")
}

func (m *model) readHandlers() []int {
	var out []int
	for i, h := range m.handlers {
		if h.readSeq != nil || h.readLanes != nil {
			out = append(out, i)
		}
	}
	return out
}

// loadLand: a local activity's result reaches its handler, which goes on.
func (m *model) loadLand(t *rapid.T) {
	read := m.readHandlers()
	m.landAt(t, read[m.pick(t, len(read), "land")])
	m.reach("load-land")
}

// loadFail: a local activity fails; the handler gives up its loads and
// fails, and its caller retries the update.
func (m *model) loadFail(t *rapid.T) {
	i := m.pick(t, len(m.handlers), "fail")
	h := m.handlers[i]
	m.handlers = slices.Delete(m.handlers, i, i+1)
	if h.la == laSequencer {
		m.s.abortMerge(h.began)
	} else {
		m.s.abortLoad(h.eps)
	}
	if h.first {
		// A fresh run whose first load fails ends; the retried update
		// starts another.
		m.freshRun()
	} else {
		m.pending = append(m.pending, h.msg)
	}
	m.reach("load-fail")
}

// answer ends a handler: its answer reaches the caller, which passes the
// releases on (and the starter starts the event's workflow, unless the
// sequencer said it is finished).
func (m *model) answer(t *rapid.T, h *handler) {
	if h.first {
		m.s.decide()
		m.loaded = true
		for _, msg := range m.waiting {
			m.run(t, &handler{msg: msg})
		}
		m.waiting = nil
		return
	}
	var hs contract.Handoffs
	switch h.msg.kind {
	case msgArrive:
		ann := m.s.announce(h.msg.arrival)
		if ann.Finished {
			e := m.ledger.events[h.msg.arrival.Sequence]
			for _, ep := range e.routed {
				if !e.state[ep].finished() {
					t.Fatalf("arrival of %d answered finished while its delivery to %s is open in the ledger", e.seq, ep)
				}
			}
		}
		for _, r := range ann.Released {
			m.release(t, h.msg.arrival.Sequence, h.msg.arrival.EventID, r)
		}
		hs.Handoffs = ann.Handoffs
	case msgFinished:
		hs = m.s.withInFlight(m.s.releases(), h.repeated)
	case msgResync:
		hs = m.s.inFlight()
	}
	for _, ho := range hs.Handoffs {
		for _, r := range ho.Release.Lanes {
			m.release(t, ho.Release.Sequence, ho.EventID, r)
		}
	}
	if h.msg.kind != msgResync {
		m.answered = append(m.answered, h.msg)
	}
	if h.msg.kind == msgFinished {
		for _, ld := range h.msg.done.Lanes {
			m.answeredDone[key{h.msg.done.Sequence, ld.Endpoint}] = true
		}
	}
}

// release checks a release as the event's lane gets it: every sequence
// before it has arrived, every earlier event routed to the lane is
// finished there, and its previous sequence is the one last delivered in
// the lane (the receiver's cursor, or its compare-and-swap parks it).
func (m *model) release(t *rapid.T, seq int64, eventID string, r contract.LaneRelease) {
	k := key{seq, r.Endpoint}
	e := m.ledger.events[seq]
	if e == nil || e.id != eventID {
		t.Fatalf("release of %s for sequence %d, which the ledger does not hold", eventID, seq)
	}
	if _, ok := m.released[k]; ok || e.state[r.Endpoint].finished() {
		return // a lane takes its first release; a finished one none
	}
	for s := int64(1); s < seq; s++ {
		if !m.ledger.arrived(s) {
			t.Fatalf("%d released to %s before %d arrived", seq, r.Endpoint, s)
		}
		if p := m.ledger.events[s]; p != nil && slices.Contains(p.routed, r.Endpoint) && !p.state[r.Endpoint].finished() {
			t.Fatalf("%d released to %s while %d, routed there earlier, is open", seq, r.Endpoint, s)
		}
	}
	var last int64
	if ln := m.ledger.lanes[r.Endpoint]; ln != nil {
		last = ln.previous
	}
	if r.Previous != last {
		t.Fatalf("%d released to %s with previous %d; the lane last delivered %d", seq, r.Endpoint, r.Previous, last)
	}
	m.released[k] = r
	t.Logf("released %d to %s: %+v", seq, r.Endpoint, r)
}

// delivering lists the released deliveries not finished (dead or not).
func (m *model) delivering(state dState) []key {
	var out []key
	for _, k := range sortedKeys2(m.released) {
		if m.ledger.events[k.seq].state[k.ep] == state {
			out = append(out, k)
		}
	}
	return out
}

func sortedKeys2[V any](mp map[key]V) []key {
	out := make([]key, 0, len(mp))
	for k := range mp {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].seq != out[j].seq {
			return out[i].seq < out[j].seq
		}
		return out[i].ep < out[j].ep
	})
	return out
}

func (m *model) paused(ep string) bool {
	return m.tenantOff || m.ledger.endpoints[ep].disabled
}

// deliver: a released delivery reaches its receiver (a deleted endpoint's
// ends skipped), the ledger records it, and its hand-over is sent.
func (m *model) deliver(t *rapid.T) {
	var ready []key
	for _, k := range m.delivering(dOpen) {
		if !m.paused(k.ep) || m.ledger.endpoints[k.ep].deleted {
			ready = append(ready, k)
		}
	}
	k := ready[m.pick(t, len(ready), "deliver")]
	m.finishDelivery(t, k, m.ledger.endpoints[k.ep].deleted)
	m.reach("deliver")
}

func (m *model) finishDelivery(t *rapid.T, k key, skipped bool) {
	e := m.ledger.events[k.seq]
	if !skipped {
		r := m.released[k]
		if r.Previous != m.receiver[k.ep] {
			t.Fatalf("%d reaches %s with previous %d; the receiver applied %d last: it would park it", k.seq, k.ep, r.Previous, m.receiver[k.ep])
		}
		m.receiver[k.ep] = k.seq
	}
	if m.ledger.finish(e, k.ep, skipped) {
		m.pending = append(m.pending, message{kind: msgFinished, done: contract.Done{Sequence: k.seq, EventID: e.id, Lanes: []contract.LaneDone{{Endpoint: k.ep, Skipped: skipped}}}})
	}
}

// deadLetter: a released delivery spends its window.
func (m *model) deadLetter(t *rapid.T) {
	open := m.delivering(dOpen)
	k := open[m.pick(t, len(open), "dead")]
	m.ledger.events[k.seq].state[k.ep] = dDead
	m.reach("dead-letter")
}

func (m *model) replay(t *rapid.T) {
	dead := m.delivering(dDead)
	k := dead[m.pick(t, len(dead), "replay")]
	m.ledger.events[k.seq].state[k.ep] = dOpen
	m.reach("replay")
}

func (m *model) skip(t *rapid.T) {
	dead := m.delivering(dDead)
	k := dead[m.pick(t, len(dead), "skip")]
	m.finishDelivery(t, k, true)
	m.reach("skip")
}

// resync: the heads sweep's repair, or an operator's void, asks the
// sequencer to merge the ledger.
func (m *model) resync(t *rapid.T) {
	m.pending = append(m.pending, message{kind: msgResync})
	m.reach("resync")
}

// void: an operator voids a sequence the producer never sent; the API
// writes its tombstone, then asks for a resync.
func (m *model) void(t *rapid.T) {
	var open []int64
	for s := int64(1); s <= m.total; s++ {
		if !m.ledger.arrived(s) {
			open = append(open, s)
		}
	}
	s := open[m.pick(t, len(open), "void")]
	m.ledger.voided[s] = true
	m.pending = append(m.pending, message{kind: msgResync})
	m.reach("void")
}

func (m *model) endpointCreate(t *rapid.T) {
	if len(m.ledger.endpoints) >= 6 {
		t.Skip("enough endpoints")
	}
	m.addEndpoint()
	m.reach("endpoint-create")
}

// endpointDisable toggles an endpoint's pause: its deliveries wait.
func (m *model) endpointDisable(t *rapid.T) {
	live := m.live()
	ep := live[m.pick(t, len(live), "disable")]
	m.ledger.endpoints[ep].disabled = !m.ledger.endpoints[ep].disabled
	if m.ledger.endpoints[ep].disabled {
		m.reach("endpoint-disable")
	} else {
		m.reach("endpoint-enable")
	}
}

func (m *model) tenantDisable(t *rapid.T) {
	m.tenantOff = !m.tenantOff
	m.reach("tenant-disable")
}

// endpointDelete: routing stops, its dead letters are skipped, and every
// delivery released to it ends skipped.
func (m *model) endpointDelete(t *rapid.T) {
	live := m.live()
	if len(live) <= 1 {
		t.Skip("keep an endpoint")
	}
	ep := live[m.pick(t, len(live), "delete")]
	m.ledger.endpoints[ep].deleted = true
	for _, k := range m.delivering(dDead) {
		if k.ep == ep {
			m.finishDelivery(t, k, true)
		}
	}
	m.reach("endpoint-delete")
}

// continueAsNew: with no handler running, the state goes to a new run
// through JSON, as the workflow's input.
func (m *model) continueAsNew(t *rapid.T) {
	if len(m.handlers) > 0 || !m.loaded {
		t.Skip("handlers running")
	}
	var st contract.SequencerState
	roundTrip(t, m.s.snapshot(), &st)
	m.s = m.newSequencer()
	m.s.restore(st)
	m.reach("continue-as-new")
}

// dropHandlers: a run ends with handlers under way; their callers retry.
func (m *model) dropHandlers() {
	for _, h := range m.handlers {
		if !h.first {
			m.pending = append(m.pending, h.msg)
		}
	}
	m.handlers = nil
}

// terminate: an operator terminates the sequencer; the next update starts
// a fresh run, which loads the ledger before any handler goes on.
func (m *model) terminate(t *rapid.T) {
	m.freshRun()
	m.reach("terminate")
}

// freshRun ends the running sequencer (its handlers' callers retry) and
// starts another, whose first load runs before any handler goes on.
func (m *model) freshRun() {
	m.dropHandlers()
	m.pending = append(m.pending, m.waiting...)
	m.waiting = nil
	m.s = m.newSequencer()
	m.loaded = false
	m.beginResync(&handler{first: true})
}

// reset: an operator resets the sequencer to an earlier workflow task: the
// state it had then, with the updates it answered since forgotten.
func (m *model) reset(t *rapid.T) {
	if len(m.snapshots) == 0 {
		t.Skip("no earlier state")
	}
	st := m.snapshots[m.pick(t, len(m.snapshots), "reset")]
	m.dropHandlers()
	m.pending = append(m.pending, m.waiting...)
	m.waiting = nil
	m.s = m.newSequencer()
	m.s.restore(st)
	m.loaded = true
	m.didReset = true
	m.answeredDone = map[key]bool{}
	m.reach("reset")
}

// finishRacesResync: a delivery released before the sequencer's state
// lost it (a Reset took the sequencer back to before its release; the
// heads sweep started its workflow again where the ledger has it, released,
// and resyncs the sequencer) is delivered while that resync is under way:
// the resync's load reads the ledger before the delivered mark commits,
// and the finish, which the sequencer does not know, reaches it while that
// load is still out (it resyncs too). The loads land in the order loadLand
// picks.
func (m *model) finishRacesResync(t *rapid.T) {
	if !m.loaded {
		t.Skip("the run's first load is under way")
	}
	var forgot []key
	for _, k := range m.delivering(dOpen) {
		deleted := m.ledger.endpoints[k.ep].deleted
		if l := m.s.lanes[k.ep]; (l == nil || l.inFlight != k.seq) && (!m.paused(k.ep) || deleted) {
			forgot = append(forgot, k)
		}
	}
	k := forgot[m.pick(t, len(forgot), "forgotten")]
	sweep := &handler{msg: message{kind: msgResync}}
	m.beginResync(sweep)
	l := m.ledger.load(contract.MaxQueuedPerLane)
	sweep.readSeq = &l
	m.finishDelivery(t, k, m.ledger.endpoints[k.ep].deleted)
	finish := m.pending[len(m.pending)-1]
	m.pending = m.pending[:len(m.pending)-1]
	m.run(t, &handler{msg: finish})
	m.reach("finish-races-resync")
}

// check runs after every step: the lanes' invariants on the sequencer's
// state.
func (m *model) check(t *rapid.T) {
	m.states++
	if m.s == nil {
		return
	}
	if m.s == m.seen {
		for ep := range m.held {
			if m.s.lanes[ep] == nil {
				m.reached["lane-drop"]++
			}
		}
	}
	m.seen, m.held = m.s, map[string]bool{}
	for ep := range m.s.lanes {
		m.held[ep] = true
	}
	for _, ep := range sortedKeys(m.s.lanes) {
		l := m.s.lanes[ep]
		if l.partial && len(l.queue) > 0 {
			m.reached["lane-overflow"]++
		}
		if len(l.queue) > contract.MaxQueuedPerLane {
			t.Fatalf("lane %s queues %d events, over the cap", ep, len(l.queue))
		}
		if l.inFlight == 0 || !m.loaded {
			continue
		}
		m.checkInFlight(t, ep)
		for s := int64(1); s < l.inFlight; s++ {
			if p := m.ledger.events[s]; p != nil && slices.Contains(p.routed, ep) && !p.state[ep].finished() {
				t.Fatalf("lane %s has %d in flight while %d, routed there earlier, is open", ep, l.inFlight, s)
			}
		}
	}
	if len(m.s.arrived) > contract.MaxArrivedRanges {
		t.Fatalf("%d arrived ranges, over the cap", len(m.s.arrived))
	}
	if len(m.handlers) == 0 && m.loaded && len(m.snapshots) < 8 {
		var st contract.SequencerState
		roundTrip(t, m.s.snapshot(), &st)
		m.snapshots = append(m.snapshots, st)
	}
}

// checkInFlight: lane ep never holds in flight an event the ledger has
// finished there unless the finished update is on its way, or a Reset
// made the sequencer forget the finish it had answered: otherwise the lane
// would wait for the heads sweep, and with no event after it in the lane,
// nothing would ever move the sequencer past it.
func (m *model) checkInFlight(t *rapid.T, ep string) {
	l := m.s.lanes[ep]
	e := m.ledger.events[l.inFlight]
	if e == nil || !e.state[ep].finished() || m.finishPending(l.inFlight, ep) {
		return
	}
	if !m.didReset || m.answeredDone[key{l.inFlight, ep}] {
		t.Fatalf("lane %s holds %d in flight, finished in the ledger, and no finished update for it is on its way", ep, l.inFlight)
	}
}

// drain ends the run as the system settles: the producer's missing
// sequences arrive, operators enable what they paused and replay what was
// dead-lettered, every update and delivery goes through, and the sweep
// repairs what waits (a resync, and each open event's arrival again). Then
// every event must be finished in every lane it was routed to.
func (m *model) drain(t *rapid.T) {
	m.tenantOff = false
	for _, e := range m.ledger.endpoints {
		e.disabled = false
	}
	for s := int64(1); s <= m.total; s++ {
		if !m.ledger.arrived(s) {
			m.store(nil, s)
		}
	}
	for sweep := 0; sweep < 6; sweep++ {
		for guard := 0; guard < 100000; guard++ {
			switch {
			case len(m.readHandlers()) > 0:
				m.landAt(t, m.readHandlers()[0])
			case len(m.handlers) > 0:
				h := m.handlers[0]
				if h.la == laSequencer {
					l := m.ledger.load(contract.MaxQueuedPerLane)
					h.readSeq = &l
				} else {
					h.readLanes = []contract.LaneState{}
					for _, la := range h.eps {
						h.readLanes = append(h.readLanes, m.ledger.lane(la.Endpoint, la.After, contract.MaxQueuedPerLane))
					}
				}
			case len(m.pending) > 0:
				msg := m.pending[0]
				m.pending = m.pending[1:]
				if m.loaded {
					m.run(t, &handler{msg: msg})
				} else {
					m.waiting = append(m.waiting, msg)
				}
			case len(m.delivering(dDead)) > 0:
				k := m.delivering(dDead)[0]
				m.ledger.events[k.seq].state[k.ep] = dOpen
			case len(m.delivering(dOpen)) > 0:
				k := m.delivering(dOpen)[0]
				m.finishDelivery(t, k, m.ledger.endpoints[k.ep].deleted)
			default:
				guard = 100000
			}
		}
		if m.allFinished() {
			break
		}
		m.pending = append(m.pending, message{kind: msgResync})
		for _, seq := range sortedKeys(m.ledger.events) {
			e := m.ledger.events[seq]
			for _, ep := range e.routed {
				if !e.state[ep].finished() {
					m.pending = append(m.pending, message{kind: msgArrive, arrival: contract.Arrival{Sequence: seq, EventID: e.id, Endpoints: slices.Clone(e.routed)}})
					break
				}
			}
		}
	}
	for _, seq := range sortedKeys(m.ledger.events) {
		e := m.ledger.events[seq]
		for _, ep := range e.routed {
			if !e.state[ep].finished() {
				_, released := m.released[key{seq, ep}]
				t.Fatalf("after the system settled, %d is still open at %s (released: %v); sequencer: %+v", seq, ep, released, m.s.snapshot())
			}
		}
	}
	// Every finish it heard reached the sequencer's state: none holds a
	// lane back, even with no event after it to make the sweep resync.
	for _, ep := range sortedKeys(m.s.lanes) {
		if m.s.lanes[ep].inFlight != 0 {
			m.checkInFlight(t, ep)
		}
	}
}

// landAt lands the local activity of the handler at index i, which has
// read the ledger: its result, through JSON as a local activity's result
// is recorded, goes where the workflow's handler puts it.
func (m *model) landAt(t *rapid.T, i int) {
	h := m.handlers[i]
	m.handlers = slices.Delete(m.handlers, i, i+1)
	if h.la == laSequencer {
		var l contract.SequencerLoad
		roundTrip(t, *h.readSeq, &l)
		for _, ln := range l.Lanes {
			if _, ok := m.s.lanes[ln.Endpoint]; ok && !h.began[ln.Endpoint] {
				m.reached["merge-absorbs-lane"]++
			}
		}
		named := map[string]bool{}
		for _, ln := range l.Lanes {
			named[ln.Endpoint] = true
		}
		for ep := range h.began {
			if named[ep] {
				continue
			}
			if ln := m.s.lanes[ep]; ln != nil && (len(ln.queue) > 0 || ln.partial) {
				m.reached["merge-unnamed-reload"]++
			} else {
				m.reached["merge-unnamed-drop"]++
			}
		}
		m.s.merge(l, h.began)
		// A lane the load began and does not name had nothing open when
		// it read the ledger, after what the lane held in flight was
		// stored (it was released before the load began, and a lane
		// releases nothing while it loads): that delivery is finished.
		for _, ep := range sortedKeys(h.began) {
			if ln := m.s.lanes[ep]; !named[ep] && ln != nil && ln.inFlight != 0 {
				t.Fatalf("a load that found nothing open at %s leaves it holding %d in flight", ep, ln.inFlight)
			}
		}
	} else {
		var lanes []contract.LaneState
		roundTrip(t, h.readLanes, &lanes)
		byEndpoint := map[string]contract.LaneState{}
		for _, ll := range lanes {
			byEndpoint[ll.Endpoint] = ll
		}
		for _, la := range h.eps {
			m.s.endLoad(m.s.lanes[la.Endpoint], byEndpoint[la.Endpoint])
		}
		m.s.pruneVoided()
	}
	h.la = laNone
	m.settle(t, h)
}

func (m *model) allFinished() bool {
	for _, e := range m.ledger.events {
		for _, ep := range e.routed {
			if !e.state[ep].finished() {
				return false
			}
		}
	}
	return true
}

func roundTrip(t *rapid.T, in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// finishPending: a finished update of seq at ep is on its way (queued,
// waiting or in a handler).
func (m *model) finishPending(seq int64, ep string) bool {
	has := func(msg message) bool {
		if msg.kind != msgFinished || msg.done.Sequence != seq {
			return false
		}
		return slices.ContainsFunc(msg.done.Lanes, func(ld contract.LaneDone) bool { return ld.Endpoint == ep })
	}
	return slices.ContainsFunc(m.pending, has) || slices.ContainsFunc(m.waiting, has) ||
		slices.ContainsFunc(m.handlers, func(h *handler) bool { return has(h.msg) })
}
