package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// delivery is one event's delivery to one endpoint.
type delivery struct {
	seq int64
	ep  string
}

// lanePos is a lane's position as the harness has played it: the last
// sequence delivered in it and those skipped since.
type lanePos struct {
	previous int64
	skipped  []int64
}

// seqHarness runs one SequencerWorkflow run and plays everything around it
// as the real system does: the API's arrive updates, and every delivery
// of the correlation, which, doneDelay after its release, sends the
// finished update and releases what the answer names. It records each
// lane's releases in order and flags a release that breaks the order: one
// made while its lane has another in flight, before every earlier
// sequence arrived, before every earlier event meant for its endpoint
// finished there, or carrying a position (Previous, Skipped) the lane is
// not at.
type seqHarness struct {
	t         *testing.T
	env       *testsuite.TestWorkflowEnvironment
	doneDelay time.Duration
	// cursor: every sequence below it was finished before the test.
	cursor int64

	mu         sync.Mutex
	routes     map[int64][]string // each event's endpoints, from its arrival
	arrived    map[int64]bool
	finished   map[delivery]bool
	inFlight   map[string]int64
	pos        map[string]*lanePos
	releases   map[string][]int64 // each lane's releases in order
	carried    map[delivery]contract.LaneRelease
	dead       map[delivery]bool // deliveries dead-lettered: they never finish by themselves
	skips      map[delivery]bool // deliveries that finish as skipped
	violations []string
	answers    map[int64]contract.Announcement // arrive answers by sequence
	loads      int
	laneLoads  int
	// The ledger, as the real system keeps it: each stored event with its
	// endpoints and those open, each lane's position, the voided sequences.
	// An arrival is stored before its update, and a finish is written
	// before its update, as the API and the finishers do. LoadSequencer and
	// LoadLanes answer from it; loadErr, when set, answers each call first
	// (nil: it succeeds).
	ledgerEvents map[int64]*ledgerEvent
	ledgerLanes  map[string]contract.LaneState
	voided       []int64
	loadErr      func(now time.Time) error
	start        time.Time
}

type ledgerEvent struct {
	endpoints []string
	open      map[string]bool
}

func newSeqHarness(t *testing.T, cursor int64) *seqHarness {
	t.Helper()
	h := &seqHarness{t: t, env: newEnv(t), doneDelay: 2 * time.Second, cursor: cursor,
		routes: map[int64][]string{}, arrived: map[int64]bool{}, finished: map[delivery]bool{}, inFlight: map[string]int64{},
		pos: map[string]*lanePos{}, releases: map[string][]int64{}, carried: map[delivery]contract.LaneRelease{},
		dead: map[delivery]bool{}, skips: map[delivery]bool{}, answers: map[int64]contract.Announcement{},
		ledgerEvents: map[int64]*ledgerEvent{}, ledgerLanes: map[string]contract.LaneState{}}
	h.start = h.env.Now()
	h.env.OnActivity(act.LoadSequencer, mock.Anything, tenant, correlation).Return(func(context.Context, string, string) (contract.SequencerLoad, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.loads++
		if err := h.failLoad(); err != nil {
			return contract.SequencerLoad{}, err
		}
		return h.ledgerLoad(), nil
	}).Maybe()
	h.env.OnActivity(act.LoadLanes, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.LoadLanesInput) ([]contract.LaneState, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.laneLoads++
		if in.Tenant != tenant {
			h.violations = append(h.violations, fmt.Sprintf("LoadLanes read tenant %q's ledger, not the sequencer's %q", in.Tenant, tenant))
		}
		if err := h.failLoad(); err != nil {
			return nil, err
		}
		var out []contract.LaneState
		for _, la := range in.Lanes {
			out = append(out, h.ledgerLane(la.Endpoint, la.After))
		}
		return out, nil
	}).Maybe()
	return h
}

func (h *seqHarness) failLoad() error {
	if h.loadErr == nil {
		return nil
	}
	return h.loadErr(h.env.Now())
}

// ledgerCursor is the first sequence from the test's cursor on that is
// missing or open somewhere.
func (h *seqHarness) ledgerCursor() int64 {
	c := h.cursor
	for {
		e, ok := h.ledgerEvents[c]
		if !ok || slices.ContainsFunc(e.endpoints, func(ep string) bool { return e.open[ep] }) {
			return c
		}
		c++
	}
}

// ledgerLoad is what the real ledger answers LoadSequencer
// (store.CorrelationLoadOf).
func (h *seqHarness) ledgerLoad() contract.SequencerLoad {
	l := contract.SequencerLoad{Next: h.ledgerCursor(), Voided: slices.Clone(h.voided)}
	l.Frontier = l.Next
	for _, seq := range sortedKeys(h.ledgerEvents) {
		switch {
		case seq < l.Frontier:
		case seq == l.Frontier:
			l.Frontier++
		case len(l.Arrived) > 0 && l.Arrived[len(l.Arrived)-1].To == seq-1:
			l.Arrived[len(l.Arrived)-1].To = seq
		default:
			l.Arrived = append(l.Arrived, contract.SequenceRange{From: seq, To: seq})
		}
	}
	eps := map[string]bool{}
	for ep := range h.ledgerLanes {
		eps[ep] = true
	}
	for _, e := range h.ledgerEvents {
		for ep, open := range e.open {
			eps[ep] = eps[ep] || open
		}
	}
	for _, ep := range sortedKeys(eps) {
		if eps[ep] {
			l.Lanes = append(l.Lanes, h.ledgerLane(ep, 0))
		}
	}
	return l
}

// ledgerLane is the lane's position and its first open deliveries after
// after, as the real ledger answers them (store.LanesLoad).
func (h *seqHarness) ledgerLane(ep string, after int64) contract.LaneState {
	l := h.ledgerLanes[ep]
	l.Endpoint = ep
	for _, seq := range sortedKeys(h.ledgerEvents) {
		if seq <= after || !h.ledgerEvents[seq].open[ep] {
			continue
		}
		if len(l.Queued) == contract.MaxQueuedPerLane {
			l.Partial, l.KnownThrough = true, l.Queued[len(l.Queued)-1].Sequence
			break
		}
		l.Queued = append(l.Queued, contract.QueuedEvent{Sequence: seq, EventID: eventID(seq)})
	}
	return l
}

func sortedKeys[K interface{ ~string | ~int64 }, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// stored makes the ledger hold event seq, routed to endpoints, with those
// still open; it has arrived as far as the order goes.
func (h *seqHarness) stored(seq int64, endpoints []string, open ...string) {
	e := &ledgerEvent{endpoints: endpoints, open: map[string]bool{}}
	for _, ep := range open {
		e.open[ep] = true
	}
	h.ledgerEvents[seq] = e
	h.routes[seq] = endpoints
	h.arrived[seq] = true
	for _, ep := range endpoints {
		if !slices.Contains(open, ep) {
			h.finished[delivery{seq, ep}] = true
		}
	}
}

// laneAt makes the ledger (and the harness) have the lane at this position.
func (h *seqHarness) laneAt(ep string, previous, lastFinished int64, skipped ...int64) {
	h.ledgerLanes[ep] = contract.LaneState{Endpoint: ep, Previous: previous, Skipped: skipped, LastFinished: lastFinished}
	h.pos[ep] = &lanePos{previous: previous, skipped: skipped}
}

func (h *seqHarness) flag(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, v)
}

// release records a lane's release the sequencer answered, checks it, and
// plays the delivery: finished doneDelay later, unless it is dead. A
// release of the delivery already in flight (a resync names it again) is
// not a new one.
func (h *seqHarness) release(seq int64, lr contract.LaneRelease) {
	h.mu.Lock()
	ep, d := lr.Endpoint, delivery{seq, lr.Endpoint}
	if h.inFlight[ep] == seq {
		h.mu.Unlock()
		return
	}
	flag := func(format string, args ...any) {
		h.violations = append(h.violations, fmt.Sprintf("release of %d to %s: ", seq, ep)+fmt.Sprintf(format, args...))
	}
	if h.inFlight[ep] != 0 {
		flag("%d is in flight", h.inFlight[ep])
	}
	for s := h.cursor; s < seq; s++ {
		if !h.arrived[s] {
			flag("%d has not arrived", s)
		}
		if slices.Contains(h.routes[s], ep) && !h.finished[delivery{s, ep}] {
			flag("%d is not finished there", s)
		}
	}
	p := h.lanePos(ep)
	// The lane's own skips, and the voided sequences since its previous.
	want := slices.Clone(p.skipped)
	for _, v := range h.voided {
		if v > p.previous && v < seq && !slices.Contains(want, v) {
			want = append(want, v)
		}
	}
	slices.Sort(want)
	if lr.Previous != p.previous || !slices.Equal(lr.Skipped, want) {
		flag("carries previous %d skipped %v, the lane is at %d skipped %v", lr.Previous, lr.Skipped, p.previous, want)
	}
	h.inFlight[ep] = seq
	h.releases[ep] = append(h.releases[ep], seq)
	h.carried[d] = lr
	dead := h.dead[d]
	h.mu.Unlock()
	if !dead {
		h.env.RegisterDelayedCallback(func() { h.finish(seq, ep) }, h.doneDelay)
	}
}

func (h *seqHarness) lanePos(ep string) *lanePos {
	p := h.pos[ep]
	if p == nil {
		p = &lanePos{}
		h.pos[ep] = p
	}
	return p
}

// update sends an update and hands its answer to then.
func update[T any](h *seqHarness, name string, then func(T), args ...any) {
	h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) { h.flag(fmt.Sprintf("%s rejected: %v", name, err)) },
		OnComplete: func(v any, err error) {
			if err != nil {
				h.flag(fmt.Sprintf("%s failed: %v", name, err))
				return
			}
			got, ok := v.(T)
			if !ok {
				h.flag(fmt.Sprintf("%s answered %T", name, v))
				return
			}
			then(got)
		},
	}, args...)
}

// handoffs releases the lanes the handoffs name, as the caller signals them.
func (h *seqHarness) handoffs(hs contract.Handoffs) {
	for _, ho := range hs.Handoffs {
		if ho.EventID != eventID(ho.Release.Sequence) {
			h.flag(fmt.Sprintf("handoff of %d names %s", ho.Release.Sequence, ho.EventID))
		}
		for _, lr := range ho.Release.Lanes {
			h.release(ho.Release.Sequence, lr)
		}
	}
}

// finish sends the delivery's finished update, as its delivering attempt
// (or skip) does, and releases what the answer names.
func (h *seqHarness) finish(seq int64, ep string) {
	h.mu.Lock()
	d := delivery{seq, ep}
	if h.inFlight[ep] == seq {
		h.inFlight[ep] = 0
	}
	h.finished[d] = true
	skipped := h.skips[d]
	p := h.lanePos(ep)
	if skipped {
		p.skipped = append(slices.Clone(p.skipped), seq)
	} else {
		p.previous, p.skipped = seq, nil
	}
	if e := h.ledgerEvents[seq]; e != nil && e.open[ep] {
		e.open[ep] = false
		if ll := h.ledgerLanes[ep]; ll.LastFinished < seq {
			h.ledgerLanes[ep] = contract.LaneState{Endpoint: ep, Previous: p.previous, Skipped: slices.Clone(p.skipped), LastFinished: seq}
		}
	}
	h.mu.Unlock()
	update(h, contract.UpdateFinished, h.handoffs, contract.Done{Sequence: seq, EventID: eventID(seq), Lanes: []contract.LaneDone{{Endpoint: ep, Skipped: skipped}}})
}

// arrive sends the arrive update of event seq, routed to endpoints, d
// after start, as the API does, and releases what the answer says.
func (h *seqHarness) arrive(d time.Duration, seq int64, endpoints ...string) {
	h.mu.Lock()
	h.routes[seq] = endpoints
	h.mu.Unlock()
	h.env.RegisterDelayedCallback(func() {
		h.mu.Lock()
		if h.ledgerEvents[seq] == nil {
			e := &ledgerEvent{endpoints: endpoints, open: map[string]bool{}}
			for _, ep := range endpoints {
				e.open[ep] = !h.finished[delivery{seq, ep}]
			}
			h.ledgerEvents[seq] = e
		}
		h.mu.Unlock()
		update(h, contract.UpdateArrive, func(ann contract.Announcement) {
			h.mu.Lock()
			h.answers[seq] = ann
			h.arrived[seq] = true
			h.mu.Unlock()
			for _, lr := range ann.Released {
				h.release(seq, lr)
			}
			h.handoffs(contract.Handoffs{Handoffs: ann.Handoffs})
		}, contract.Arrival{Sequence: seq, EventID: eventID(seq), Endpoints: endpoints})
	}, d)
}

// resync sends the resync update d after start, as the sweep does.
func (h *seqHarness) resync(d time.Duration) {
	h.env.RegisterDelayedCallback(func() { update(h, contract.UpdateResync, h.handoffs) }, d)
}

// skip makes the given deliveries to ep finish as skipped.
func (h *seqHarness) skip(ep string, seqs ...int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range seqs {
		h.skips[delivery{s, ep}] = true
	}
}

// deadLetter makes the delivery of seq to ep never finish by itself (it
// waits on its dead letter); then skips it after, by the operator.
func (h *seqHarness) deadLetter(seq int64, ep string, skipAfter time.Duration) {
	h.mu.Lock()
	h.dead[delivery{seq, ep}] = true
	h.skips[delivery{seq, ep}] = true
	h.mu.Unlock()
	if skipAfter > 0 {
		h.env.RegisterDelayedCallback(func() { h.finish(seq, ep) }, skipAfter)
	}
}

func (h *seqHarness) state() contract.SequencerState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(contract.QueryState)
	require.NoError(h.t, err)
	var s contract.SequencerState
	require.NoError(h.t, v.Get(&s))
	return s
}

func (h *seqHarness) run(in workflows.SequencerInput) error {
	h.t.Helper()
	if in.CorrelationID == "" {
		in.Tenant, in.CorrelationID = tenant, correlation
	}
	h.env.ExecuteWorkflow(contract.SequencerWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(h.t, h.violations)
	return h.env.GetWorkflowError()
}

// released are the lane's releases in order.
func (h *seqHarness) released(ep string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.releases[ep])
}

func (h *seqHarness) carriedBy(seq int64, ep string) contract.LaneRelease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.carried[delivery{seq, ep}]
}

func (h *seqHarness) answer(seq int64) contract.Announcement {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answers[seq]
}

func seqs(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func queued(seqs ...int64) []contract.QueuedEvent {
	out := make([]contract.QueuedEvent, len(seqs))
	for i, seq := range seqs {
		out[i] = contract.QueuedEvent{Sequence: seq, EventID: eventID(seq)}
	}
	return out
}

func lanes(eps ...string) []contract.LaneRelease {
	out := make([]contract.LaneRelease, len(eps))
	for i, ep := range eps {
		out[i] = contract.LaneRelease{Endpoint: ep}
	}
	return out
}

func TestSequencerReleasesStrictlyInOrder(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	// Arrivals out of order, some while others are in flight.
	for i, seq := range []int64{3, 5, 1, 4, 2} {
		h.arrive(time.Duration(i)*500*time.Millisecond, seq, "ep_1")
	}
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, contract.SequencerState{
			Next: 2, Frontier: 6, // 1 is done, 2 is released, 1 to 5 arrived
			Lanes: []contract.LaneState{{Endpoint: "ep_1", Previous: 1, LastFinished: 1, InFlight: 2, InFlightEvent: eventID(2),
				Queued: queued(3, 4, 5)}},
		}, h.state())
	}, 4*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, seqs(1, 5), h.released("ep_1"))
	require.Equal(t, []contract.LaneRelease{{Endpoint: "ep_1"}}, h.answer(1).Released, "1 arrived next in line: released in the answer")
	for _, seq := range []int64{3, 5, 4, 2} {
		require.Empty(t, h.answer(seq).Released, "%d arrived early: held, released by its predecessor's hand-off", seq)
	}
}

func TestSequencerAnswersARepeatedArrivalAsTheFirst(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = time.Minute
	h.arrive(0, 1, "ep_1", "ep_2")
	h.arrive(time.Second, 2, "ep_1")
	var again, againHeld contract.Announcement
	h.env.RegisterDelayedCallback(func() {
		arrival := func(seq int64, eps ...string) contract.Arrival {
			return contract.Arrival{Sequence: seq, EventID: eventID(seq), Endpoints: eps}
		}
		update(h, contract.UpdateArrive, func(a contract.Announcement) { again = a }, arrival(1, "ep_1", "ep_2"))
		update(h, contract.UpdateArrive, func(a contract.Announcement) { againHeld = a }, arrival(2, "ep_1"))
	}, 2*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, lanes("ep_1", "ep_2"), again.Released, "the released event asking again is told its lanes are released")
	require.Empty(t, againHeld.Released)
	require.Empty(t, againHeld.Handoffs)
	require.Equal(t, []int64{1, 2}, h.released("ep_1"), "and nothing is released twice")
	require.Equal(t, []int64{1}, h.released("ep_2"))
}

func TestSequencerStartsFromTheLedger(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 7)
	h.laneAt("ep_1", 5, 6, 6)
	h.arrive(0, 8, "ep_1")
	h.arrive(time.Second, 7, "ep_1")
	var late contract.Announcement
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateArrive, func(a contract.Announcement) { late = a }, contract.Arrival{Sequence: 5, EventID: eventID(5), Endpoints: []string{"ep_1"}})
	}, 2*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []int64{7, 8}, h.released("ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 5, Skipped: []int64{6}}, h.carriedBy(7, "ep_1"),
		"a skip recorded before this run reaches the lane's next release")
	require.True(t, late.Finished, "a sequence before the cursor is finished")
	require.Equal(t, 1, h.loads)
}

// TestSequencerFreshRunLoadsStoredEvents: a run started after an operator
// terminated the last one knows the stored, unfinished events from the
// ledger. The finished delivery's hand-over starts it and is answered with
// the lanes' next, already stored events; the rest follow.
func TestSequencerFreshRunLoadsStoredEvents(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 3)
	h.laneAt("ep_1", 2, 2)
	h.laneAt("ep_2", 1, 1)
	h.stored(3, []string{"ep_1", "ep_2"}, "ep_1", "ep_2")
	h.stored(4, []string{"ep_1"}, "ep_1")
	h.stored(5, []string{"ep_1", "ep_2"}, "ep_1", "ep_2")
	h.env.RegisterDelayedCallback(func() {
		// Event 2's hand-over, its finish already in the ledger (cursor 3).
		update(h, contract.UpdateFinished, h.handoffs, contract.Done{Sequence: 2, EventID: eventID(2), Lanes: []contract.LaneDone{{Endpoint: "ep_1"}}})
	}, 0)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []int64{3, 4, 5}, h.released("ep_1"))
	require.Equal(t, []int64{3, 5}, h.released("ep_2"))
	require.Equal(t, int64(1), h.carriedBy(3, "ep_2").Previous)
	require.Equal(t, int64(3), h.carriedBy(5, "ep_2").Previous, "4 was never meant for ep_2")
}

func TestSequencerSurvivesALedgerOutageAtStart(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	outageEnd := h.start.Add(20 * time.Second)
	h.loadErr = func(now time.Time) error {
		if now.Before(outageEnd) {
			return errors.New("get correlation cursor: dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	}
	h.arrive(0, 1, "ep_1")
	h.arrive(time.Second, 2, "ep_1")

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []int64{1, 2}, h.released("ep_1"))
	require.Equal(t, lanes("ep_1"), h.answer(1).Released, "the arrival that started the run waits for the load, then is answered")
}

func TestSequencerEndsWhenIdleAndNotBefore(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = 30 * time.Second
	h.arrive(0, 1, "ep_1")
	h.arrive(time.Second, 3, "ep_1") // held: 2 never comes for a while
	h.env.RegisterDelayedCallback(func() {
		require.False(t, h.env.IsWorkflowCompleted(), "a sequencer with a held event does not end")
	}, 10*time.Minute)
	h.arrive(20*time.Minute, 2, "ep_1")

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: 5 * time.Minute}))

	require.Equal(t, []int64{1, 2, 3}, h.released("ep_1"))
	ended := h.env.Now().Sub(h.start)
	// 3 finishes 20 min + 2 × 30 s after start; then 5 min idle.
	requireAbout(t, 26*time.Minute, ended, "ended %s after start", ended)
}

// TestSequencerCarriesSkippedSequencesToTheNextRelease: skips are the
// lane's: each release names those skipped in its lane since the last
// delivery there, and the other lane's releases name none.
func TestSequencerCarriesSkippedSequencesToTheNextRelease(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.skip("ep_1", 2, 3)
	for seq := int64(1); seq <= 5; seq++ {
		h.arrive(time.Duration(seq)*100*time.Millisecond, seq, "ep_1", "ep_2")
	}

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	for _, ep := range []string{"ep_1", "ep_2"} {
		require.Equal(t, seqs(1, 5), h.released(ep))
	}
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 1}, h.carriedBy(2, "ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 1, Skipped: []int64{2}}, h.carriedBy(3, "ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 1, Skipped: []int64{2, 3}}, h.carriedBy(4, "ep_1"), "the release after skips names them all")
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 4}, h.carriedBy(5, "ep_1"), "a delivery clears the list")
	for seq := int64(2); seq <= 5; seq++ {
		require.Equal(t, contract.LaneRelease{Endpoint: "ep_2", Previous: seq - 1}, h.carriedBy(seq, "ep_2"), "ep_1's skips are not ep_2's")
	}
}

// TestSequencerResyncRepairsAResetState: an operator reset the sequencer to
// an earlier point; it believes 2 is in flight while the ledger has the
// correlation at 5 (2, 3 and 4 finished). The finished update of 4 makes it
// resync, and 5 and 6 go on in order.
func TestSequencerResyncRepairsAResetState(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 5)
	h.laneAt("ep_1", 4, 4)
	h.stored(5, []string{"ep_1"}, "ep_1")
	h.stored(6, []string{"ep_1"}, "ep_1")
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateFinished, h.handoffs, contract.Done{Sequence: 4, EventID: eventID(4), Lanes: []contract.LaneDone{{Endpoint: "ep_1"}}})
	}, time.Second)
	stale := contract.SequencerState{Next: 2, Frontier: 4,
		Lanes: []contract.LaneState{{Endpoint: "ep_1", Previous: 1, LastFinished: 1, InFlight: 2, InFlightEvent: eventID(2), Queued: queued(3)}}}

	require.NoError(t, h.run(workflows.SequencerInput{State: &stale, IdleTimeout: time.Minute}))

	require.Equal(t, []int64{5, 6}, h.released("ep_1"))
	require.Equal(t, 1, h.loads)
}

// TestSequencerResyncReleasesAHeadNobodyWasTold: the sweep's resync names
// the event at the cursor that waits with nothing in flight.
func TestSequencerResyncReleasesAHeadNobodyWasTold(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 4)
	h.laneAt("ep_1", 3, 3)
	h.stored(4, []string{"ep_1"}, "ep_1")
	// A run whose state misses 4 (it was stored while Temporal was down and
	// its arrival never came).
	st := contract.SequencerState{Next: 4, Lanes: []contract.LaneState{{Endpoint: "ep_1", Previous: 3, LastFinished: 3}}}
	h.resync(time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{State: &st, IdleTimeout: time.Minute}))

	require.Equal(t, []int64{4}, h.released("ep_1"))
}

// TestSequencerResyncRepeatsTheReleasesInFlight: a resync answers every
// lane in flight, dead-lettered ones included, so a release whose signal
// was lost is sent again.
func TestSequencerResyncRepeatsTheReleasesInFlight(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.deadLetter(1, "ep_1", 0)
	h.arrive(0, 1, "ep_1", "ep_2")
	h.arrive(time.Second, 2, "ep_2")
	h.doneDelay = time.Minute
	var got contract.Handoffs
	h.env.RegisterDelayedCallback(func() { update(h, contract.UpdateResync, func(hs contract.Handoffs) { got = hs }) }, 30*time.Second)
	h.env.RegisterDelayedCallback(func() { h.finish(1, "ep_1") }, 10*time.Minute)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []contract.Handoff{{EventID: eventID(1), Release: contract.Release{Sequence: 1, Lanes: lanes("ep_1", "ep_2")}}}, got.Handoffs)
}

func TestSequencerIgnoresARepeatedFinish(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = 5 * time.Second
	h.arrive(0, 1, "ep_1")
	h.arrive(time.Second, 2, "ep_1")
	h.arrive(time.Second, 3, "ep_1")
	var repeat contract.Handoffs
	h.env.RegisterDelayedCallback(func() {
		// 1's hand-over again (its activity retried, the answer of the
		// first try lost): 2 is named again, not 3 released while 2 is in
		// flight.
		update(h, contract.UpdateFinished, func(v contract.Handoffs) { repeat = v },
			contract.Done{Sequence: 1, EventID: eventID(1), Lanes: []contract.LaneDone{{Endpoint: "ep_1"}}})
	}, 7*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []int64{1, 2, 3}, h.released("ep_1"))
	require.Equal(t, []contract.Handoff{{EventID: eventID(2), Release: contract.Release{Sequence: 2, Lanes: []contract.LaneRelease{{Endpoint: "ep_1", Previous: 1}}}}}, repeat.Handoffs)
}

// TestSequencerContinuesAsNewWithItsState: past MaxHistory it continues as
// new, carrying what has arrived (the frontier at the missing 2, the run
// past it), and each lane's position with its next events: at most
// contract.MaxQueuedPerLane of them, the rest left to the ledger.
func TestSequencerContinuesAsNewWithItsState(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = time.Hour
	h.arrive(0, 1, "ep_1")
	for seq := int64(3); seq <= 40; seq++ {
		h.arrive(time.Duration(seq)*time.Second, seq, "ep_1", "ep_2")
	}
	// The test environment does not count history; say it grew.
	h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistoryLength(61) }, 45*time.Second)
	h.arrive(46*time.Second, 41, "ep_2")

	err := h.run(workflows.SequencerInput{MaxHistory: 60, IdleTimeout: time.Minute})

	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	var next workflows.SequencerInput
	require.NoError(t, converterFor().FromPayloads(can.Input, &next))
	require.Equal(t, correlation, next.CorrelationID)
	require.Equal(t, 60, next.MaxHistory)
	require.NotNil(t, next.State)
	require.EqualValues(t, 1, next.State.Next)
	require.EqualValues(t, 2, next.State.Frontier, "2 never came")
	require.Equal(t, []contract.SequenceRange{{From: 3, To: 41}}, next.State.Arrived)
	kept := queued(seqs(3, 2+contract.MaxQueuedPerLane)...)
	require.Equal(t, []contract.LaneState{
		{Endpoint: "ep_1", InFlight: 1, InFlightEvent: eventID(1), Queued: kept, Partial: true, KnownThrough: 2 + contract.MaxQueuedPerLane},
		{Endpoint: "ep_2", Queued: kept, Partial: true, KnownThrough: 2 + contract.MaxQueuedPerLane},
	}, next.State.Lanes, "each lane keeps its first events, and knows the ledger has more")
}

// TestSequencerDeadLetterHoldsOnlyItsLane: event 1's delivery to ep_1 is
// dead-lettered; ep_2 delivers 1, 2 and 3 meanwhile, and ep_1 goes on only
// once an operator skips it.
func TestSequencerDeadLetterHoldsOnlyItsLane(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.deadLetter(1, "ep_1", 10*time.Minute)
	for seq := int64(1); seq <= 3; seq++ {
		h.arrive(time.Duration(seq)*time.Second, seq, "ep_1", "ep_2")
	}
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []int64{1}, h.released("ep_1"))
		require.Equal(t, []int64{1, 2, 3}, h.released("ep_2"), "the dead letter holds ep_1's lane only")
		st := h.state()
		require.EqualValues(t, 1, st.Next, "the cursor waits for the dead letter")
		require.Equal(t, []contract.LaneState{
			{Endpoint: "ep_1", InFlight: 1, InFlightEvent: eventID(1), Queued: queued(2, 3)},
			{Endpoint: "ep_2", Previous: 3, LastFinished: 3},
		}, st.Lanes)
	}, 5*time.Minute)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []int64{1, 2, 3}, h.released("ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Skipped: []int64{1}}, h.carriedBy(2, "ep_1"))
}

// TestSequencerEventForAnotherEndpointDoesNotHoldALane: 2 is meant only for
// ep_2 (and waits there on a dead letter); ep_1's 3 goes on after its 1,
// naming 1 as its previous.
func TestSequencerEventForAnotherEndpointDoesNotHoldALane(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.deadLetter(2, "ep_2", 10*time.Minute)
	h.arrive(0, 1, "ep_1")
	h.arrive(100*time.Millisecond, 2, "ep_2")
	h.arrive(200*time.Millisecond, 3, "ep_1")
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []int64{1, 3}, h.released("ep_1"), "3 went while 2 waits on its dead letter at ep_2")
	}, 5*time.Minute)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 1}, h.carriedBy(3, "ep_1"))
	require.Equal(t, []int64{2}, h.released("ep_2"))
}

// TestSequencerMissingSequenceHoldsEveryLane: 2 has not arrived, and might
// be meant for any endpoint, so no lane passes it; its arrival releases the
// lanes of later events, which its answer hands off.
func TestSequencerMissingSequenceHoldsEveryLane(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.arrive(0, 1, "ep_1")
	h.arrive(time.Second, 3, "ep_2")
	h.arrive(2*time.Second, 4, "ep_1", "ep_2")
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []int64{1}, h.released("ep_1"))
		require.Empty(t, h.released("ep_2"), "3 waits for 2 although ep_2 has nothing in flight")
	}, time.Minute)
	h.arrive(2*time.Minute, 2, "ep_3")

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	ann := h.answer(2)
	require.Equal(t, lanes("ep_3"), ann.Released)
	require.Equal(t, []contract.Handoff{
		{EventID: eventID(3), Release: contract.Release{Sequence: 3, Lanes: lanes("ep_2")}},
		{EventID: eventID(4), Release: contract.Release{Sequence: 4, Lanes: []contract.LaneRelease{{Endpoint: "ep_1", Previous: 1}}}},
	}, ann.Handoffs, "2's arrival hands off the later events it held")
	require.Equal(t, []int64{1, 4}, h.released("ep_1"))
	require.Equal(t, []int64{3, 4}, h.released("ep_2"))
	require.Equal(t, []int64{2}, h.released("ep_3"))
}

// TestSequencerVoidedSequencesLetEveryLaneGoOn: the producer lost 3 and 4,
// so 5 waits in both lanes; an operator voids them (their tombstones, events
// for nobody, and the voided list, in the ledger) and the resync that
// follows releases 5 in both lanes, each naming 3 and 4 among its skipped
// sequences after its own previous one. Once every lane is past them, the
// sequencer forgets them.
func TestSequencerVoidedSequencesLetEveryLaneGoOn(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.arrive(0, 1, "ep_1", "ep_2")
	h.arrive(time.Second, 2, "ep_1")
	h.arrive(2*time.Second, 5, "ep_1", "ep_2")
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []int64{1, 2}, h.released("ep_1"))
		require.Equal(t, []int64{1}, h.released("ep_2"), "5 waits for 3")
		h.mu.Lock()
		h.stored(3, nil)
		h.stored(4, nil)
		h.voided = []int64{3, 4}
		h.mu.Unlock()
	}, time.Minute)
	h.resync(time.Minute + time.Second)
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []int64{3, 4}, h.state().Voided, "kept while a lane may still name them")
	}, time.Minute+1500*time.Millisecond)
	h.env.RegisterDelayedCallback(func() {
		st := h.state()
		require.EqualValues(t, 6, st.Next)
		require.Empty(t, st.Voided, "every lane is past them")
	}, 2*time.Minute)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, []int64{1, 2, 5}, h.released("ep_1"))
	require.Equal(t, []int64{1, 5}, h.released("ep_2"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 2, Skipped: []int64{3, 4}}, h.carriedBy(5, "ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_2", Previous: 1, Skipped: []int64{3, 4}}, h.carriedBy(5, "ep_2"))
}

// TestSequencerEventWithNoEndpointsTakesItsPlace: 2 is meant for nobody; it
// still fills its place in the order (3 waits for it), and its arrival
// lets the cursor pass it at once.
func TestSequencerEventWithNoEndpointsTakesItsPlace(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = 10 * time.Second
	h.arrive(0, 1, "ep_1")
	h.arrive(time.Second, 3, "ep_1")
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, []int64{1}, h.released("ep_1"), "3 waits for 2 to arrive")
	}, time.Minute)
	h.arrive(2*time.Minute, 2)
	h.env.RegisterDelayedCallback(func() {
		st := h.state()
		require.EqualValues(t, 3, st.Next, "the cursor passed 2 on its arrival")
		require.EqualValues(t, 4, st.Frontier)
		require.Equal(t, []contract.LaneState{{Endpoint: "ep_1", Previous: 1, LastFinished: 1, InFlight: 3, InFlightEvent: eventID(3)}}, st.Lanes)
	}, 2*time.Minute+time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	ann := h.answer(2)
	require.False(t, ann.Finished)
	require.Empty(t, ann.Released)
	require.Equal(t, []contract.Handoff{{EventID: eventID(3), Release: contract.Release{Sequence: 3, Lanes: []contract.LaneRelease{{Endpoint: "ep_1", Previous: 1}}}}}, ann.Handoffs)
	require.Equal(t, []int64{1, 3}, h.released("ep_1"))
}

// TestSequencerMergesLanesTheLedgerHasFurtherOn: the sequencer missed
// finished deliveries (their updates were lost to a reset): the ledger has
// 1 finished everywhere and 2 finished at ep_1. A resync takes that in and
// releases each lane's next event with the ledger's position.
func TestSequencerMergesLanesTheLedgerHasFurtherOn(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 2)
	h.laneAt("ep_1", 2, 2)
	h.laneAt("ep_2", 1, 1)
	h.stored(2, []string{"ep_1", "ep_2"}, "ep_2")
	h.stored(3, []string{"ep_1"}, "ep_1")
	h.doneDelay = time.Hour // the test looks at the resync's answer only
	behind := contract.SequencerState{Next: 1, Frontier: 4,
		Lanes: []contract.LaneState{
			{Endpoint: "ep_1", InFlight: 1, InFlightEvent: eventID(1), Queued: queued(2, 3)},
			{Endpoint: "ep_2", InFlight: 1, InFlightEvent: eventID(1), Queued: queued(2)},
		}}
	var got contract.Handoffs
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateResync, func(hs contract.Handoffs) { got = hs; h.handoffs(hs) })
	}, time.Second)
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, contract.SequencerState{Next: 2, Frontier: 4,
			Lanes: []contract.LaneState{
				{Endpoint: "ep_1", Previous: 2, LastFinished: 2, InFlight: 3, InFlightEvent: eventID(3)},
				{Endpoint: "ep_2", Previous: 1, LastFinished: 1, InFlight: 2, InFlightEvent: eventID(2)},
			},
		}, h.state())
		h.env.CancelWorkflow()
	}, 2*time.Second)

	err := h.run(workflows.SequencerInput{State: &behind, IdleTimeout: time.Minute})

	require.True(t, temporal.IsCanceledError(err), "%v", err)
	require.Equal(t, []contract.Handoff{
		{EventID: eventID(2), Release: contract.Release{Sequence: 2, Lanes: []contract.LaneRelease{{Endpoint: "ep_2", Previous: 1}}}},
		{EventID: eventID(3), Release: contract.Release{Sequence: 3, Lanes: []contract.LaneRelease{{Endpoint: "ep_1", Previous: 2}}}},
	}, got.Handoffs)
}

// TestSequencerResyncPastALaneTheLedgerDoesNotList: the ledger's cursor is
// past an event whose lane the sequencer has in flight, and its lanes do
// not list that one: the cursor alone says it finished. The lane goes on
// (the sequencer must not keep a lane in flight on an event it no longer
// holds).
func TestSequencerResyncPastALaneTheLedgerDoesNotList(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 2)
	h.stored(2, []string{"ep_1"}, "ep_1")
	h.pos["ep_1"] = &lanePos{} // the ledger has no position for it
	behind := contract.SequencerState{Next: 1, Frontier: 2,
		Lanes: []contract.LaneState{{Endpoint: "ep_1", InFlight: 1, InFlightEvent: eventID(1)}}}
	h.resync(time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{State: &behind, IdleTimeout: time.Minute}))

	require.Equal(t, []int64{2}, h.released("ep_1"))
}

func converterFor() converter.DataConverter { return converter.GetDefaultDataConverter() }

// TestSequencerLaneBehindADeadLetterLoadsFromTheLedger: ep_1's lane waits
// on a dead letter at 1 while ep_2 delivers 1 to 100. ep_1's lane keeps
// only contract.MaxQueuedPerLane of the events behind it; once the dead
// letter is skipped it reads the rest from the ledger as it goes, and
// releases every one in order, each naming the right previous sequence.
// A Terminate in the middle (a fresh run, loading the ledger) changes
// nothing of that.
func TestSequencerLaneBehindADeadLetterLoadsFromTheLedger(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = 100 * time.Millisecond
	h.deadLetter(1, "ep_1", 10*time.Minute)
	for seq := int64(1); seq <= 100; seq++ {
		h.arrive(time.Duration(seq)*time.Second, seq, "ep_1", "ep_2")
	}
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, seqs(1, 100), h.released("ep_2"), "the dead letter holds ep_1's lane only")
		st := h.state()
		require.Len(t, st.Lanes, 2)
		require.Len(t, st.Lanes[0].Queued, contract.MaxQueuedPerLane, "ep_1 keeps its next events only")
		require.True(t, st.Lanes[0].Partial)
		require.Empty(t, st.Lanes[1].Queued)
	}, 5*time.Minute)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, seqs(1, 100), h.released("ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Skipped: []int64{1}}, h.carriedBy(2, "ep_1"))
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_1", Previous: 99}, h.carriedBy(100, "ep_1"))
	require.GreaterOrEqual(t, h.laneLoads, 2, "the rest came from the ledger")
}

// TestSequencerFreshRunReleasesAHealthyLaneBehindALongBacklog: a healthy
// lane must go on behind a long backlog at any volume. ep_e dead-lettered
// 1; ep_a has delivered 2 to 20,001 (events ep_e does not take), all of
// them past the cursor, which the dead letter holds at 1. The sequencer is
// terminated; the fresh run's load is bounded by the lanes, and ep_a's next
// arrival is released in its answer.
func TestSequencerFreshRunReleasesAHealthyLaneBehindALongBacklog(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.stored(1, []string{"ep_a", "ep_e"}, "ep_e")
	for seq := int64(2); seq <= 20001; seq++ {
		h.stored(seq, []string{"ep_a"})
	}
	h.laneAt("ep_a", 20001, 20001)
	h.deadLetter(1, "ep_e", 0)
	h.arrive(0, 20002, "ep_a")

	h.env.RegisterDelayedCallback(func() {
		st := h.state()
		require.EqualValues(t, 20003, st.Frontier)
		require.Equal(t, []contract.LaneState{
			{Endpoint: "ep_a", Previous: 20002, LastFinished: 20002},
			{Endpoint: "ep_e", InFlight: 1, InFlightEvent: eventID(1)},
		}, st.Lanes)
		h.env.CancelWorkflow()
	}, time.Minute)
	err := h.run(workflows.SequencerInput{IdleTimeout: time.Hour})

	require.True(t, temporal.IsCanceledError(err), "%v", err)
	require.Equal(t, lanes("ep_a")[0].Endpoint, h.answer(20002).Released[0].Endpoint, "released in the answer to its arrival")
	require.Equal(t, contract.LaneRelease{Endpoint: "ep_a", Previous: 20001}, h.answer(20002).Released[0])
	require.Equal(t, []int64{1}, h.released("ep_e"), "the dead letter's lane is released again, to wait on it")
}

// TestSequencerLaneThatFallsBehindItsArrivalsCatchesUp: arrivals come far
// faster than the lane delivers, so its queue fills and the rest wait in
// the ledger; the lane reads them from there as it goes, in order, without
// a resync, through continue-as-new.
func TestSequencerLaneThatFallsBehindItsArrivalsCatchesUp(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = time.Second
	for seq := int64(1); seq <= 200; seq++ {
		h.arrive(time.Duration(seq)*10*time.Millisecond, seq, "ep_1")
	}
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, seqs(1, 200), h.released("ep_1"))
	}, 10*time.Minute)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, seqs(1, 200), h.released("ep_1"))
	require.GreaterOrEqual(t, h.laneLoads, 5)
	require.Equal(t, 1, h.loads, "no resync")
}
