package workflows

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// open is event seq as a load lists it among a lane's open deliveries.
func open(seq int64) contract.QueuedEvent {
	return contract.QueuedEvent{Sequence: seq, EventID: fmt.Sprintf("evt-%d", seq)}
}

// TestOverlappingResyncsDoNotRemakeAFinishedLane: of two resyncs under
// way at once, the one that read the ledger last lands first and finds
// nothing open at Y (6 finished meanwhile); the one that read it first
// lands second, naming 6 open at Y. Y must not hold 6 in flight again: its
// finished update came already, so 7 would wait behind it for the heads
// sweep.
func TestOverlappingResyncsDoNotRemakeAFinishedLane(t *testing.T) {
	s := newSequencer(nopWarn{}, "c")
	s.merge(contract.SequencerLoad{Next: 6, Frontier: 7, Lanes: []contract.LaneState{
		{Endpoint: "Y", LastFinished: 5, Previous: 5, Queued: []contract.QueuedEvent{open(6)}}}}, s.beginMerge())
	s.releases()
	require.EqualValues(t, 6, s.lanes["Y"].inFlight)
	first, second := s.beginMerge(), s.beginMerge()
	stale := contract.SequencerLoad{Next: 6, Frontier: 7, Lanes: []contract.LaneState{
		{Endpoint: "Y", LastFinished: 5, Previous: 5, Queued: []contract.QueuedEvent{open(6)}}}}
	_, _ = s.finished(contract.Done{Sequence: 6, EventID: "evt-6", Lanes: []contract.LaneDone{{Endpoint: "Y"}}})
	s.merge(contract.SequencerLoad{Next: 7, Frontier: 7}, first)
	s.merge(stale, second)
	a := contract.Arrival{Sequence: 7, EventID: "evt-7", Endpoints: []string{"Y"}}
	s.arrive(a)
	for _, la := range s.needLoads() {
		s.endLoad(s.lanes[la.Endpoint], contract.LaneState{Endpoint: la.Endpoint, LastFinished: 6, Previous: 6, Queued: []contract.QueuedEvent{open(7)}})
	}
	s.announce(a)
	require.EqualValues(t, 7, s.lanes["Y"].inFlight, "7 released after 6, which finished")
}

// TestAResyncDoesNotRemakeALaneDroppedWhileItRan: while one resync runs,
// an arrival makes lane Y, 6 is delivered there and Y goes idle. Y must not
// be dropped and then made again from the resync's snapshot, read before 6
// finished, with 6 in flight.
func TestAResyncDoesNotRemakeALaneDroppedWhileItRan(t *testing.T) {
	s := newSequencer(nopWarn{}, "c")
	s.maxIdle = 0 // as a correlation with more idle lanes than it keeps
	s.merge(contract.SequencerLoad{Next: 6, Frontier: 6}, s.beginMerge())
	began := s.beginMerge()
	a := contract.Arrival{Sequence: 6, EventID: "evt-6", Endpoints: []string{"Y"}}
	s.arrive(a)
	for _, la := range s.needLoads() {
		s.endLoad(s.lanes[la.Endpoint], contract.LaneState{Endpoint: "Y", LastFinished: 5, Previous: 5, Queued: []contract.QueuedEvent{open(6)}})
	}
	s.announce(a)
	stale := contract.SequencerLoad{Next: 6, Frontier: 7, Lanes: []contract.LaneState{
		{Endpoint: "Y", LastFinished: 5, Previous: 5, Queued: []contract.QueuedEvent{open(6)}}}}
	_, _ = s.finished(contract.Done{Sequence: 6, EventID: "evt-6", Lanes: []contract.LaneDone{{Endpoint: "Y"}}})
	s.merge(stale, began)
	s.releases()
	if l := s.lanes["Y"]; l != nil {
		require.Zero(t, l.inFlight, "6 finished: Y holds nothing in flight")
		require.Empty(t, l.queue, "6 finished: Y queues nothing")
	}
}

// TestAPartialLaneALoadLeftOutIsLoadedAgain: a later resync leaves lane X
// partial with nothing queued (its byte budget), the earlier one does not
// name X. X must be loaded again, not dropped: 6 is open there, and its
// arrival must not be answered finished.
func TestAPartialLaneALoadLeftOutIsLoadedAgain(t *testing.T) {
	s := newSequencer(nopWarn{}, "c")
	s.merge(contract.SequencerLoad{Next: 5, Frontier: 6, Lanes: []contract.LaneState{
		{Endpoint: "X", LastFinished: 4, Previous: 4, Queued: []contract.QueuedEvent{open(5)}}}}, s.beginMerge())
	s.releases()
	_, _ = s.finished(contract.Done{Sequence: 5, EventID: "evt-5", Lanes: []contract.LaneDone{{Endpoint: "X"}}})
	first, second := s.beginMerge(), s.beginMerge()
	s.merge(contract.SequencerLoad{Next: 6, Frontier: 7, Lanes: []contract.LaneState{
		{Endpoint: "X", LastFinished: 5, Previous: 5, Partial: true, KnownThrough: 5}}}, second)
	a := contract.Arrival{Sequence: 6, EventID: "evt-6", Endpoints: []string{"X"}}
	s.arrive(a)
	s.merge(contract.SequencerLoad{Next: 6, Frontier: 6}, first)
	require.NotNil(t, s.lanes["X"], "X is held, to be loaded")
	require.False(t, s.announce(a).Finished, "6 is open at X")
}

// resetToOneInFlight is the state an operator's Reset brought a sequencer
// back to: 1 released at X, and nothing heard since (2's arrival, 1's
// finish and 2's release were forgotten).
func resetToOneInFlight(t *testing.T) *sequencer {
	s := newSequencer(nopWarn{}, "c")
	s.merge(contract.SequencerLoad{Next: 1, Frontier: 2, Lanes: []contract.LaneState{
		{Endpoint: "X", Queued: []contract.QueuedEvent{open(1)}}}}, s.beginMerge())
	s.releases()
	require.EqualValues(t, 1, s.lanes["X"].inFlight)
	return s
}

// requireThroughTwo: the sequencer is past 1 and 2, both delivered at X.
func requireThroughTwo(t *testing.T, s *sequencer) {
	t.Helper()
	require.EqualValues(t, 3, s.cursor(), "both events are delivered: %+v", s.snapshot())
	if l := s.lanes["X"]; l != nil {
		require.Zero(t, l.inFlight, "2 is delivered: X holds nothing in flight")
		require.EqualValues(t, 2, l.previous, "X last delivered 2")
	}
}

// settleFrom is the handlers' settle against a ledger whose lanes answer
// ledger: the loads of the lanes that need one, until none does.
func settleFrom(s *sequencer, ledger func(ep string) contract.LaneState) {
	for range 16 {
		eps := s.needLoads()
		if len(eps) == 0 {
			return
		}
		for _, la := range eps {
			s.endLoad(s.lanes[la.Endpoint], ledger(la.Endpoint))
		}
		s.pruneVoided()
	}
}

// finishedRacingAResync: after the Reset, the heads sweep starts 2's
// workflow again where the ledger has it (released) and resyncs; its load
// reads the ledger while 2 is still delivering. 2 is delivered, and its
// finish, which the sequencer does not know, starts a resync of its own,
// whose load finds the correlation finished. It returns the sequencer with
// both loads read, and the two merges (the sweep's, the finish's) to land.
func finishedRacingAResync(t *testing.T) (s *sequencer, sweep, own func()) {
	s = resetToOneInFlight(t)
	sweepBegan := s.beginMerge()
	stale := contract.SequencerLoad{Next: 2, Frontier: 3, Lanes: []contract.LaneState{
		{Endpoint: "X", LastFinished: 1, Previous: 1, Queued: []contract.QueuedEvent{open(2)}}}}
	known, _ := s.finished(contract.Done{Sequence: 2, EventID: "evt-2", Lanes: []contract.LaneDone{{Endpoint: "X"}}})
	require.False(t, known, "2's release was forgotten by the Reset")
	ownBegan := s.beginMerge()
	fresh := contract.SequencerLoad{Next: 3, Frontier: 3}
	ledger := func(ep string) contract.LaneState {
		return contract.LaneState{Endpoint: ep, LastFinished: 2, Previous: 2}
	}
	sweep = func() {
		s.merge(stale, sweepBegan)
		settleFrom(s, ledger)
		s.inFlight()
	}
	own = func() {
		s.merge(fresh, ownBegan)
		settleFrom(s, ledger)
		s.releases()
	}
	return s, sweep, own
}

// TestAFinishRacingAStaleResyncIsNotUndoneWhenTheResyncLandsFirst: the
// sweep's resync, which read 2 open, lands first and must not release 2
// again: the finish said the ledger is past it, and the finish's own
// resync, whose load does not name X (nothing is open there), cannot take
// it back. The sequencer must end through 2, not hold it in flight for good.
func TestAFinishRacingAStaleResyncIsNotUndoneWhenTheResyncLandsFirst(t *testing.T) {
	s, sweep, own := finishedRacingAResync(t)
	sweep()
	own()
	requireThroughTwo(t, s)
}

// TestAFinishRacingAStaleResyncIsNotUndoneWhenTheResyncLandsLast: the
// same, with the finish's resync landing first: the sweep's, older, must
// not bring 2 back.
func TestAFinishRacingAStaleResyncIsNotUndoneWhenTheResyncLandsLast(t *testing.T) {
	s, sweep, own := finishedRacingAResync(t)
	own()
	sweep()
	requireThroughTwo(t, s)
}
