package chaos

import (
	"cmp"
	"fmt"
	"sort"

	"github.com/hookflow/hookflow/internal/contract"
)

// The model's checks, by the name the summary counts them under.
const (
	// CheckSkippedApplied: an event that ended skipped was applied at the
	// receiver, or an event ended skipped that no operator asked to skip.
	CheckSkippedApplied = "skipped_applied"
	// CheckExactlyOnce: a delivered event not applied at the receiver, or
	// applied (answered "applied") more than once.
	CheckExactlyOnce = "exactly_once"
	// CheckOrder: the receiver applied a correlation's events out of
	// order, past a gap that no skip explains, or holds one parked.
	CheckOrder = "order"
	// CheckDeadLetter: a dead letter row whose status disagrees with how
	// its event ended (skipped ⇒ skipped; delivered ⇒ replayed; open ⇔
	// the event waits dead-lettered).
	CheckDeadLetter = "dead_letter_status"
	// CheckStranded: a correlation neither complete nor waiting on an open
	// dead letter that the API and the Web UI can still act on.
	CheckStranded = "stranded"
	// CheckUnfinished: an event the closing operator replayed or skipped,
	// with the receiver healed, that did not end delivered or skipped.
	CheckUnfinished = "unfinished"
)

// modelChecks are the checks in the order the summary lists them.
var modelChecks = []string{CheckSkippedApplied, CheckExactlyOnce, CheckOrder, CheckDeadLetter, CheckStranded, CheckUnfinished}

// Dead letter row statuses.
const (
	dlOpen     = "open"
	dlReplayed = "replayed"
	dlSkipped  = "skipped"
)

// ModelRecord is what the operator did in a scenario, as far as the
// checks need it.
type ModelRecord struct {
	// SkipAsked are the events a skip was sent for that may have acted: an
	// API skip answered 202 (or not answered at all), a raw skip signal
	// with no generation or the current one. Only these may end skipped.
	SkipAsked map[string]bool
	// ClosingReplays and ClosingSkips count what the closing operator did,
	// with every receiver healed, per event.
	ClosingReplays, ClosingSkips map[string]int
}

func newModelRecord() ModelRecord {
	return ModelRecord{SkipAsked: map[string]bool{}, ClosingReplays: map[string]int{}, ClosingSkips: map[string]int{}}
}

// ModelEvent is how one event of a scenario stood once quiet.
type ModelEvent struct {
	// State is its state in hookflow's ledger ("" when it is not there).
	State string
	// DeadLetter is its dead letter row's status ("" for none), and
	// Generation that row's generation.
	DeadLetter string
	Generation int32
}

// ModelObserved is what the checks read once a scenario is quiet.
type ModelObserved struct {
	// Events are the scenario's events by id.
	Events map[string]ModelEvent
	// Applied are the sequences the receiver applied, per correlation ID,
	// in the order it applied them; Parked the ones it holds parked.
	Applied, Parked map[string][]int64
	// AppliedAnswers counts the receiver's "applied" answers per event id,
	// as the proxy saw them.
	AppliedAnswers map[string]int
	// Heads is how the head stood, per correlation ID with an unfinished
	// event.
	Heads map[string]Head
}

// ModelViolation is one failed check.
type ModelViolation struct {
	Check, Detail string
}

func (v ModelViolation) String() string { return v.Check + ": " + v.Detail }

// CheckModel holds a quiet scenario against the model:
//
//   - no event that ended skipped, or whose skip its dead letter row
//     records, was applied, and only an event an operator asked to skip
//     ended skipped;
//   - every delivered event was applied exactly once, and the receiver
//     applied each correlation in order, past no gap but the skipped
//     events, with nothing left parked;
//   - each dead letter row agrees with how its event ended: skipped ⇒
//     skipped, delivered ⇒ replayed, open ⇔ the event waits dead-lettered;
//   - each correlation is complete, or waits on an open dead letter that
//     its running workflow waits on (its state query says dead_lettered,
//     with the row's generation);
//   - an event the closing operator replayed or skipped with the receiver
//     healed ended delivered or skipped.
func CheckModel(sc *Scenario, rec ModelRecord, obs ModelObserved) []ModelViolation {
	var out []ModelViolation
	fail := func(check, format string, args ...any) {
		out = append(out, ModelViolation{check, fmt.Sprintf(format, args...)})
	}
	for k, n := range sc.Events {
		corr := sc.CorrelationID(k)
		applied := map[int64]int{}
		for _, q := range obs.Applied[corr] {
			applied[q]++
		}
		state := func(q int64) string { return obs.Events[sc.EventID(k, q)].State }
		complete := true
		for q := int64(1); q <= int64(n); q++ {
			id := sc.EventID(k, q)
			name := fmt.Sprintf("c%d/%d (%s)", k, q, id)
			ev, known := obs.Events[id]
			switch {
			case !known || ev.State == "":
				complete = false
				fail(CheckExactlyOnce, "%s was posted but is not in hookflow's ledger", name)
				continue
			case ev.State == stateSkipped && applied[q] > 0:
				fail(CheckSkippedApplied, "%s ended skipped, yet the receiver applied it", name)
			case ev.DeadLetter == dlSkipped && applied[q] > 0:
				fail(CheckSkippedApplied, "%s was skipped (its dead letter row says so), yet the receiver applied it and it is %s", name, ev.State)
			case ev.State == stateSkipped && !rec.SkipAsked[id]:
				fail(CheckSkippedApplied, "%s ended skipped, but no operator asked to skip it", name)
			case ev.State == stateDelivered && applied[q] == 0:
				fail(CheckExactlyOnce, "%s is delivered in hookflow, but the receiver never applied it", name)
			case ev.State != stateDelivered && ev.State != stateSkipped:
				complete = false
				if applied[q] > 0 {
					fail(CheckExactlyOnce, "%s is %s in hookflow, yet the receiver applied it", name, ev.State)
				}
			}
			if applied[q] > 1 || obs.AppliedAnswers[id] > 1 {
				fail(CheckExactlyOnce, "%s was applied %d times (the receiver answered \"applied\" %d times)", name, applied[q], obs.AppliedAnswers[id])
			}
			switch {
			case ev.State == stateSkipped && ev.DeadLetter != dlSkipped:
				fail(CheckDeadLetter, "%s ended skipped, but its dead letter row says %s", name, rowStatus(ev.DeadLetter))
			case ev.State == stateDelivered && ev.DeadLetter != "" && ev.DeadLetter != dlReplayed:
				fail(CheckDeadLetter, "%s was delivered, but its dead letter row says %s (generation %d)", name, ev.DeadLetter, ev.Generation)
			case ev.State == stateDeadLettered && ev.DeadLetter != dlOpen:
				fail(CheckDeadLetter, "%s waits dead-lettered, but its dead letter row says %s", name, rowStatus(ev.DeadLetter))
			case ev.DeadLetter == dlOpen && ev.State != stateDeadLettered:
				fail(CheckDeadLetter, "%s is %s, but its dead letter row is open (generation %d)", name, ev.State, ev.Generation)
			}
			closing := rec.ClosingReplays[id] + rec.ClosingSkips[id]
			if closing > 0 && ev.State != stateDelivered && ev.State != stateSkipped {
				fail(CheckUnfinished, "%s is %s (dead letter %s, generation %d) after the closing operator's %d replays and %d skips with the receiver healed",
					name, ev.State, rowStatus(ev.DeadLetter), ev.Generation, rec.ClosingReplays[id], rec.ClosingSkips[id])
			}
		}

		// Order: the receiver applied 1, 2, …, skipping only what hookflow
		// skipped, and holds nothing parked.
		var last int64
		for _, q := range obs.Applied[corr] {
			want := last + 1
			for want < q && state(want) == stateSkipped {
				want++
			}
			if q != want {
				fail(CheckOrder, "c%d: the receiver applied sequence %d after %d (expected %d next)", k, q, last, want)
			}
			last = max(last, q)
		}
		if p := obs.Parked[corr]; len(p) > 0 {
			fail(CheckOrder, "c%d: the receiver holds sequences %v parked, as if an earlier one were missing", k, p)
		}

		if !complete {
			if why := modelStrandedWhy(sc, k, obs); why != "" {
				fail(CheckStranded, "c%d: %s", k, why)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return checkRank(out[i].Check) < checkRank(out[j].Check) })
	return out
}

func checkRank(c string) int {
	for i, x := range modelChecks {
		if x == c {
			return i
		}
	}
	return len(modelChecks)
}

func rowStatus(s string) string {
	if s == "" {
		return "nothing (there is no row)"
	}
	return s
}

// modelStrandedWhy says why unfinished correlation k is stranded, or ""
// when its head waits on a dead letter an operator can still act on.
func modelStrandedWhy(sc *Scenario, k int, obs ModelObserved) string {
	h, ok := obs.Heads[sc.CorrelationID(k)]
	if !ok {
		return "its head was not observed"
	}
	if h.Next < 1 || h.Next > int64(sc.Events[k]) {
		return fmt.Sprintf("its cursor is at %d, past its events, yet some are unfinished", h.Next)
	}
	id := sc.EventID(k, h.Next)
	ev := obs.Events[id]
	wf := h.Workflow
	if h.QueryErr != "" {
		wf += " (" + h.QueryErr + ")"
	} else if h.Workflow == "running" {
		wf += fmt.Sprintf(" and says %s, generation %d", h.Status.State, generationOf(h.Status))
	}
	switch {
	case ev.State != stateDeadLettered:
		return fmt.Sprintf("its head c%d/%d is %s in hookflow's ledger and nothing moves it; its workflow is %s", k, h.Next, ev.State, wf)
	case ev.DeadLetter != dlOpen:
		return fmt.Sprintf("its head c%d/%d is dead-lettered, but its dead letter row says %s, which no operator can replay or skip; its workflow is %s", k, h.Next, rowStatus(ev.DeadLetter), wf)
	case h.Workflow != "running" || h.QueryErr != "":
		return fmt.Sprintf("its head c%d/%d waits on an open dead letter, but its workflow is %s", k, h.Next, wf)
	case h.Status.State != contract.StateDeadLettered || generationOf(h.Status) != ev.Generation:
		return fmt.Sprintf("its head c%d/%d has dead letter generation %d open, but its workflow is %s", k, h.Next, ev.Generation, wf)
	}
	return ""
}

// endLines say how each correlation and event of a scenario ended: the
// ledger's state, the dead letter row, what the receiver applied and holds
// parked, and the head's workflow.
func endLines(sc *Scenario, obs ModelObserved) []string {
	var out []string
	for k, n := range sc.Events {
		corr := sc.CorrelationID(k)
		line := fmt.Sprintf("c%d: the receiver applied %v, holds %v parked", k, obs.Applied[corr], obs.Parked[corr])
		if h, ok := obs.Heads[corr]; ok {
			line += fmt.Sprintf("; head c%d/%d, its workflow %s", k, h.Next, h.Workflow)
			switch {
			case h.QueryErr != "":
				line += " (" + h.QueryErr + ")"
			case h.Workflow == "running":
				line += fmt.Sprintf(" (%s, generation %d)", h.Status.State, generationOf(h.Status))
			}
		}
		out = append(out, line)
		for q := int64(1); q <= int64(n); q++ {
			id := sc.EventID(k, q)
			ev := obs.Events[id]
			dl := "no dead letter"
			if ev.DeadLetter != "" {
				dl = fmt.Sprintf("dead letter %s (generation %d)", ev.DeadLetter, ev.Generation)
			}
			out = append(out, fmt.Sprintf("c%d/%d: %s, %s, \"applied\" answers %d", k, q, cmp.Or(ev.State, "not in the ledger"), dl, obs.AppliedAnswers[id]))
		}
	}
	return out
}
