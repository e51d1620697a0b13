package chaos

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// The model's checks, by the name the summary counts them under. Each
// holds per delivery, or per (correlation, endpoint) lane.
const (
	// CheckSkippedApplied: a delivery that ended skipped was applied at its
	// receiver, or one ended skipped that no operator asked to skip.
	CheckSkippedApplied = "skipped_applied"
	// CheckExactlyOnce: a delivered delivery not applied at its receiver,
	// or applied (answered "applied") more than once; or an event not
	// routed to exactly the endpoints subscribed to its type.
	CheckExactlyOnce = "exactly_once"
	// CheckOrder: a receiver applied a lane out of order, past a gap that
	// no skip explains, or holds one parked.
	CheckOrder = "order"
	// CheckDeadLetter: a dead letter row whose status disagrees with how
	// its delivery ended (skipped ⇒ skipped; delivered ⇒ replayed; open ⇔
	// the delivery waits dead-lettered).
	CheckDeadLetter = "dead_letter_status"
	// CheckNaming: a replay or skip without endpoint_id was answered 422
	// with one dead letter open, or not 422 (naming both) with two.
	CheckNaming = "naming"
	// CheckStranded: a lane neither complete nor waiting on an open dead
	// letter that the API and the Web UI can still act on.
	CheckStranded = "stranded"
	// CheckUnfinished: a delivery the closing operator replayed or
	// skipped, with the receivers healed, that did not end delivered or
	// skipped.
	CheckUnfinished = "unfinished"
	// CheckVoided: a void answered against the rule (a sequence that
	// arrived voided, or a lost one refused), or a post of a voided
	// sequence not refused 409.
	CheckVoided = "voided"
	// CheckVoidRace5xx: a void racing posts, or one of those posts, was
	// answered 5xx at some try. The runner retries a 5xx, so without this
	// a race lost to a server error (a deadlock between the void's and a
	// post's transactions) would pass the void-race rule on its retry.
	CheckVoidRace5xx = "void_race_5xx"
	// CheckCreateFailed: an endpoint created mid-scenario (StepCreate)
	// was not created: the posts after it would owe it nothing, and the
	// move would check nothing.
	CheckCreateFailed = "create_failed"
	// CheckCreateEffect: the endpoint created mid-scenario got no delivery
	// of the events posted after its create that it takes.
	CheckCreateEffect = "create_no_effect"
	// CheckThrottleEffect: when the throttle move lifted its cap, none of
	// the scenario's events had continued as new, which the move is there
	// to bring about while lanes wait their turn.
	CheckThrottleEffect = "throttle_no_effect"
	// CheckOutageEffect: none of the posts during a Temporal outage was
	// answered queued (left to the starter's sweep), which the move is
	// there to bring about.
	CheckOutageEffect = "outage_no_effect"
	// CheckFilterFailed: an endpoint's filter change mid-scenario
	// (StepFilter) was not answered 200: the posts after it would check
	// nothing of the change.
	CheckFilterFailed = "filter_failed"
)

// modelChecks are the checks in the order the summary lists them.
var modelChecks = []string{CheckSkippedApplied, CheckExactlyOnce, CheckOrder, CheckDeadLetter, CheckNaming, CheckStranded, CheckUnfinished, CheckVoided,
	CheckVoidRace5xx, CheckCreateFailed, CheckCreateEffect, CheckThrottleEffect, CheckOutageEffect, CheckFilterFailed}

// Dead letter row statuses.
const (
	dlOpen     = "open"
	dlReplayed = "replayed"
	dlSkipped  = "skipped"
)

// ModelRecord is what the operator did in a scenario, as far as the
// checks need it.
type ModelRecord struct {
	// SkipAsked are the deliveries a skip was sent for that may have
	// acted: an API skip answered 202 (or not answered at all), a raw skip
	// signal with no generation or the current one (unnamed: every
	// delivery of its event). Only these may end skipped.
	SkipAsked map[Delivery]bool
	// ClosingReplays and ClosingSkips count what the closing operator did,
	// with every receiver healed, per delivery.
	ClosingReplays, ClosingSkips map[Delivery]int
	// Naming are the API's wrong answers to presses without endpoint_id.
	Naming []string
	// Posted are the events the producer posted (the last post of each):
	// its answer, and which endpoints were deleted by then (routing skips
	// them).
	Posted map[string]Post
	// Voided are the events whose sequence a void answered 200 voided.
	Voided map[string]bool
	// Deleted are the endpoints a delete may have deleted (answered 200,
	// or not answered): each of their deliveries may end skipped.
	Deleted [modelEndpoints]bool
	// Uncreated are the endpoints not created yet (Scenario.CreatedLate
	// until its StepCreate is answered): routing passes them by.
	Uncreated [modelEndpoints]bool
	// Void are the answers to voids and to posts of voided sequences that
	// broke the rule.
	Void []string
	// SentBeforeDelete are the deliveries to a deleted endpoint that its
	// receiver had been sent before the delete was answered: one may have
	// been applied with its answer lost, and end skipped at the retry
	// that found the endpoint deleted, hookflow none the wiser.
	SentBeforeDelete map[Delivery]bool
	// VoidRace5xx are the 5xx answers void races got, at any try.
	VoidRace5xx []string
	// CreateFailed are the StepCreates that created nothing.
	CreateFailed []string
	// ContinuedAsNew is, per throttle move, how many of the scenario's
	// events had continued as new when it lifted its cap.
	ContinuedAsNew []int
	// Outages are the outage moves, as their posts were answered.
	Outages []OutageMove
	// FilterFailed are the StepFilters that set no filter.
	FilterFailed []string
}

// OutageMove is what an outage move's posts were answered: how many were
// sent, how many accepted queued; Stopped is whether the move stopped the
// Temporal server (it was running).
type OutageMove struct {
	Stopped       bool
	Posts, Queued int
}

// Post is the answer to an event's post, and the endpoints deleted before
// it was sent.
type Post struct {
	Code          int
	DeletedBefore [modelEndpoints]bool
	// Uncreated are the endpoints not created when it was sent.
	Uncreated [modelEndpoints]bool
	// Filters are the endpoints' filters when it was sent (nil: none).
	Filters [modelEndpoints]*EventFilter
}

func newModelRecord() ModelRecord {
	return ModelRecord{SkipAsked: map[Delivery]bool{}, ClosingReplays: map[Delivery]int{}, ClosingSkips: map[Delivery]int{},
		Posted: map[string]Post{}, Voided: map[string]bool{}, SentBeforeDelete: map[Delivery]bool{}}
}

// Routed reports whether correlation k's event seq is owed a delivery to
// endpoint ep: it was posted (a post not answered 202 owes them all the
// same, so that a lost post shows), not voided, is of a type ep takes, ep
// was created and not deleted before the post, and ep's filter when it was
// posted takes it.
func (sc *Scenario) Routed(rec ModelRecord, k int, seq int64, ep int) bool {
	return sc.subscribed(rec, k, seq, ep) && rec.Posted[sc.EventID(k, seq)].Filters[ep].Takes(sc.Amount(k, seq), sc.Region(k, seq))
}

// subscribed is Routed but for the filter: the event was posted, not
// voided, of a type ep takes, ep created and not deleted before the post.
func (sc *Scenario) subscribed(rec ModelRecord, k int, seq int64, ep int) bool {
	id := sc.EventID(k, seq)
	p, posted := rec.Posted[id]
	return posted && !rec.Voided[id] && !p.DeletedBefore[ep] && !p.Uncreated[ep] && ModelSubscribers()[ep].Wants(sc.Types[k][seq-1])
}

// RoutedLane returns the sequences of correlation k owed to endpoint ep
// (Routed), in order: the lane as hookflow should have it.
func (sc *Scenario) RoutedLane(rec ModelRecord, k, ep int) []int64 {
	var out []int64
	for _, q := range sc.Lane(k, ep) {
		if sc.Routed(rec, k, q, ep) {
			out = append(out, q)
		}
	}
	return out
}

// ModelEvent is how one delivery of a scenario stood once quiet.
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
	// Deliveries are the scenario's deliveries in hookflow's ledger (an
	// endpoint not of the stack has index -1).
	Deliveries map[Delivery]ModelEvent
	// Applied are the sequences a lane's receiver applied, in the order it
	// applied them; Parked the ones it holds parked.
	Applied, Parked map[Lane][]int64
	// AppliedAnswers counts the receivers' "applied" answers per delivery,
	// as the proxy saw them.
	AppliedAnswers map[Delivery]int
	// Heads is how the head stood, per lane with an unfinished delivery.
	Heads map[Lane]Head
	// EndpointIDs are the endpoints' hookflow ids, by index.
	EndpointIDs []string
	// FilteredOut are, per event, the endpoints its row in hookflow's
	// ledger lists as left out by their filter.
	FilteredOut map[string][]int
}

// ModelViolation is one failed check.
type ModelViolation struct {
	Check, Detail string
}

func (v ModelViolation) String() string { return v.Check + ": " + v.Detail }

// CheckModel holds a quiet scenario against the model, lane by lane (a
// lane: a correlation's events routed to one endpoint, e0 or e1):
//
//   - every event has a delivery to exactly the endpoints subscribed to its
//     type;
//   - no delivery that ended skipped, or whose skip its dead letter row
//     records, was applied, and only a delivery an operator asked to skip
//     ended skipped;
//   - every delivered delivery was applied exactly once, and each receiver
//     applied each lane in order, past no gap but the skipped deliveries,
//     with nothing left parked;
//   - each dead letter row agrees with how its delivery ended: skipped ⇒
//     skipped, delivered ⇒ replayed, open ⇔ it waits dead-lettered;
//   - a press without endpoint_id was refused (422, naming both) exactly
//     when two dead letters of its event were open;
//   - each lane is complete, or waits on an open dead letter that its
//     event's running workflow waits on (its state query says that
//     delivery is dead_lettered, with the row's generation);
//   - a delivery the closing operator replayed or skipped with the
//     receivers healed ended delivered or skipped;
//   - each move did what it is there for: a void race got no 5xx at any
//     try, an endpoint created mid-scenario was created and got deliveries
//     of the events posted after it, an outage's posts were accepted
//     queued (some of them), and a throttle's waits let events continue as
//     new.
func CheckModel(sc *Scenario, rec ModelRecord, obs ModelObserved) []ModelViolation {
	var out []ModelViolation
	fail := func(check, format string, args ...any) {
		out = append(out, ModelViolation{check, fmt.Sprintf(format, args...)})
	}
	for _, n := range rec.Naming {
		fail(CheckNaming, "%s", n)
	}
	for _, v := range rec.Void {
		fail(CheckVoided, "%s", v)
	}
	for _, v := range rec.VoidRace5xx {
		fail(CheckVoidRace5xx, "%s", v)
	}
	for _, v := range rec.CreateFailed {
		fail(CheckCreateFailed, "%s", v)
	}
	for _, v := range rec.FilterFailed {
		fail(CheckFilterFailed, "%s", v)
	}
	for i, n := range rec.ContinuedAsNew {
		if n == 0 {
			fail(CheckThrottleEffect, "throttle %d: none of the scenario's events had continued as new when the cap was lifted", i+1)
		}
	}
	for i, o := range rec.Outages {
		if o.Queued == 0 {
			fail(CheckOutageEffect, "outage %d: none of its %d posts was answered queued (the Temporal server stopped: %v)", i+1, o.Posts, o.Stopped)
		}
	}
	for ep, late := range sc.CreatedLate {
		if late && !rec.Uncreated[ep] {
			if owed, got := createdLateRouted(sc, rec, obs, ep); owed > 0 && got == 0 {
				fail(CheckCreateEffect, "e%d, created mid-scenario, has none of the %d deliveries owed to it by the events posted after its create", ep, owed)
			}
		}
	}
	subs := ModelSubscribers()
	for d := range obs.Deliveries {
		if d.Endpoint < 0 {
			fail(CheckExactlyOnce, "%s has a delivery to an endpoint of no subscriber", d.EventID)
		}
	}
	for k, n := range sc.Events {
		corr := sc.CorrelationID(k)
		for q := int64(1); q <= int64(n); q++ {
			for ep := range subs {
				id := sc.EventID(k, q)
				_, routed := obs.Deliveries[Delivery{id, ep}]
				owed := sc.Routed(rec, k, q, ep)
				switch {
				case routed == owed:
				case rec.Voided[id]:
					fail(CheckVoided, "c%d/%d (%s) was voided, yet it has a delivery to e%d", k, q, id, ep)
				case rec.Posted[id].DeletedBefore[ep]:
					fail(CheckExactlyOnce, "c%d/%d (%s), posted after e%d was deleted, was routed to it", k, q, id, ep)
				default:
					fail(CheckExactlyOnce, "c%d/%d (%s) of type %s, amount %d, region %q: routed to e%d is %v, subscribed %v, its filter then %s (posted: %v)",
						k, q, id, sc.Types[k][q-1], sc.Amount(k, q), sc.Region(k, q), ep, routed, subs[ep].Wants(sc.Types[k][q-1]), rec.Posted[id].Filters[ep], rec.Posted[id].Code)
				}
				// An accepted event lists an endpoint in its filtered_out
				// exactly when that endpoint's filter left it out.
				if code := rec.Posted[id].Code; code == http.StatusAccepted || code == http.StatusOK {
					left := sc.subscribed(rec, k, q, ep) && !owed
					if listed := slices.Contains(obs.FilteredOut[id], ep); listed != left {
						fail(CheckExactlyOnce, "c%d/%d (%s), amount %d, region %q: its filtered_out lists e%d is %v, left out by its filter (%s) is %v",
							k, q, id, sc.Amount(k, q), sc.Region(k, q), ep, listed, rec.Posted[id].Filters[ep], left)
					}
				}
			}
		}
		for ep := range subs {
			lane := Lane{corr, ep}
			applied := map[int64]int{}
			for _, q := range obs.Applied[lane] {
				applied[q]++
			}
			seqs := sc.RoutedLane(rec, k, ep)
			state := func(q int64) string { return obs.Deliveries[Delivery{sc.EventID(k, q), ep}].State }
			complete := true
			for _, q := range seqs {
				id := sc.EventID(k, q)
				d := Delivery{id, ep}
				name := fmt.Sprintf("c%d/%d@e%d (%s)", k, q, ep, id)
				ev, known := obs.Deliveries[d]
				switch {
				case !known || ev.State == "":
					complete = false
					continue // routing, above
				case ev.State == stateSkipped && applied[q] > 0 && rec.Deleted[ep] && rec.SentBeforeDelete[d]:
					// Applied before the delete, its answer lost.
				case ev.State == stateSkipped && applied[q] > 0:
					fail(CheckSkippedApplied, "%s ended skipped, yet the receiver applied it", name)
				case ev.DeadLetter == dlSkipped && applied[q] > 0:
					fail(CheckSkippedApplied, "%s was skipped (its dead letter row says so), yet the receiver applied it and it is %s", name, ev.State)
				case ev.State == stateSkipped && !rec.SkipAsked[d] && !rec.Deleted[ep]:
					fail(CheckSkippedApplied, "%s ended skipped, but no operator asked to skip it, nor deleted its endpoint", name)
				case ev.State == stateDelivered && applied[q] == 0:
					fail(CheckExactlyOnce, "%s is delivered in hookflow, but the receiver never applied it", name)
				case ev.State != stateDelivered && ev.State != stateSkipped:
					complete = false
					if applied[q] > 0 {
						fail(CheckExactlyOnce, "%s is %s in hookflow, yet the receiver applied it", name, ev.State)
					}
				}
				if applied[q] > 1 || obs.AppliedAnswers[d] > 1 {
					fail(CheckExactlyOnce, "%s was applied %d times (the receiver answered \"applied\" %d times)", name, applied[q], obs.AppliedAnswers[d])
				}
				switch {
				case ev.State == stateSkipped && ev.DeadLetter == "" && rec.Deleted[ep]:
					// Skipped at its attempt after the delete: no dead letter.
				case ev.State == stateSkipped && ev.DeadLetter != dlSkipped:
					fail(CheckDeadLetter, "%s ended skipped, but its dead letter row says %s", name, rowStatus(ev.DeadLetter))
				case ev.State == stateDelivered && ev.DeadLetter != "" && ev.DeadLetter != dlReplayed:
					fail(CheckDeadLetter, "%s was delivered, but its dead letter row says %s (generation %d)", name, ev.DeadLetter, ev.Generation)
				case ev.State == stateDeadLettered && ev.DeadLetter != dlOpen:
					fail(CheckDeadLetter, "%s waits dead-lettered, but its dead letter row says %s", name, rowStatus(ev.DeadLetter))
				case ev.DeadLetter == dlOpen && ev.State != stateDeadLettered:
					fail(CheckDeadLetter, "%s is %s, but its dead letter row is open (generation %d)", name, ev.State, ev.Generation)
				}
				closing := rec.ClosingReplays[d] + rec.ClosingSkips[d]
				if closing > 0 && ev.State != stateDelivered && ev.State != stateSkipped {
					fail(CheckUnfinished, "%s is %s (dead letter %s, generation %d) after the closing operator's %d replays and %d skips with the receiver healed",
						name, ev.State, rowStatus(ev.DeadLetter), ev.Generation, rec.ClosingReplays[d], rec.ClosingSkips[d])
				}
			}

			// Order: the receiver applied the lane's sequences in order,
			// leaving out only what hookflow skipped, and holds nothing
			// parked; nothing of another lane.
			next := 0 // index into seqs of the next one to apply
			var last int64
			for _, q := range obs.Applied[lane] {
				for next < len(seqs) && seqs[next] < q && state(seqs[next]) == stateSkipped {
					next++
				}
				switch {
				case !slices.Contains(seqs, q):
					fail(CheckOrder, "c%d@e%d: the receiver applied sequence %d, which is not of its lane %v", k, ep, q, seqs)
				case next >= len(seqs) || seqs[next] != q:
					fail(CheckOrder, "c%d@e%d: the receiver applied sequence %d after %d (its lane %v)", k, ep, q, last, seqs)
				default:
					next++
				}
				last = max(last, q)
			}
			if p := obs.Parked[lane]; len(p) > 0 {
				fail(CheckOrder, "c%d@e%d: the receiver holds sequences %v parked, as if an earlier one were missing", k, ep, p)
			}
			switch {
			case !complete && rec.Deleted[ep]:
				var open []string
				for _, q := range seqs {
					if st := state(q); st != stateDelivered && st != stateSkipped {
						open = append(open, fmt.Sprintf("%d %s", q, cmp.Or(st, "not in the ledger")))
					}
				}
				fail(CheckStranded, "c%d@e%d: its endpoint was deleted, yet deliveries of its lane are unfinished: %s", k, ep, strings.Join(open, ", "))
			case !complete:
				if why := modelStrandedWhy(sc, k, ep, obs); why != "" {
					fail(CheckStranded, "c%d@e%d: %s", k, ep, why)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return checkRank(out[i].Check) < checkRank(out[j].Check) })
	return out
}

// createdLateRouted counts the deliveries owed to endpoint ep by the
// events posted after its create (Routed: a post's Uncreated says whether
// ep existed when it was sent), and how many of them are in the ledger.
func createdLateRouted(sc *Scenario, rec ModelRecord, obs ModelObserved, ep int) (owed, got int) {
	for k, n := range sc.Events {
		for q := int64(1); q <= int64(n); q++ {
			if !sc.Routed(rec, k, q, ep) {
				continue
			}
			owed++
			if _, ok := obs.Deliveries[Delivery{sc.EventID(k, q), ep}]; ok {
				got++
			}
		}
	}
	return owed, got
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

// modelStrandedWhy says why unfinished lane ep of correlation k is
// stranded, or "" when its head waits on a dead letter an operator can
// still act on.
func modelStrandedWhy(sc *Scenario, k, ep int, obs ModelObserved) string {
	h, ok := obs.Heads[Lane{sc.CorrelationID(k), ep}]
	if !ok {
		return "its head was not observed"
	}
	id := sc.EventID(k, h.Next)
	why := laneStrandedWhy(id, DeliveryRow(obs.Deliveries[Delivery{id, ep}]), h, at(obs.EndpointIDs, ep))
	if why == "" {
		return ""
	}
	return fmt.Sprintf("(head c%d/%d) %s", k, h.Next, why)
}

// endLines say how each lane and delivery of a scenario ended: the
// ledger's state, the dead letter row, what the receiver applied and holds
// parked, and the head's workflow.
func endLines(sc *Scenario, obs ModelObserved) []string {
	var out []string
	for k := range sc.Events {
		corr := sc.CorrelationID(k)
		for ep := 0; ep < modelEndpoints; ep++ {
			lane := Lane{corr, ep}
			line := fmt.Sprintf("c%d@e%d (lane %v): the receiver applied %v, holds %v parked", k, ep, sc.Lane(k, ep), obs.Applied[lane], obs.Parked[lane])
			if h, ok := obs.Heads[lane]; ok {
				line += fmt.Sprintf("; head c%d/%d, its workflow %s", k, h.Next, h.Workflow)
				l, _ := h.Status.Lane(at(obs.EndpointIDs, ep))
				switch {
				case h.QueryErr != "":
					line += " (" + h.QueryErr + ")"
				case h.Workflow == "running":
					line += fmt.Sprintf(" (the delivery %s, generation %d; the event %s)", cmp.Or(string(l.State), "unknown"), l.Generation, h.Status.State)
				}
			}
			out = append(out, line)
			for _, q := range sc.Lane(k, ep) {
				d := Delivery{sc.EventID(k, q), ep}
				ev := obs.Deliveries[d]
				dl := "no dead letter"
				if ev.DeadLetter != "" {
					dl = fmt.Sprintf("dead letter %s (generation %d)", ev.DeadLetter, ev.Generation)
				}
				out = append(out, fmt.Sprintf("c%d/%d@e%d: %s, %s, \"applied\" answers %d", k, q, ep, cmp.Or(ev.State, "not in the ledger"), dl, obs.AppliedAnswers[d]))
			}
		}
	}
	return out
}
