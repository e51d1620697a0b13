package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// seqHarness runs one SequencerWorkflow run and plays everything around it
// as the real system does: the API's arrive updates, and every event
// workflow of the correlation, which, doneDelay after its release, sends
// the finished update and releases the event the answer names. It records
// the releases in order and flags a release made while another event is
// in flight.
type seqHarness struct {
	t         *testing.T
	env       *testsuite.TestWorkflowEnvironment
	doneDelay time.Duration

	mu          sync.Mutex
	releases    []contract.Arrival
	carried     map[int64][]int64 // Release.Skipped of each release
	skips       map[int64]bool    // events that finish as skipped
	outstanding *contract.Arrival
	violations  []string
	answers     map[string]contract.Announcement // arrive answers by event ID
	loads       int
	// ledger is what LoadSequencer answers; loadErr, when set, answers each
	// call first (nil: it succeeds).
	ledger  contract.SequencerLoad
	loadErr func(now time.Time) error
	start   time.Time
}

func newSeqHarness(t *testing.T, cursor int64) *seqHarness {
	t.Helper()
	h := &seqHarness{t: t, env: newEnv(t), doneDelay: 2 * time.Second, carried: map[int64][]int64{}, skips: map[int64]bool{},
		answers: map[string]contract.Announcement{}, ledger: contract.SequencerLoad{Next: cursor}}
	h.start = h.env.Now()
	h.env.OnActivity(act.LoadSequencer, mock.Anything, correlation).Return(func(context.Context, string) (contract.SequencerLoad, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.loads++
		if h.loadErr != nil {
			if err := h.loadErr(h.env.Now()); err != nil {
				return contract.SequencerLoad{}, err
			}
		}
		return h.ledger, nil
	}).Maybe()
	return h
}

// release records a release the sequencer answered, and plays the event:
// finished doneDelay later. A release of the event already in flight (a
// resync names it again) is not a new one.
func (h *seqHarness) release(rel contract.Arrival, skipped []int64) {
	h.mu.Lock()
	if h.outstanding != nil && *h.outstanding == rel {
		h.mu.Unlock()
		return
	}
	if h.outstanding != nil {
		h.violations = append(h.violations, fmt.Sprintf("released %d while %d was in flight", rel.Sequence, h.outstanding.Sequence))
	}
	h.outstanding = &rel
	h.releases = append(h.releases, rel)
	h.carried[rel.Sequence] = skipped
	h.mu.Unlock()
	h.env.RegisterDelayedCallback(func() { h.finish(rel) }, h.doneDelay)
}

func (h *seqHarness) flag(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, v)
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

// handoff releases the event a Handoff names.
func (h *seqHarness) handoff(next contract.Handoff) {
	if next.EventID != "" {
		h.release(contract.Arrival{Sequence: next.Release.Sequence, EventID: next.EventID}, next.Release.Skipped)
	}
}

// finish sends the event's finished update, as its delivering attempt (or
// skip) does, and releases the event the answer names.
func (h *seqHarness) finish(e contract.Arrival) {
	h.mu.Lock()
	if h.outstanding != nil && *h.outstanding == e {
		h.outstanding = nil
	}
	skipped := h.skips[e.Sequence]
	h.mu.Unlock()
	update(h, contract.UpdateFinished, h.handoff, contract.Done{Sequence: e.Sequence, EventID: e.EventID, Skipped: skipped})
}

// arrive sends the arrive update of an event d after start, as the API
// does, and releases it when the answer says so.
func (h *seqHarness) arrive(d time.Duration, seq int64, id string) {
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateArrive, func(ann contract.Announcement) {
			h.mu.Lock()
			h.answers[id] = ann
			h.mu.Unlock()
			if ann.Released {
				h.release(contract.Arrival{Sequence: seq, EventID: id}, ann.Skipped)
			}
		}, contract.Arrival{Sequence: seq, EventID: id})
	}, d)
}

// resync sends the resync update d after start, as the sweep does.
func (h *seqHarness) resync(d time.Duration) {
	h.env.RegisterDelayedCallback(func() { update(h, contract.UpdateResync, h.handoff) }, d)
}

// skip makes the given events finish as skipped.
func (h *seqHarness) skip(seqs ...int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range seqs {
		h.skips[s] = true
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
		in.CorrelationID = correlation
	}
	h.env.ExecuteWorkflow(contract.SequencerWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(h.t, h.violations)
	return h.env.GetWorkflowError()
}

func (h *seqHarness) released() []contract.Arrival {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]contract.Arrival(nil), h.releases...)
}

func arrivals(seqs ...int64) []contract.Arrival {
	out := make([]contract.Arrival, len(seqs))
	for i, s := range seqs {
		out[i] = contract.Arrival{Sequence: s, EventID: eventID(s)}
	}
	return out
}

func TestSequencerReleasesStrictlyInOrder(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	// Arrivals out of order, some while others are in flight.
	for i, seq := range []int64{3, 5, 1, 4, 2} {
		h.arrive(time.Duration(i)*500*time.Millisecond, seq, eventID(seq))
	}
	h.env.RegisterDelayedCallback(func() {
		st := h.state()
		require.EqualValues(t, 2, st.Next, "1 is done, 2 is released")
		require.Equal(t, &contract.Arrival{Sequence: 2, EventID: eventID(2)}, st.Released)
		require.Equal(t, arrivals(3, 4, 5), st.Parked)
	}, 4*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(1, 2, 3, 4, 5), h.released())
	require.True(t, h.answers[eventID(1)].Released, "1 arrived next in line: released in the answer")
	for _, seq := range []int64{3, 5, 4, 2} {
		require.False(t, h.answers[eventID(seq)].Released, "%d arrived early: held, released by its predecessor's hand-off", seq)
	}
}

func TestSequencerAnswersARepeatedArrivalAsTheFirst(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = time.Minute
	h.arrive(0, 1, eventID(1))
	h.arrive(time.Second, 2, eventID(2))
	var again, againHeld contract.Announcement
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateArrive, func(a contract.Announcement) { again = a }, contract.Arrival{Sequence: 1, EventID: eventID(1)})
		update(h, contract.UpdateArrive, func(a contract.Announcement) { againHeld = a }, contract.Arrival{Sequence: 2, EventID: eventID(2)})
	}, 2*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.True(t, again.Released, "the released event asking again is told it is released")
	require.False(t, againHeld.Released)
	require.Equal(t, arrivals(1, 2), h.released(), "and nothing is released twice")
}

func TestSequencerStartsFromTheLedger(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 7)
	h.ledger.Skipped = []int64{6}
	h.arrive(0, 8, eventID(8))
	h.arrive(time.Second, 7, eventID(7))
	var late contract.Announcement
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateArrive, func(a contract.Announcement) { late = a }, contract.Arrival{Sequence: 5, EventID: eventID(5)})
	}, 2*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(7, 8), h.released())
	require.Equal(t, []int64{6}, h.carriedSkips()[7], "a skip recorded before this run reaches the next release")
	require.True(t, late.Finished, "a sequence before the cursor is finished")
	require.Equal(t, 1, h.loads)
}

// TestSequencerFreshRunLoadsStoredEvents: a run started after an operator
// terminated the last one knows the stored, unfinished events from the
// ledger. The finished event's hand-over starts it and is answered with the
// next, already stored event; the rest follow.
func TestSequencerFreshRunLoadsStoredEvents(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 3)
	h.ledger.Pending = arrivals(3, 4, 5)
	h.env.RegisterDelayedCallback(func() {
		// Event 2's hand-over, its finish already in the ledger (cursor 3).
		update(h, contract.UpdateFinished, h.handoff, contract.Done{Sequence: 2, EventID: eventID(2)})
	}, 0)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(3, 4, 5), h.released())
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
	h.arrive(0, 1, eventID(1))
	h.arrive(time.Second, 2, eventID(2))

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	rel := h.released()
	require.Equal(t, arrivals(1, 2), rel)
	require.True(t, h.answers[eventID(1)].Released, "the arrival that started the run waits for the load, then is answered")
}

func TestSequencerEndsWhenIdleAndNotBefore(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = 30 * time.Second
	h.arrive(0, 1, eventID(1))
	h.arrive(time.Second, 3, eventID(3)) // parked: 2 never comes for a while
	h.env.RegisterDelayedCallback(func() {
		require.False(t, h.env.IsWorkflowCompleted(), "a sequencer with a parked event does not end")
	}, 10*time.Minute)
	h.arrive(20*time.Minute, 2, eventID(2))

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: 5 * time.Minute}))

	require.Equal(t, arrivals(1, 2, 3), h.released())
	ended := h.env.Now().Sub(h.start)
	// 3 finishes 20 min + 2 × 30 s after start; then 5 min idle.
	requireAbout(t, 26*time.Minute, ended, "ended %s after start", ended)
}

func TestSequencerCarriesSkippedSequencesToTheNextRelease(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.skip(2, 3)
	for seq := int64(1); seq <= 5; seq++ {
		h.arrive(time.Duration(seq)*100*time.Millisecond, seq, eventID(seq))
	}

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(1, 2, 3, 4, 5), h.released())
	skips := h.carriedSkips()
	require.Empty(t, skips[2])
	require.Equal(t, []int64{2}, skips[3])
	require.Equal(t, []int64{2, 3}, skips[4], "the release after skips names them all")
	require.Empty(t, skips[5], "a delivered event clears the list")
}

// TestSequencerResyncRepairsAResetState: an operator reset the sequencer to
// an earlier point; it believes 2 is in flight while the ledger has the
// correlation at 5 (2, 3 and 4 finished). The finished update of 4 makes it
// resync, and 5 and 6 go on in order.
func TestSequencerResyncRepairsAResetState(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 5)
	h.ledger.Pending = arrivals(5, 6)
	h.env.RegisterDelayedCallback(func() {
		update(h, contract.UpdateFinished, h.handoff, contract.Done{Sequence: 4, EventID: eventID(4)})
	}, time.Second)
	stale := contract.SequencerState{Next: 2, Released: &contract.Arrival{Sequence: 2, EventID: eventID(2)}, Parked: arrivals(3)}

	require.NoError(t, h.run(workflows.SequencerInput{State: &stale, IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(5, 6), h.released())
}

// TestSequencerResyncReleasesAHeadNobodyWasTold: the sweep's resync names
// the event at the cursor that waits with nothing in flight.
func TestSequencerResyncReleasesAHeadNobodyWasTold(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 4)
	h.ledger.Pending = arrivals(4)
	// A run whose state misses 4 (it was stored while Temporal was down and
	// its arrival never came).
	st := contract.SequencerState{Next: 4}
	h.resync(time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{State: &st, IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(4), h.released())
}

func TestSequencerIgnoresARepeatedFinish(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = 5 * time.Second
	h.arrive(0, 1, eventID(1))
	h.arrive(time.Second, 2, eventID(2))
	h.arrive(time.Second, 3, eventID(3))
	var repeat contract.Handoff
	h.env.RegisterDelayedCallback(func() {
		// 1's hand-over again (its activity retried): 2 is named again, not
		// 3 released while 2 is in flight.
		update(h, contract.UpdateFinished, func(v contract.Handoff) { repeat = v }, contract.Done{Sequence: 1, EventID: eventID(1)})
	}, 7*time.Second)

	require.NoError(t, h.run(workflows.SequencerInput{IdleTimeout: time.Minute}))

	require.Equal(t, arrivals(1, 2, 3), h.released())
	require.Equal(t, eventID(2), repeat.EventID)
}

// TestSequencerContinuesAsNewWithItsState: past MaxHistory it continues as
// new, carrying next, the released event, the parked arrivals and the
// skipped tail.
func TestSequencerContinuesAsNewWithItsState(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.doneDelay = time.Hour
	h.skip(1)
	h.arrive(0, 1, eventID(1))
	for seq := int64(3); seq <= 40; seq++ {
		h.arrive(time.Duration(seq)*time.Second, seq, eventID(seq))
	}
	// The test environment does not count history; say it grew.
	h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistoryLength(61) }, 45*time.Second)
	h.arrive(46*time.Second, 41, eventID(41))

	err := h.run(workflows.SequencerInput{MaxHistory: 60, IdleTimeout: time.Minute})

	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	var next workflows.SequencerInput
	require.NoError(t, converterFor().FromPayloads(can.Input, &next))
	require.Equal(t, correlation, next.CorrelationID)
	require.Equal(t, 60, next.MaxHistory)
	require.NotNil(t, next.State)
	require.EqualValues(t, 1, next.State.Next)
	require.Equal(t, &contract.Arrival{Sequence: 1, EventID: eventID(1)}, next.State.Released)
	require.Len(t, next.State.Parked, 39)
	for i, p := range next.State.Parked {
		require.Equal(t, contract.Arrival{Sequence: int64(i + 3), EventID: eventID(int64(i + 3))}, p, "every arrival so far, in order")
	}
}

// carriedSkips returns the Skipped list each release carried.
func (h *seqHarness) carriedSkips() map[int64][]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int64][]int64, len(h.carried))
	for k, v := range h.carried {
		out[k] = v
	}
	return out
}

func converterFor() converter.DataConverter { return converter.GetDefaultDataConverter() }
