package chaos

import (
	"fmt"
	"sort"
	"strconv"
)

// Final event states in hookflow's ledger.
const (
	stateDelivered    = "delivered"
	stateDeadLettered = "dead_lettered"
	stateSkipped      = "skipped"
)

// LedgerEntry is one row of the receiver's ledger (or of its
// processed_events), in the order the receiver applied them.
type LedgerEntry struct {
	EventID       string
	CorrelationID string
	Sequence      int64
}

// Observed is everything the checks look at, gathered after the run.
type Observed struct {
	// Accepted are the event ids the API answered 2xx for.
	Accepted map[string]bool
	// Rejected describes posts the API refused for good (4xx).
	Rejected []string
	// States is hookflow's events table: event id → state.
	States map[string]string
	// DeadLetters is hookflow's dead_letters table: event id → status.
	DeadLetters map[string]string
	// Ledger is the receiver's ledger_entries in application order.
	Ledger []LedgerEntry
	// Processed is the receiver kit's processed_events.
	Processed []LedgerEntry
	// Parked counts events the receiver still holds parked.
	Parked int
	// Receiver is the receiver's GET /correlations/{id} per correlation.
	Receiver map[string]receiverCorrelation
	// AppliedAnswers counts the receiver's "applied" answers per event id,
	// as the proxy saw them.
	AppliedAnswers map[string]int
}

// Verdict is the outcome of the checks.
type Verdict struct {
	Events          int // accepted events
	Applied         int // ledger entries
	DeadLettered    int // events that got a dead letter row at some point
	Lost            int
	Duplicates      int
	OrderViolations int
	Stuck           int // events in a non-final state
	Mismatches      int // hookflow and the receiver disagree, or a balance is off
	NotAccepted     int // workload events never accepted
	Details         []string
}

// OK reports whether every invariant held.
func (v Verdict) OK() bool {
	return v.Lost == 0 && v.Duplicates == 0 && v.OrderViolations == 0 && v.Stuck == 0 && v.Mismatches == 0 && v.NotAccepted == 0
}

func (v *Verdict) note(format string, args ...any) {
	if len(v.Details) < 30 {
		v.Details = append(v.Details, fmt.Sprintf(format, args...))
	}
}

// Check holds the run's observations against the invariants:
//
//   - every workload event was accepted;
//   - every accepted event is in hookflow's ledger in a final state, and is
//     applied at the receiver exactly when hookflow says delivered; a
//     dead-lettered or skipped event has a dead_letters row (else: lost);
//   - no event id and no (correlation, sequence) is applied twice, and the
//     receiver never answered "applied" twice for one id (duplicates);
//   - per correlation the receiver applied 1, 2, …, k in that order, with
//     no gap, and hookflow's delivered set is that same prefix (order);
//   - the receiver's balance is the sum of the applied amounts, its
//     processed_events match its ledger, nothing is left parked.
func Check(w *Workload, o Observed) Verdict {
	var v Verdict
	byID := make(map[string]Event, len(w.Events))
	idOf := map[string]map[int64]string{}
	for _, ev := range w.Events {
		byID[ev.ID] = ev
		if idOf[ev.CorrelationID] == nil {
			idOf[ev.CorrelationID] = map[int64]string{}
		}
		idOf[ev.CorrelationID][ev.Sequence] = ev.ID
		if !o.Accepted[ev.ID] {
			v.NotAccepted++
			v.note("event %s was never accepted by the API", ev.ID)
		}
	}
	for _, r := range o.Rejected {
		v.note("post rejected: %s", r)
	}
	v.Events = len(o.Accepted)
	for id := range o.DeadLetters {
		if _, ok := byID[id]; ok {
			v.DeadLettered++
		}
	}

	// The receiver's ledger, in application order.
	v.Applied = len(o.Ledger)
	appliedID := map[string]int{}
	appliedSeq := map[string]map[int64]int{}
	last := map[string]int64{}
	amounts := map[string]int64{}
	for _, e := range o.Ledger {
		appliedID[e.EventID]++
		if appliedID[e.EventID] == 2 {
			v.Duplicates++
			v.note("duplicate: event %s applied more than once", e.EventID)
		}
		if appliedSeq[e.CorrelationID] == nil {
			appliedSeq[e.CorrelationID] = map[int64]int{}
		}
		appliedSeq[e.CorrelationID][e.Sequence]++
		if appliedSeq[e.CorrelationID][e.Sequence] == 2 {
			v.Duplicates++
			v.note("duplicate: %s sequence %d applied more than once", e.CorrelationID, e.Sequence)
		}
		if want := last[e.CorrelationID] + 1; e.Sequence != want {
			v.OrderViolations++
			v.note("order: %s applied sequence %d after %d", e.CorrelationID, e.Sequence, last[e.CorrelationID])
		}
		if e.Sequence > last[e.CorrelationID] {
			last[e.CorrelationID] = e.Sequence
		}
		ev, ok := byID[e.EventID]
		switch {
		case !ok:
			v.Mismatches++
			v.note("receiver applied %s, which the workload never sent", e.EventID)
		case ev.CorrelationID != e.CorrelationID || ev.Sequence != e.Sequence:
			v.Mismatches++
			v.note("receiver applied %s as %s/%d, sent as %s/%d", e.EventID, e.CorrelationID, e.Sequence, ev.CorrelationID, ev.Sequence)
		default:
			amounts[e.CorrelationID] += ev.Amount
		}
	}
	for id, n := range o.AppliedAnswers {
		if n > 1 {
			v.Duplicates++
			v.note("duplicate: the receiver answered \"applied\" %d times for %s", n, id)
		}
	}

	// Every accepted event against hookflow's ledger and the receiver's.
	ids := make([]string, 0, len(o.Accepted))
	for id := range o.Accepted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	delivered := map[string]map[int64]bool{}
	for _, id := range ids {
		ev := byID[id]
		st, known := o.States[id]
		applied := appliedID[id] > 0
		_, hasDL := o.DeadLetters[id]
		switch {
		case !known:
			v.Lost++
			v.note("lost: %s was accepted but is not in hookflow's ledger", id)
		case st == stateDelivered && !applied:
			v.Lost++
			v.note("lost: %s is delivered in hookflow but not applied at the receiver", id)
		case st == stateDelivered:
			if delivered[ev.CorrelationID] == nil {
				delivered[ev.CorrelationID] = map[int64]bool{}
			}
			delivered[ev.CorrelationID][ev.Sequence] = true
		case st == stateDeadLettered || st == stateSkipped:
			if !hasDL {
				v.Lost++
				v.note("lost: %s is %s without a dead letter row", id, st)
			}
			if applied && st == stateSkipped {
				v.Mismatches++
				v.note("mismatch: %s is skipped in hookflow but applied at the receiver", id)
			}
		default:
			v.Stuck++
			v.note("stuck: %s is still %s", id, st)
			if applied {
				v.Mismatches++
				v.note("mismatch: %s is %s in hookflow but applied at the receiver", id, st)
			}
		}
	}
	// hookflow's delivered set per correlation must be a prefix 1..k.
	for corr, seqs := range delivered {
		for s := range seqs {
			if s > 1 && !seqs[s-1] && o.States[idOf[corr][s-1]] != stateSkipped {
				v.OrderViolations++
				v.note("order: hookflow delivered %s/%d but not %d", corr, s, s-1)
			}
		}
	}

	// The receiver's own bookkeeping.
	if len(o.Processed) != len(o.Ledger) {
		v.Mismatches++
		v.note("receiver: %d processed_events rows but %d ledger entries", len(o.Processed), len(o.Ledger))
	}
	if o.Parked > 0 {
		v.OrderViolations++
		v.note("receiver: %d events left parked (sent ahead of their predecessor)", o.Parked)
	}
	for _, corr := range w.Correlations {
		rc, ok := o.Receiver[corr]
		if !ok {
			if last[corr] > 0 {
				v.Mismatches++
				v.note("receiver API does not know %s", corr)
			}
			continue
		}
		if len(rc.Applied) != len(appliedSeq[corr]) || rc.LastSequence != last[corr] {
			v.Mismatches++
			v.note("receiver API %s: %d applied, last %d; ledger: %d, last %d", corr, len(rc.Applied), rc.LastSequence, len(appliedSeq[corr]), last[corr])
		}
		bal, err := strconv.ParseFloat(rc.Balance.String(), 64)
		if err != nil || int64(bal) != amounts[corr] {
			v.Mismatches++
			v.note("balance %s: receiver says %s, applied amounts sum to %d", corr, rc.Balance, amounts[corr])
		}
	}
	return v
}
