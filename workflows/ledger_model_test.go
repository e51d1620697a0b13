package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/hookflow/hookflow/internal/contract"
)

// fakeLedger is the ledger as a sequencer's loads read it, with the rules
// of store.SequencerLoadOf and store.LanesLoad (only lanes with open
// deliveries, each within its byte budget, skipped lists cut, the voided
// sequences after a lane's previous one), and a receiver per lane that
// applies an envelope as kit/receiver does: when its cursor stands at the
// envelope's previous_sequence, or past it at one of its
// skipped_sequences. It lets the size tests run real sequencer state
// through a Terminate, a fresh load and a drain, and check the order each
// lane applies.
type fakeLedger struct {
	stored map[int64]bool
	open   map[string][]contract.QueuedEvent
	pos    map[string]*contract.LaneState
	voided []int64
	// cursor is each lane's receiver cursor, applied its sequences in
	// order.
	cursor  map[string]int64
	applied map[string][]int64
}

func newFakeLedger() *fakeLedger {
	return &fakeLedger{stored: map[int64]bool{}, open: map[string][]contract.QueuedEvent{}, pos: map[string]*contract.LaneState{},
		cursor: map[string]int64{}, applied: map[string][]int64{}}
}

// store accepts event seq, routed to eps.
func (f *fakeLedger) store(seq int64, id string, eps []string) {
	f.stored[seq] = true
	for _, ep := range eps {
		f.open[ep] = append(f.open[ep], contract.QueuedEvent{Sequence: seq, EventID: id, State: contract.StateWaiting})
		slices.SortFunc(f.open[ep], func(a, b contract.QueuedEvent) int { return cmp.Compare(a.Sequence, b.Sequence) })
	}
}

func (f *fakeLedger) void(seq int64) {
	f.stored[seq] = true
	f.voided = append(f.voided, seq)
	slices.Sort(f.voided)
}

func (f *fakeLedger) lane(ep string) *contract.LaneState {
	if f.pos[ep] == nil {
		f.pos[ep] = &contract.LaneState{Endpoint: ep}
	}
	return f.pos[ep]
}

// finish records the delivery (seq, ep) delivered or skipped, as LaneAdvance
// does: the ledger keeps every skip since the last delivery.
func (f *fakeLedger) finish(ep string, seq int64, skipped bool) {
	f.open[ep] = slices.DeleteFunc(f.open[ep], func(q contract.QueuedEvent) bool { return q.Sequence == seq })
	l := f.lane(ep)
	l.LastFinished = seq
	if skipped {
		l.Skipped = append(l.Skipped, seq)
	} else {
		l.Previous, l.Skipped = seq, nil
	}
}

// laneLoad is LanesLoad's answer for one lane after a sequence, as
// activities.laneState makes it.
func (f *fakeLedger) laneLoad(ep string, after int64, total *int) contract.LaneState {
	p := f.lane(ep)
	var open []contract.QueuedEvent
	for _, q := range f.open[ep] {
		if q.Sequence > after {
			open = append(open, q)
		}
	}
	more := len(open) > contract.MaxQueuedPerLane
	if more {
		open = open[:contract.MaxQueuedPerLane]
	}
	open, cut := contract.BoundQueued(open, total)
	st := contract.LaneState{Endpoint: ep, Previous: p.Previous, Skipped: contract.CapSkipped(slices.Clone(p.Skipped)), LastFinished: p.LastFinished, Queued: open}
	var voided []int64
	for _, v := range f.voided {
		if v > p.Previous {
			voided = append(voided, v)
		}
	}
	if len(voided) > contract.MaxSkippedListed {
		voided = voided[len(voided)-contract.MaxSkippedListed:]
	}
	st.Voided = voided
	if more || cut {
		st.Partial, st.KnownThrough = true, p.LastFinished
		if len(open) > 0 {
			st.KnownThrough = open[len(open)-1].Sequence
		}
	}
	return st
}

// load is LoadSequencer's answer: the lanes with open deliveries only.
func (f *fakeLedger) load() contract.SequencerLoad {
	l := contract.SequencerLoad{Next: 1, Voided: contract.CapVoided(slices.Clone(f.voided))}
	seqs := slices.Sorted(func(yield func(int64) bool) {
		for s := range f.stored {
			if !yield(s) {
				return
			}
		}
	})
	l.Frontier = 1
	for _, s := range seqs {
		switch {
		case s == l.Frontier:
			l.Frontier++
		case s < l.Frontier:
		case len(l.Arrived) > 0 && l.Arrived[len(l.Arrived)-1].To+1 == s:
			l.Arrived[len(l.Arrived)-1].To = s
		default:
			l.Arrived = append(l.Arrived, contract.SequenceRange{From: s, To: s})
		}
	}
	total := 0
	for _, ep := range sortedKeys(f.open) {
		if len(f.open[ep]) > 0 {
			l.Lanes = append(l.Lanes, f.laneLoad(ep, 0, &total))
		}
	}
	return l
}

// deliver is the receiver of lane ep given release r of seq: it applies
// the envelope when its cursor follows (kit/receiver's rule), and reports
// whether it did.
func (f *fakeLedger) deliver(ep string, seq int64, r contract.LaneRelease) bool {
	c := f.cursor[ep]
	if c != r.Previous && !(c > r.Previous && slices.Contains(r.Skipped, c)) {
		return false
	}
	f.cursor[ep] = seq
	f.applied[ep] = append(f.applied[ep], seq)
	return true
}

// sizes keeps the largest payload seen of each kind.
type sizes map[string]int

// noted: the payloads of sequence seq are measured. A long run measures
// its first 2,000 events and every thousandth after: what it carries stops
// growing once its lists reach their caps (a few dozen events), and
// measuring all of a 100,000-event run would make it minutes long under
// the race detector.
func noted(seq int64) bool { return seq <= 2000 || seq%1000 == 0 }

func (z sizes) note(t *testing.T, kind string, v any) {
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	z[kind] = max(z[kind], len(p.GetData()))
}

// settleWith loads the lanes that need it from f, as SequencerWorkflow's
// settle does with LoadLanes.
func settleWith(t *testing.T, s *sequencer, f *fakeLedger, z sizes) {
	for range 16 {
		eps := s.needLoads()
		if len(eps) == 0 {
			return
		}
		z.note(t, "LoadLanes input", contract.LoadLanesInput{CorrelationID: s.correlation, Lanes: eps})
		total := 0
		var lanes []contract.LaneState
		for _, la := range eps {
			lanes = append(lanes, f.laneLoad(la.Endpoint, la.After, &total))
		}
		z.note(t, "LoadLanes result", lanes)
		for i, la := range eps {
			s.endLoad(s.lanes[la.Endpoint], lanes[i])
		}
		s.pruneVoided()
	}
}

// freshRun is a sequencer started afresh on f (after a Terminate).
func freshRun(t *testing.T, correlation string, f *fakeLedger, z sizes) *sequencer {
	t.Helper()
	s := newSequencer(discard{}, correlation)
	l := f.load()
	z.note(t, "LoadSequencer result", l)
	s.merge(l, s.beginMerge())
	settleWith(t, s, f, z)
	return s
}

// deliverAll answers hs as the event workflows would: each released lane
// delivers (or is skipped, when skip says so) and the sequencer hears of
// it. It returns the handoffs those answers made, and notes the sizes of
// each release, event input and Deliver input.
func deliverAll(t *testing.T, s *sequencer, f *fakeLedger, z sizes, hs []contract.Handoff, skip func(ep string, seq int64) bool) []contract.Handoff {
	var next []contract.Handoff
	for _, h := range hs {
		measure := noted(h.Release.Sequence)
		if measure {
			z.note(t, "release signal", h.Release)
		}
		in := EventInput{Event: contract.DeliverInput{EventID: h.EventID, CorrelationID: s.correlation, Sequence: h.Release.Sequence}}
		done := contract.Done{Sequence: h.Release.Sequence, EventID: h.EventID}
		for _, r := range h.Release.Lanes {
			in.Lanes = append(in.Lanes, LaneInput{Endpoint: r.Endpoint, Released: &r})
			if measure {
				z.note(t, "Deliver input", in.Event.WithRelease(r))
			}
			skipped := skip != nil && skip(r.Endpoint, h.Release.Sequence)
			if !skipped {
				require.True(t, f.deliver(r.Endpoint, h.Release.Sequence, r), "lane %.12s… applies %d released with %+v on cursor %d", r.Endpoint, h.Release.Sequence, r, f.cursor[r.Endpoint])
			}
			f.finish(r.Endpoint, h.Release.Sequence, skipped)
			done.Lanes = append(done.Lanes, contract.LaneDone{Endpoint: r.Endpoint, Skipped: skipped})
		}
		if measure {
			z.note(t, "EventInput", in)
		}
		known, _ := s.finished(done)
		require.True(t, known)
		settleWith(t, s, f, z)
		ans := s.releases()
		if measure {
			z.note(t, "finished answer", ans)
		}
		next = append(next, ans.Handoffs...)
	}
	if noted(s.frontier) {
		z.note(t, "SequencerInput", SequencerInput{CorrelationID: s.correlation, State: ptr(s.snapshot())})
	}
	return next
}

// drainAll delivers until nothing is released any more.
func drainAll(t *testing.T, s *sequencer, f *fakeLedger, z sizes, hs []contract.Handoff, skip func(ep string, seq int64) bool) {
	for len(hs) > 0 {
		hs = deliverAll(t, s, f, z, hs, skip)
	}
}

// arriveOn stores event seq in f and tells s, as the API does, and answers
// the releases it made (the event's own lanes among them).
func arriveOn(t *testing.T, s *sequencer, f *fakeLedger, z sizes, seq int64, id string, eps []string) []contract.Handoff {
	f.store(seq, id, eps)
	a := contract.Arrival{Sequence: seq, EventID: id, Endpoints: eps}
	s.arrive(a)
	settleWith(t, s, f, z)
	ann := s.announce(a)
	if noted(seq) {
		z.note(t, "Arrival", a)
		z.note(t, "Announcement", ann)
	}
	hs := ann.Handoffs
	if len(ann.Released) > 0 {
		hs = append(hs, contract.Handoff{EventID: id, Release: contract.Release{Sequence: seq, Lanes: ann.Released}})
	}
	return hs
}

func ptr[T any](v T) *T { return &v }

// long is an ID of 255 characters ending in n.
func long(prefix string, n int) string {
	return fmt.Sprintf("%s%0*d", prefix, 255-len(prefix), n)
}
