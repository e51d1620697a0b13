package chaos

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/refreceiver"
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
	Receiver map[string]refreceiver.Correlation
	// AppliedAnswers counts the receiver's "applied" answers per event id,
	// as the proxy saw them.
	AppliedAnswers map[string]int
	// Skipped are the events an operator asked to skip, unless the API
	// refused it (409). Only these may end skipped.
	Skipped map[string]bool
	// DoubleClaims describes the dead letters whose two concurrent clicks
	// (replays, or a replay and a skip) were both answered 202.
	DoubleClaims []string
	// Heads is how the head stood, per correlation with an unfinished
	// accepted event.
	Heads map[string]Head
	// PostgresRestartFailures counts the Postgres restarts of the schedule
	// after which Postgres did not come back.
	PostgresRestartFailures int
}

// Head is how a correlation's head (the event at its cursor) stood after
// quiet.
type Head struct {
	// Next is the ledger's cursor (correlations.next_sequence).
	Next int64
	// Generation is the head's dead letter's generation (0: it has none).
	Generation int32
	// Workflow is the status of its workflow: "running", "terminated",
	// "not found", …
	Workflow string
	// Status is what the running workflow answered to QueryState; QueryErr
	// why it could not be read.
	Status   contract.EventStatus
	QueryErr string
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
	Skipped         int // events that ended skipped (by the run's operator)
	// Stranded counts the correlations that are neither complete nor
	// waiting on a dead letter an operator can still replay or skip.
	Stranded int
	// DoubleClaims counts the dead letters two concurrent clicks both won.
	DoubleClaims int
	// PostgresRestartFailures counts the Postgres restarts that did not
	// come back: the run's faults did not go as planned.
	PostgresRestartFailures int
	Details                 []string
}

// OK reports whether every invariant held.
func (v Verdict) OK() bool {
	return v.Lost == 0 && v.Duplicates == 0 && v.OrderViolations == 0 && v.Stuck == 0 && v.Mismatches == 0 && v.NotAccepted == 0 &&
		v.Stranded == 0 && v.DoubleClaims == 0 && v.PostgresRestartFailures == 0
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
//     dead-lettered or skipped event has a dead_letters row, and only an
//     event an operator skipped is skipped (else: lost);
//   - no event id and no (correlation, sequence) is applied twice, and the
//     receiver never answered "applied" twice for one id (duplicates);
//   - per correlation the receiver applied 1, 2, …, k in that order, with
//     no gap but the skipped sequences, and hookflow's delivered set is
//     that same prefix (order);
//   - the receiver's balance is the sum of the applied amounts, its
//     processed_events match its ledger, nothing is left parked;
//   - every correlation is complete (each accepted event delivered or
//     skipped), or its head is dead-lettered with an open dead letter and
//     its workflow runs and waits on that generation, so an operator can
//     still replay or skip it (else: stranded);
//   - no two concurrent clicks on one dead letter were both taken, and
//     every Postgres restart came back.
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
	// skippedAt: hookflow skipped that sequence, so the receiver never gets it.
	skippedAt := func(corr string, seq int64) bool {
		id, ok := idOf[corr][seq]
		return ok && o.States[id] == stateSkipped
	}
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
		want := last[e.CorrelationID] + 1
		for skippedAt(e.CorrelationID, want) && want < e.Sequence {
			want++
		}
		if e.Sequence != want {
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
			if o.DeadLetters[id] == "open" {
				v.Mismatches++
				v.note("mismatch: %s is delivered, yet its dead letter is open for an operator to replay or skip", id)
			}
			if delivered[ev.CorrelationID] == nil {
				delivered[ev.CorrelationID] = map[int64]bool{}
			}
			delivered[ev.CorrelationID][ev.Sequence] = true
		case st == stateSkipped && !o.Skipped[id]:
			v.Lost++
			v.note("lost: %s is skipped, but no operator skipped it", id)
		case st == stateDeadLettered || st == stateSkipped:
			if st == stateSkipped {
				v.Skipped++
			}
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
	v.Stranded = stranded(w, o, idOf, &v)
	v.DoubleClaims = len(o.DoubleClaims)
	for _, d := range o.DoubleClaims {
		v.note("double claim: two concurrent clicks on one dead letter were both answered 202: %s", d)
	}
	if v.PostgresRestartFailures = o.PostgresRestartFailures; v.PostgresRestartFailures > 0 {
		v.note("postgres did not come back after %d of its restarts; the run did not go as planned", v.PostgresRestartFailures)
	}
	return v
}

// stranded counts the correlations that are neither complete nor waiting
// on a dead letter an operator can act on, and notes why.
func stranded(w *Workload, o Observed, idOf map[string]map[int64]string, v *Verdict) int {
	unfinished := map[string]bool{}
	for _, ev := range w.Events {
		if st := o.States[ev.ID]; o.Accepted[ev.ID] && st != stateDelivered && st != stateSkipped {
			unfinished[ev.CorrelationID] = true
		}
	}
	n := 0
	for _, corr := range w.Correlations {
		if !unfinished[corr] {
			continue
		}
		if why := strandedWhy(o, o.Heads, idOf[corr], corr); why != "" {
			n++
			v.note("stranded: %s: %s", corr, why)
		}
	}
	return n
}

// strandedWhy says why an unfinished correlation is stranded, or "" when
// its head waits on a dead letter an operator can still replay or skip.
func strandedWhy(o Observed, heads map[string]Head, ids map[int64]string, corr string) string {
	h, ok := heads[corr]
	if !ok {
		return "its head was not observed"
	}
	id, ok := ids[h.Next]
	switch {
	case !ok:
		return fmt.Sprintf("its cursor is at %d, past its events, yet some are unfinished", h.Next)
	case !o.Accepted[id]:
		return fmt.Sprintf("its head %s (sequence %d) was never accepted", id, h.Next)
	}
	wf := h.Workflow
	if h.QueryErr != "" {
		wf += " (" + h.QueryErr + ")"
	} else if h.Workflow == "running" {
		wf += fmt.Sprintf(" (it says %s, generation %d)", h.Status.State, generationOf(h.Status))
	}
	st, dl := o.States[id], o.DeadLetters[id]
	switch {
	case st != stateDeadLettered:
		return fmt.Sprintf("its head %s is %s; its workflow is %s", id, st, wf)
	case dl != "open":
		return fmt.Sprintf("its head %s is dead-lettered, but its dead letter is %s, which no operator can replay or skip; its workflow is %s", id, dl, wf)
	case h.Workflow != "running" || h.QueryErr != "":
		return fmt.Sprintf("its head %s waits on an open dead letter, but its workflow is %s", id, wf)
	case h.Status.State != contract.StateDeadLettered || generationOf(h.Status) != h.Generation:
		return fmt.Sprintf("its head %s has dead letter generation %d open, but its workflow is %s", id, h.Generation, wf)
	}
	return ""
}

// generationOf is the dead letter an event's workflow says its delivery
// waits on (the workload sends each event to one endpoint), 0 for none.
func generationOf(st contract.EventStatus) int32 {
	for _, l := range st.Lanes {
		if l.Generation > 0 {
			return l.Generation
		}
	}
	return 0
}
