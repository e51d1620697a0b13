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
