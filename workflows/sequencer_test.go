package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/workflows"
)

// seqHarness runs one SequencerWorkflow run. It plays every event workflow
// of the correlation: a release signal to an event is answered, doneDelay
// later, by that event's done signal. It records the releases in order and
// flags any release made while another is still in flight.
type seqHarness struct {
	t         *testing.T
	env       *testsuite.TestWorkflowEnvironment
	doneDelay time.Duration

	mu          sync.Mutex
	releases    []activities.Arrival
	carried     map[int64][]int64 // Release.Skipped of each release
	skips       map[int64]bool    // events that finish as skipped
	outstanding *activities.Arrival
	violations  []string
	cursorCalls []string
	// onRelease, when set, runs on the mock's goroutine while the release
	// signal is in flight.
	onRelease func(activities.Arrival)
	// beforeDone, when set, runs on the main loop before each done signal.
	beforeDone func()
	// cursorSkipped is the skipped tail LoadCursor reports.
	cursorSkipped []int64
	// cursorErr, when set, answers each LoadCursor call; nil: it succeeds.
	cursorErr func(now time.Time) error
	start     time.Time

	// finishByUpdate reports finished events by the finished update, as the
	// fast path does, instead of the done signal.
	finishByUpdate bool
	// answers are the announcements' answers, in the order they came.
	answers []activities.Announcement
	// received holds the arrivals the run was handed (set by recordSignals).
	received *signalLog
}

func newSeqHarness(t *testing.T, cursor int64) *seqHarness {
	t.Helper()
	h := &seqHarness{t: t, env: newEnv(t), doneDelay: 2 * time.Second, carried: map[int64][]int64{}, skips: map[int64]bool{}}
	h.start = h.env.Now()
	h.env.OnActivity(act.LoadCursor, mock.Anything, mock.Anything).Return(func(_ context.Context, c string) (activities.Cursor, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cursorCalls = append(h.cursorCalls, c)
		if h.cursorErr != nil {
			if err := h.cursorErr(h.env.Now()); err != nil {
				return activities.Cursor{}, err
			}
		}
		return activities.Cursor{Next: cursor, Skipped: h.cursorSkipped}, nil
	}).Maybe()
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalRelease, mock.Anything).Return(
		func(_, workflowID, _, _ string, arg any) error {
			r, ok := arg.(workflows.Release)
			if !ok {
				h.flag(fmt.Sprintf("release signal carries %T", arg))
				return nil
			}
			h.release(activities.Arrival{Sequence: r.Sequence, EventID: workflowID}, r.Skipped)
			return nil
		}).Maybe()
	return h
}

// release records a release, by signal or in an update's answer, and plays
// the event: done doneDelay later.
func (h *seqHarness) release(rel activities.Arrival, skipped []int64) {
	h.mu.Lock()
	if h.outstanding != nil {
		h.violations = append(h.violations, fmt.Sprintf("released %d while %d was in flight", rel.Sequence, h.outstanding.Sequence))
	}
	h.outstanding = &rel
	h.releases = append(h.releases, rel)
	h.carried[rel.Sequence] = skipped
	hook := h.onRelease
	h.mu.Unlock()
	if hook != nil {
		hook(rel)
	}
	h.env.RegisterDelayedCallback(func() { h.done(rel) }, h.doneDelay)
}

func (h *seqHarness) flag(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, v)
}

// done sends the event's done signal, as its workflow would: delivered,
// or skipped when the test marked the sequence so.
func (h *seqHarness) done(e activities.Arrival) {
	h.mu.Lock()
	if h.outstanding != nil && *h.outstanding == e {
		h.outstanding = nil
	}
	skipped := h.skips[e.Sequence]
	h.mu.Unlock()
	if h.beforeDone != nil {
		h.beforeDone()
	}
	done := workflows.Done{Sequence: e.Sequence, EventID: e.EventID, Skipped: skipped}
	if !h.finishByUpdate {
		h.env.SignalWorkflow(workflows.SignalDone, done)
		return
	}
	// As the fast path's Finish does: the update's answer names the event
	// released next, which the finished event then signals.
	h.env.UpdateWorkflow(workflows.UpdateFinished, "finish/"+e.EventID, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { h.flag(fmt.Sprintf("finish of %d rejected: %v", e.Sequence, err)) },
		OnComplete: func(v any, err error) {
			next, ok := v.(activities.Handoff)
			switch {
			case err != nil:
				h.flag(fmt.Sprintf("finish of %d failed: %v", e.Sequence, err))
			case !ok:
				h.flag(fmt.Sprintf("finish answered %T", v))
			case next.EventID != "":
				h.release(activities.Arrival{Sequence: next.Release.Sequence, EventID: next.EventID}, next.Release.Skipped)
			}
		},
	}, done)
}

// skip makes the given events finish as skipped.
func (h *seqHarness) skip(seqs ...int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range seqs {
		h.skips[s] = true
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

// arrive announces an event d after start.
func (h *seqHarness) arrive(d time.Duration, seq int64, id string) {
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(workflows.SignalArrived, activities.Arrival{Sequence: seq, EventID: id})
	}, d)
}

func (h *seqHarness) state() workflows.SequencerState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryState)
	require.NoError(h.t, err)
	var s workflows.SequencerState
	require.NoError(h.t, v.Get(&s))
	return s
}

func (h *seqHarness) run(in workflows.SequencerInput) error {
	h.t.Helper()
	h.env.ExecuteWorkflow(workflows.SequencerWorkflowName, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(h.t, h.violations)
	return h.env.GetWorkflowError()
}

func (h *seqHarness) released() []activities.Arrival {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]activities.Arrival(nil), h.releases...)
}

func arrivals(seqs ...int64) []activities.Arrival {
	out := make([]activities.Arrival, len(seqs))
	for i, s := range seqs {
		out[i] = activities.Arrival{Sequence: s, EventID: eventID(s)}
	}
	return out
}

func TestSequencerReleasesStrictlyInOrder(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	for i, seq := range []int64{3, 1, 5, 2, 2, 4} {
		h.arrive(sec(float64(i+1)), seq, eventID(seq))
	}
	h.arrive(sec(7), 4, "evt_impostor") // a second event claiming 4: the first keeps it
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, workflows.SequencerState{
			Next: 3, Released: &activities.Arrival{Sequence: 3, EventID: eventID(3)}, Parked: arrivals(4, 5),
		}, h.state())
		// A repeated done of a finished event and a done of an event not
		// released yet must both leave the sequencer where it is.
		h.env.SignalWorkflow(workflows.SignalDone, workflows.Done{Sequence: 1, EventID: eventID(1)})
		h.env.SignalWorkflow(workflows.SignalDone, workflows.Done{Sequence: 5, EventID: eventID(5)})
	}, sec(7.5))
	h.arrive(sec(20), 1, eventID(1)) // re-announcements of finished events
	h.arrive(sec(25), 2, eventID(2))

	err := h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute})

	require.NoError(t, err)
	require.Equal(t, arrivals(1, 2, 3, 4, 5), h.released(), "each event released once, in sequence")
	require.Equal(t, []string{correlation}, h.cursorCalls, "a fresh sequencer loads its cursor once")
	requireAbout(t, 85*time.Second, h.env.Now().Sub(h.start), "ends a minute after the last signal")
}

func TestSequencerStartsFromLedgerCursor(t *testing.T) {
	t.Parallel()
	// Events 1 and 2 are already delivered per the ledger.
	h := newSeqHarness(t, 3)
	h.arrive(1*time.Second, 2, eventID(2))
	h.arrive(2*time.Second, 4, eventID(4))
	h.arrive(3*time.Second, 3, eventID(3))

	require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(3, 4), h.released())
}

func TestSequencerSurvivesABriefLedgerOutageAtStart(t *testing.T) {
	t.Parallel()
	// The arrival that starts the sequencer is in its first signal; if the
	// run failed because Postgres was down for 30 s, that event (and every
	// successor) would wait for a release forever.
	h := newSeqHarness(t, 1)
	outageEnd := h.start.Add(30 * time.Second)
	h.cursorErr = func(now time.Time) error {
		if now.Before(outageEnd) {
			return errors.New("correlation next: dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	}
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(workflows.SignalArrived, activities.Arrival{Sequence: 1, EventID: eventID(1)})
	}, 0)

	require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(1), h.released())
	require.Greater(t, len(h.cursorCalls), 1)
}

func TestSequencerEndsWhenIdle(t *testing.T) {
	t.Parallel()
	t.Run("nothing arrives", func(t *testing.T) {
		t.Parallel()
		h := newSeqHarness(t, 1)
		require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
		require.Empty(t, h.released())
		requireAbout(t, time.Minute, h.env.Now().Sub(h.start))
	})
	t.Run("the idle time counts from the last signal", func(t *testing.T) {
		t.Parallel()
		h := newSeqHarness(t, 1)
		h.doneDelay = 10 * time.Second
		h.arrive(30*time.Second, 1, eventID(1))
		require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
		require.Equal(t, arrivals(1), h.released())
		requireAbout(t, 100*time.Second, h.env.Now().Sub(h.start), "done at 40 s, idle for a minute")
	})
	t.Run("a parked event keeps it open", func(t *testing.T) {
		t.Parallel()
		h := newSeqHarness(t, 1)
		h.arrive(10*time.Second, 2, eventID(2))
		h.env.RegisterDelayedCallback(func() {
			require.False(t, h.env.IsWorkflowCompleted())
			require.Equal(t, workflows.SequencerState{Next: 1, Parked: arrivals(2)}, h.state())
			h.env.SignalWorkflow(workflows.SignalArrived, activities.Arrival{Sequence: 1, EventID: eventID(1)})
		}, time.Hour)
		require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
		require.Equal(t, arrivals(1, 2), h.released())
		requireAbout(t, time.Hour+4*time.Second+time.Minute, h.env.Now().Sub(h.start))
	})
}

func TestSequencerCarriesSkippedSequencesToTheNextRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		skips []int64
		want  map[int64][]int64 // Release.Skipped by released sequence
	}{
		{"no skip", nil, map[int64][]int64{1: nil, 2: nil, 3: nil, 4: nil}},
		{"the first skipped", []int64{1}, map[int64][]int64{1: nil, 2: {1}, 3: nil, 4: nil}},
		{"one skipped", []int64{2}, map[int64][]int64{1: nil, 2: nil, 3: {2}, 4: nil}},
		// Nothing was delivered after 1, so the receiver's cursor is still
		// at 1 when 4 arrives: 4 must say that 2 and 3 will never come.
		{"consecutive skips", []int64{2, 3}, map[int64][]int64{1: nil, 2: nil, 3: {2}, 4: {2, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newSeqHarness(t, 1)
			h.skip(tc.skips...)
			for seq := int64(1); seq <= 4; seq++ {
				h.arrive(time.Duration(seq)*time.Second, seq, eventID(seq))
			}
			require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
			require.Equal(t, arrivals(1, 2, 3, 4), h.released())
			require.Equal(t, tc.want, h.carriedSkips())
		})
	}
}

// A sequencer whose last event was skipped may end when idle: the ledger
// keeps the skip, and a fresh run loads it and hands it to the next release.
func TestSequencerEndsIdleAfterASkipAndReloadsIt(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.skip(1)
	h.arrive(time.Second, 1, eventID(1))
	require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(1), h.released())

	h2 := newSeqHarness(t, 2)
	h2.cursorSkipped = []int64{1}
	h2.arrive(time.Second, 2, eventID(2))
	require.NoError(t, h2.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(2), h2.released())
	require.Equal(t, map[int64][]int64{2: {1}}, h2.carriedSkips())
}

// signalLog records the arrivals a workflow run was handed, whether or not
// the workflow code read them from their channel.
type signalLog struct {
	mu       sync.Mutex
	arrivals []activities.Arrival
}

type signalRecorder struct {
	interceptor.WorkerInterceptorBase
	log *signalLog
}

func (r *signalRecorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &signalRecorderInbound{log: r.log}
	i.Next = next
	return i
}

type signalRecorderInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	log *signalLog
}

func (i *signalRecorderInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	var a activities.Arrival
	if in.SignalName == workflows.SignalArrived && converter.GetDefaultDataConverter().FromPayloads(in.Arg, &a) == nil {
		i.log.mu.Lock()
		i.log.arrivals = append(i.log.arrivals, a)
		i.log.mu.Unlock()
	}
	return i.Next.HandleSignal(ctx, in)
}

// recordSignals makes the harness log every arrival its run is handed.
func (h *seqHarness) recordSignals() {
	h.received = &signalLog{}
	h.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&signalRecorder{log: h.received}}})
}

func TestSequencerContinuesAsNewWithoutLosingArrivals(t *testing.T) {
	t.Parallel()
	// Each limit puts the boundary at another signal: an arrival, or a done
	// whose successor's release is still pending when the run decides to
	// continue as new.
	for maxHistory := 20; maxHistory <= 36; maxHistory++ {
		t.Run(fmt.Sprintf("max history %d", maxHistory), func(t *testing.T) {
			t.Parallel()
			testContinueAsNew(t, maxHistory)
		})
	}
}

func TestSequencerContinuesAsNewWithAPendingSkip(t *testing.T) {
	t.Parallel()
	in := workflows.SequencerInput{CorrelationID: correlation, MaxHistory: 30, IdleTimeout: time.Minute}
	h1 := newSeqHarness(t, 1)
	h1.skip(1)
	h1.arrive(time.Second, 1, eventID(1))
	// The history crosses the limit with the skip's done: nothing is parked
	// to carry the skip yet, so the state must.
	h1.beforeDone = func() { h1.env.SetCurrentHistoryLength(31) }

	err := h1.run(in)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var next workflows.SequencerInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.State)
	require.Equal(t, workflows.SequencerState{Next: 2, Skipped: []int64{1}}, *next.State)

	h2 := newSeqHarness(t, 1)
	h2.arrive(time.Second, 2, eventID(2))
	require.NoError(t, h2.run(next))
	require.Equal(t, arrivals(2), h2.released())
	require.Equal(t, map[int64][]int64{2: {1}}, h2.carriedSkips())
}

// testContinueAsNew drives 40 events through a sequencer whose history
// limit is maxHistory: the first run must continue as new carrying every
// arrival it was handed, and the second run must finish the job from the
// carried state alone.
func testContinueAsNew(t *testing.T, maxHistory int) {
	const total = 40
	in := workflows.SequencerInput{CorrelationID: correlation, MaxHistory: maxHistory, IdleTimeout: time.Minute}

	// Events arrive five at a time in reverse (5,4,3,2,1,10,9,…), one a
	// second; the history grows by one event per signal the test sends, so
	// the run crosses MaxHistory with arrivals parked and a release in
	// flight.
	var plan []int64
	for c := int64(0); c < total/5; c++ {
		for s := int64(5); s >= 1; s-- {
			plan = append(plan, c*5+s)
		}
	}
	// Every seventh event is skipped by an operator: its successor's release
	// must carry the skip, across the boundary too.
	skips := []int64{7, 14, 21, 28, 35}
	h1 := newSeqHarness(t, 1)
	h1.skip(skips...)
	h1.doneDelay = 1500 * time.Millisecond
	h1.recordSignals()
	history := 0
	grow := func() {
		history++
		h1.env.SetCurrentHistoryLength(history)
	}
	for i, seq := range plan {
		h1.env.RegisterDelayedCallback(func() {
			grow()
			h1.env.SignalWorkflow(workflows.SignalArrived, activities.Arrival{Sequence: seq, EventID: eventID(seq)})
		}, time.Duration(i+1)*time.Second)
	}
	// Every release also brings the announcement of the event fifteen ahead,
	// handed to the workflow while its release signal is still pending —
	// which is what a sequencer draining before continue-as-new waits on.
	h1.onRelease = func(r activities.Arrival) {
		if ahead := r.Sequence + 15; ahead <= total {
			h1.env.SignalWorkflow(workflows.SignalArrived, activities.Arrival{Sequence: ahead, EventID: eventID(ahead)})
		}
	}
	h1.beforeDone = grow

	err := h1.run(in)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	require.Equal(t, workflows.SequencerWorkflowName, can.WorkflowType.Name)
	var next workflows.SequencerInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, in.CorrelationID, next.CorrelationID)
	require.Equal(t, in.MaxHistory, next.MaxHistory)
	require.Equal(t, in.IdleTimeout, next.IdleTimeout)
	require.NotNil(t, next.State, "the state must travel, or the new run reloads a stale cursor")
	st := *next.State
	require.Greater(t, st.Next, int64(1))
	require.True(t, st.Released != nil || len(st.Parked) > 0, "the test must cross the boundary with work pending")
	require.True(t, sort.SliceIsSorted(st.Parked, func(i, j int) bool { return st.Parked[i].Sequence < st.Parked[j].Sequence }))
	if st.Released != nil {
		require.Equal(t, st.Next, st.Released.Sequence, "only the next sequence is ever in flight")
	}
	for _, sk := range st.Skipped {
		require.Equal(t, st.Next-1, sk, "only the skip just before the next release is pending: %+v", st)
	}
	parked := map[int64]string{}
	for _, p := range st.Parked {
		require.Greater(t, p.Sequence, st.Next-1, "sequence %d is finished yet still parked", p.Sequence)
		if st.Released != nil {
			require.NotEqual(t, st.Released.Sequence, p.Sequence)
		}
		_, dup := parked[p.Sequence]
		require.False(t, dup, "sequence %d parked twice", p.Sequence)
		parked[p.Sequence] = p.EventID
	}
	// Nothing handed to the first run is lost: each arrival is finished,
	// in flight, or parked under the same event ID.
	h1.received.mu.Lock()
	got := append([]activities.Arrival(nil), h1.received.arrivals...)
	h1.received.mu.Unlock()
	require.NotEmpty(t, got)
	seen := map[int64]bool{}
	for _, a := range got {
		seen[a.Sequence] = true
		switch {
		case a.Sequence < st.Next:
		case st.Released != nil && st.Released.Sequence == a.Sequence:
			require.Equal(t, a.EventID, st.Released.EventID)
		default:
			id, ok := parked[a.Sequence]
			require.True(t, ok, "arrival of %d was handed to the run but is neither finished, in flight nor parked: %+v", a.Sequence, st)
			require.Equal(t, a.EventID, id)
		}
	}
	for _, r := range h1.released() {
		require.True(t, r.Sequence < st.Next || (st.Released != nil && *st.Released == r),
			"release of %d is neither finished nor in flight in the carried state %+v", r.Sequence, st)
	}

	// The next run picks up the carried state: it must not reload the
	// cursor, must wait for the in-flight event's done, and must release
	// the parked events without their being announced again. Events the
	// first run never heard of announce themselves to the new run, as
	// signal-with-start would deliver them.
	h2 := newSeqHarness(t, 1)
	h2.skip(skips...)
	h2.doneDelay = time.Second
	h2.mu.Lock()
	h2.outstanding = st.Released
	h2.mu.Unlock()
	if st.Released != nil {
		r := *st.Released
		h2.env.RegisterDelayedCallback(func() { h2.done(r) }, 500*time.Millisecond)
	}
	var late []int64
	for _, seq := range plan {
		if !seen[seq] {
			late = append(late, seq)
		}
	}
	for i, seq := range late {
		h2.arrive(time.Duration(i+1)*time.Second, seq, eventID(seq))
	}

	require.NoError(t, h2.run(next))
	require.Empty(t, h2.cursorCalls, "a continued sequencer keeps its cursor")

	all := append(h1.released(), h2.released()...)
	want := make([]int64, total)
	for i := range want {
		want[i] = int64(i + 1)
	}
	require.Equal(t, arrivals(want...), all, "across both runs every event is released once, in order")
	carried := h1.carriedSkips()
	for seq, sk := range h2.carriedSkips() {
		carried[seq] = sk
	}
	wantCarried := map[int64][]int64{}
	for _, seq := range want {
		wantCarried[seq] = nil
	}
	for _, sk := range skips {
		wantCarried[sk+1] = []int64{sk}
	}
	require.Equal(t, wantCarried, carried, "each skip reaches the receiver with the next release")
}

// announce announces an event d after start as the fast path does, by the
// arrive update; an answer of "released" counts as that event's release.
func (h *seqHarness) announce(d time.Duration, seq int64, id string) {
	h.env.RegisterDelayedCallback(func() {
		a := activities.Arrival{Sequence: seq, EventID: id}
		h.env.UpdateWorkflow(workflows.UpdateArrive, "arrive/"+id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { h.flag(fmt.Sprintf("announcement of %d rejected: %v", seq, err)) },
			OnComplete: func(v any, err error) {
				if err != nil {
					h.flag(fmt.Sprintf("announcement of %d failed: %v", seq, err))
					return
				}
				ann, ok := v.(activities.Announcement)
				if !ok {
					h.flag(fmt.Sprintf("announcement answered %T", v))
					return
				}
				h.mu.Lock()
				h.answers = append(h.answers, ann)
				if !ann.Released {
					h.mu.Unlock()
					return
				}
				if h.outstanding != nil && *h.outstanding == a {
					h.mu.Unlock()
					return // a repeated announcement of the event in flight
				}
				h.mu.Unlock()
				h.release(a, ann.Skipped)
			},
		}, a)
	}, d)
}

func TestSequencerReleasesAnnouncedEventsInTheAnswer(t *testing.T) {
	t.Parallel()
	h := newSeqHarness(t, 1)
	h.cursorSkipped = []int64{}
	// 1 is next: released in its answer. 3 comes early: parked, released
	// by signal after 2. 2 arrives while 1 is in flight: parked, released
	// by signal when 1 is done. A repeated announcement of 3 while it is in
	// flight gets "released" again, never a second release. An event of a
	// workflow started before the fast path (a signal) mixes in: 4.
	h.announce(0, 1, eventID(1))
	h.announce(500*time.Millisecond, 3, eventID(3))
	h.announce(time.Second, 2, eventID(2))
	h.arrive(1500*time.Millisecond, 4, eventID(4))
	var repeated activities.Announcement
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, workflows.SequencerState{
			Next: 3, Released: &activities.Arrival{Sequence: 3, EventID: eventID(3)}, Parked: arrivals(4),
		}, h.state())
		h.env.UpdateWorkflow(workflows.UpdateArrive, "arrive/again", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { h.flag(err.Error()) },
			OnComplete: func(v any, err error) { require.NoError(t, err); repeated = v.(activities.Announcement) },
		}, activities.Arrival{Sequence: 3, EventID: eventID(3)})
	}, 4500*time.Millisecond)
	// After 4 is done, 5 is next and idle: released in its answer.
	h.announce(20*time.Second, 5, eventID(5))

	require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(1, 2, 3, 4, 5), h.released(), "each event released once, in sequence")
	require.True(t, repeated.Released, "a repeated announcement of the event in flight is answered as the first was")
	answers := h.answerList()
	require.Len(t, answers, 4)
	require.Equal(t, []bool{true, false, false, true}, []bool{answers[0].Released, answers[1].Released, answers[2].Released, answers[3].Released})
}

func TestSequencerAnnouncementThatStartsItWaitsForTheCursor(t *testing.T) {
	t.Parallel()
	// Update-with-start hands the run its first announcement before the
	// cursor is loaded, and Postgres is down for 30 s: the announcement must
	// wait for the cursor, not be refused, then release the event.
	h := newSeqHarness(t, 4)
	h.cursorSkipped = []int64{3}
	outageEnd := h.start.Add(30 * time.Second)
	h.cursorErr = func(now time.Time) error {
		if now.Before(outageEnd) {
			return errors.New("correlation next: dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	}
	h.announce(0, 4, eventID(4))

	require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(4), h.released())
	require.Equal(t, []int64{3}, h.carriedSkips()[4], "the answer carries the skipped tail to the receiver")
}

func (h *seqHarness) answerList() []activities.Announcement {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]activities.Announcement(nil), h.answers...)
}

func TestSequencerFastPathFinishHandsOffTheNextEvent(t *testing.T) {
	t.Parallel()
	// Fast-path events report done by update; the answer names the parked
	// successor, which the finished event releases. Skips travel along.
	h := newSeqHarness(t, 1)
	h.finishByUpdate = true
	h.skip(2)
	for i, seq := range []int64{3, 2, 5, 1, 4} {
		h.announce(time.Duration(i)*100*time.Millisecond, seq, eventID(seq))
	}

	require.NoError(t, h.run(workflows.SequencerInput{CorrelationID: correlation, IdleTimeout: time.Minute}))
	require.Equal(t, arrivals(1, 2, 3, 4, 5), h.released(), "each event released once, in sequence")
	require.Equal(t, []int64{2}, h.carriedSkips()[3], "the hand-off carries the skip to the next event")
	require.Empty(t, h.carriedSkips()[4])
}

func TestSequencerContinuesAsNewOnUpdatesAlone(t *testing.T) {
	t.Parallel()
	// A correlation whose events all take the fast path talks to its
	// sequencer by updates only; the run must still see its history grow
	// and continue as new, carrying where it stands.
	h := newSeqHarness(t, 1)
	h.finishByUpdate = true
	h.doneDelay = 500 * time.Millisecond
	history := 0
	grow := func() {
		history += 5 // an update and its workflow task
		h.env.SetCurrentHistoryLength(history)
	}
	h.beforeDone = grow
	for seq := int64(1); seq <= 20; seq++ {
		at := time.Duration(seq) * time.Second
		h.env.RegisterDelayedCallback(grow, at-time.Millisecond)
		h.announce(at, seq, eventID(seq))
	}

	err := h.run(workflows.SequencerInput{CorrelationID: correlation, MaxHistory: 40, IdleTimeout: time.Minute})

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var next workflows.SequencerInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.State)
	released := h.released()
	require.Equal(t, arrivals(released[0].Sequence), released[:1])
	require.Less(t, len(released), 20, "the run continued as new before the last event")
	require.Equal(t, int64(len(released)), next.State.Next-1+map[bool]int64{true: 1, false: 0}[next.State.Released != nil],
		"the carried cursor is where the run stood: %+v after %d releases", next.State, len(released))
}
