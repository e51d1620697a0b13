package contract

import "slices"

// The byte budgets of what a sequencer keeps and says. Temporal ends a
// workflow whose continue-as-new input or local-activity marker passes its
// 2 MiB blob limit, and a fresh run that loads the same lanes from the
// ledger is ended again: so a sequencer's state, every input and signal
// that carries a lane's position, and each ledger load stay under
// MaxPayloadBytes, half the limit, whatever the number of lanes ever
// routed, the length of the IDs and the skips in a lane. The bounds below
// are what makes it so by construction; the workflows' size tests print
// the figures and hold them to MaxPayloadBytes.
const (
	// MaxPayloadBytes is the budget of a sequencer's state
	// (SequencerInput), an event's inputs (EventInput, DeliverInput), a
	// release signal and a ledger load (LoadSequencer, LoadLanes).
	MaxPayloadBytes = 1 << 20

	// MaxSkippedListed bounds the skipped sequences a lane keeps and a
	// release names (the envelope's skipped_sequences): the newest, the
	// lane's own skips before voided sequences. A receiver reads the list
	// only to apply an event while its cursor stands on a sequence it
	// applied whose answer was lost before an operator skipped it; that is
	// one of the lane's latest skips, never a voided sequence (none was
	// ever sent), so the cut loses nothing a receiver acts on unless that
	// many more of the lane's deliveries were skipped unapplied after it,
	// and then the receiver parks the event (202) rather than apply it out
	// of order.
	MaxSkippedListed = 16

	// MaxVoidedKept bounds the voided sequences a sequencer keeps (and a
	// load reads): the newest. A lane whose previous sequence never moves
	// (a deleted endpoint's) would otherwise keep every void for good; a
	// release names at most MaxSkippedListed of them anyway.
	MaxVoidedKept = 256

	// MaxQueuedBytesPerLane bounds the bytes of a lane's queued events (as
	// JSON, QueuedBytes), beside MaxQueuedPerLane: a lane with long event
	// IDs keeps fewer, and loads the rest later.
	MaxQueuedBytesPerLane = 4 << 10

	// MaxQueuedBytes bounds the queued events of all of a sequencer's lanes
	// (and of a load): past it, lanes keep their next event alone and load
	// the rest when they reach it.
	MaxQueuedBytes = 256 << 10

	// MaxIdleLanes bounds the lanes a sequencer keeps with nothing queued,
	// in flight or to load: past it, the least recently finished are
	// dropped, and an event for one loads its position from the ledger
	// again. A correlation routed to many endpoints over its life thus
	// keeps the lanes that are busy, not all it ever had.
	MaxIdleLanes = 64

	// MaxLanesPerLoad bounds the lanes one LoadLanes reads.
	MaxLanesPerLoad = 64
)

// QueuedBytes is at least what JSON takes for q in a lane's queue:
// {"sequence":…,"event_id":"…","state":"…"}, with the longest sequence and
// state. Event IDs are of [A-Za-z0-9_:-], which JSON does not escape.
func QueuedBytes(q QueuedEvent) int { return 64 + len(q.EventID) }

// CapSkipped keeps the newest MaxSkippedListed of a lane's skipped
// sequences (sorted).
func CapSkipped(skipped []int64) []int64 {
	if len(skipped) <= MaxSkippedListed {
		return skipped
	}
	return slices.Clone(skipped[len(skipped)-MaxSkippedListed:])
}

// CapVoided keeps the newest MaxVoidedKept voided sequences (sorted).
func CapVoided(voided []int64) []int64 {
	if len(voided) <= MaxVoidedKept {
		return voided
	}
	return slices.Clone(voided[len(voided)-MaxVoidedKept:])
}

// ReleaseSkipped is the skipped list of a lane's release of sequence
// before, whichever path builds it (the sequencer's answer, a workflow
// rebuilt from the ledger): the lane's skips and the voided sequences
// after previous and below before, sorted, at most MaxSkippedListed of
// them: the newest, voided sequences dropped first (a receiver never
// stands on one). Nil when none.
func ReleaseSkipped(skipped, voided []int64, previous, before int64) []int64 {
	in := func(v int64) bool { return v > previous && v < before }
	var own, void []int64
	for _, s := range skipped {
		if in(s) {
			own = append(own, s)
		}
	}
	for _, v := range voided {
		if in(v) && !slices.Contains(own, v) {
			void = append(void, v)
		}
	}
	slices.Sort(own)
	own = slices.Compact(own)
	slices.Sort(void)
	void = slices.Compact(void)
	if len(own) > MaxSkippedListed {
		own = own[len(own)-MaxSkippedListed:]
	}
	if room := MaxSkippedListed - len(own); len(void) > room {
		void = void[len(void)-room:]
	}
	out := append(own, void...)
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return out
}

// BoundQueued keeps of a lane's open deliveries, in order, what a load
// carries: at most MaxQueuedBytesPerLane of them (the first always), and
// none once *total, the bytes the load's earlier lanes kept, would pass
// MaxQueuedBytes; it adds what it keeps to *total, and says whether it
// left any out.
func BoundQueued(open []QueuedEvent, total *int) (kept []QueuedEvent, cut bool) {
	n := 0
	for k, q := range open {
		if k > 0 && n+QueuedBytes(q) > MaxQueuedBytesPerLane {
			open, cut = open[:k], true
			break
		}
		n += QueuedBytes(q)
	}
	if len(open) > 0 && *total+n > MaxQueuedBytes {
		return nil, true
	}
	*total += n
	return open, cut
}
