package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/services/refreceiver"
)

// Final event states in hookflow's ledger.
const (
	stateDelivered    = "delivered"
	stateDeadLettered = "dead_lettered"
	stateSkipped      = "skipped"
)

// LedgerEntry is one row of an endpoint's ledger at its receiver (or of
// its processed_events, which keep no amount), in the order the receiver
// applied them, named by the endpoint's tenant's keys (Key).
type LedgerEntry struct {
	EventID       string
	CorrelationID string
	Sequence      int64
	Amount        int64
}

// DeliveryRow is a delivery as hookflow's ledger has it: its state and its
// dead letter row's status and generation ("" and 0 without one).
type DeliveryRow struct {
	State      string
	DeadLetter string
	Generation int32
}

// Observed is everything the checks look at, gathered after the run.
// Endpoints are named by their index in the workload's Subscribers.
type Observed struct {
	// Accepted are the event ids the API answered 2xx for.
	Accepted map[string]bool
	// Rejected describes posts the API refused for good (4xx).
	Rejected []string
	// States is hookflow's events table: event id → (aggregate) state.
	States map[string]string
	// Deliveries is hookflow's deliveries table with each delivery's dead
	// letter.
	Deliveries map[Delivery]DeliveryRow
	// Ledger is each endpoint's receiver's ledger_entries in application
	// order, Processed its receiver kit's processed_events, Parked how
	// many events it still holds parked.
	Ledger, Processed [][]LedgerEntry
	Parked            []int
	// Receiver is each endpoint's receiver's GET /correlations/{id}, per
	// correlation it knows.
	Receiver []map[string]refreceiver.Correlation
	// AppliedAnswers counts the receivers' "applied" answers per delivery,
	// as the proxy saw them.
	AppliedAnswers map[Delivery]int
	// Skipped are the deliveries an operator asked to skip, unless the API
	// refused it (409). Only these may end skipped.
	Skipped map[Delivery]bool
	// DoubleClaims describes the dead letters whose two concurrent clicks
	// (replays, or a replay and a skip) were both answered 202.
	DoubleClaims []string
	// Heads is how the head stood, per lane with an unfinished delivery.
	Heads map[Lane]Head
	// EndpointIDs are the endpoints' hookflow ids, by index.
	EndpointIDs []string
	// PostgresRestartFailures counts the Postgres restarts of the schedule
	// after which Postgres did not come back.
	PostgresRestartFailures int
	// Unverified are the deliveries the receivers refused to verify
	// (signature, timestamp or headers), per receiver process: the run
	// injects none, so each is a delivery that reached a receiver with
	// another's secret, or was signed wrong.
	Unverified map[string]int
	// Breaker is what the flapping endpoint's outages did to its circuit
	// breaker; nil when no endpoint flapped (a calm run).
	Breaker *BreakerObserved
	// Situations is what the run did of its situations and what came of
	// them; nil for none.
	Situations *SituationsObserved
	// Brokers is what each broker destination holds against the ledger;
	// BrokerKillFailures counts the broker kills after which the broker
	// did not start again.
	Brokers            []BrokerObserved
	BrokerKillFailures int
	// FilteredOut is, per event, the endpoints (by index) its row in
	// hookflow's ledger lists as left out by their filter; Previous the
	// previous_sequence values each delivery's envelopes carried (the
	// proxy's).
	FilteredOut map[string][]int
	Previous    map[Delivery][]int64
}

// SituationsObserved is what the run did of its situations (Situations,
// Workload.Voided) and what came of them. Endpoints are by index, -1 for
// none.
type SituationsObserved struct {
	Paused, Slow, Deleted int

	// PauseDone: the paused endpoint was disabled and enabled again, after
	// PausedFor; PauseResumedAnswer is the resumed_dead_letters the enabling
	// answered. PauseDeadLetters are its dead letters whose reason says it
	// was disabled, once quiet, PauseResumed those of them hookflow
	// replayed itself (contract.EndpointEnabledBy). PauseLeftOpen are the
	// ones the enabling left open, which the operator replayed.
	PauseDone                      bool
	PausedFor                      time.Duration
	PauseResumedAnswer             int
	PauseDeadLetters, PauseResumed int
	PauseLeftOpen                  []string

	// DeleteDone: the deleted endpoint's delete was answered 200, at
	// DeletedAt, and a GET of it then GoneStatus (404). RoutedBefore are
	// the events accepted before the delete was sent (each owed a delivery
	// to it), PostedAfter those whose first post began after it was
	// answered (owed none), SentBefore the events of its deliveries the
	// proxy had a request for by then (an attempt in flight at the delete
	// may land). DeleteSkippedDeadLetters is what the delete answered.
	DeleteDone                            bool
	DeletedAt                             time.Time
	GoneStatus, DeleteSkippedDeadLetters  int
	RoutedBefore, PostedAfter, SentBefore map[string]bool

	// VoidAnswers is, per correlation of Workload.Voided, how the void was
	// answered (200), VoidPosts how the later post of the voided sequence
	// was (409); SkippedSeen the skipped_sequences each lane's envelopes
	// carried.
	VoidAnswers, VoidPosts map[string]int
	SkippedSeen            map[Lane][]int64

	// SlowHeld counts the slow endpoint's requests the proxy held, SlowMost
	// the most it had at once, SlowInFlight its max_in_flight.
	SlowHeld, SlowMost int64
	SlowInFlight       int

	// NotCarriedOut are the situations the run could not carry out.
	NotCarriedOut []string
}

// situations returns o's situations, or none.
func (o Observed) situations() SituationsObserved {
	if o.Situations == nil {
		return SituationsObserved{Paused: -1, Slow: -1, Deleted: -1}
	}
	return *o.Situations
}

// BreakerObserved is the flapping endpoint's circuit breaker over the run:
// its outages as the proxy made them, its transitions as the operational
// events published in their transactions tell them, and its state once
// quiet.
type BreakerObserved struct {
	Outages []Outage
	// Opens counts the times its circuit opened; Spells are the times it
	// was open and closed again, as each circuit_closed event tells it.
	Opens  int
	Spells []Spell
	// AttemptsWhileDown are the requests its receiver got while down.
	AttemptsWhileDown int64
	// HeadsAtOutage is, per outage, how many of its deliveries were
	// released and not finished when the outage began; Window their
	// recovery window. An unbroken retry schedule would have sent each of
	// them its attempts of the outage (UnbrokenAttempts).
	HeadsAtOutage []int
	Window        time.Duration
	// AutoReplayed counts the dead letters hookflow replayed itself.
	AutoReplayed int
	// LeftOpen are the dead letters of its outages the operator replayed
	// because auto-replay had left them open.
	LeftOpen []LeftOpen
	// FinalState is its circuit's state once quiet.
	FinalState string
}

// Spell is one time the circuit was open: from the first failure of its
// run of failures, through its opening, to its close.
type Spell struct {
	FailingSince, OpenedAt, ClosedAt time.Time
}

// Unbroken is how many attempts an unbroken retry schedule would have sent
// the flapping endpoint while it was down: each delivery in flight when
// an outage began retried through it (UnbrokenAttempts), not counting
// those released during it. It is a floor, to hold the attempts the
// breaker let through against.
func (b *BreakerObserved) Unbroken() int {
	n := 0
	for i, out := range b.Outages {
		if i < len(b.HeadsAtOutage) && !out.To.IsZero() {
			n += b.HeadsAtOutage[i] * UnbrokenAttempts(min(out.To.Sub(out.From), b.Window))
		}
	}
	return n
}

// UnbrokenAttempts is how many attempts the delivery retry policy makes
// within d of a first failure: at 0, 1, 5, 21, 85 s, … (initial 1 s,
// coefficient 4).
func UnbrokenAttempts(d time.Duration) int {
	n := 0
	for at, gap := time.Duration(0), time.Second; at < d; at, gap = at+gap, 4*gap {
		n++
	}
	return n
}

// Head is how a lane's head (its first delivery not delivered or skipped)
// stood after quiet.
type Head struct {
	// Next is the head's sequence (0: the lane has no unfinished delivery
	// in hookflow's ledger).
	Next int64
	// Generation is the head's dead letter's generation (0: it has none).
	Generation int32
	// Workflow is the status of its event's workflow: "running",
	// "terminated", "not found", …
	Workflow string
	// Status is what the running workflow answered to QueryState; QueryErr
	// why it could not be read.
	Status   contract.EventStatus
	QueryErr string
}

// Verdict is the outcome of the checks. The counts are per (correlation,
// endpoint) lane, summed over the lanes: a delivery lost, applied twice or
// out of order in its lane.
type Verdict struct {
	Events     int // accepted events
	Deliveries int // the deliveries the accepted events are owed (routed by type)
	Lanes      int // (correlation, endpoint) lanes with at least one delivery
	Applied    int // ledger entries, all receivers
	// DeadLettered counts the deliveries that got a dead letter row at some
	// point.
	DeadLettered    int
	Lost            int
	Duplicates      int
	OrderViolations int
	Stuck           int // deliveries in a non-final state
	Mismatches      int // hookflow and a receiver disagree, a misrouted delivery, or a balance is off
	NotAccepted     int // workload events never accepted
	Skipped         int // deliveries that ended skipped (by the run's operator)
	// Stranded counts the lanes that are neither complete nor waiting on a
	// dead letter an operator can still replay or skip.
	Stranded int
	// DoubleClaims counts the dead letters two concurrent clicks both won.
	DoubleClaims int
	// PostgresRestartFailures counts the Postgres restarts that did not
	// come back: the run's faults did not go as planned.
	PostgresRestartFailures int
	// Unverified counts the deliveries the receivers refused to verify
	// (Observed.Unverified).
	Unverified int
	// Breaker counts what the flapping endpoint's circuit breaker did not
	// do (checkBreaker); BreakerOpens, BreakerCloses, AttemptsWhileDown and
	// Unbroken are its figures.
	Breaker                                                  int
	BreakerOpens, BreakerCloses, AttemptsWhileDown, Unbroken int
	// Situations counts what the situations did not do (checkSituations);
	// the rest are their figures: pauses carried out and the dead letters
	// of the pause (resumed by hookflow), sequences voided (and their
	// later posts answered 409), deletes, the deleted endpoint's
	// deliveries delivered, skipped and never routed, and the slow
	// endpoint's held requests and most at once.
	Situations                                int
	Pauses, PauseDeadLetters, PauseResumed    int
	Voids, Void409s                           int
	Deletes, DeletedDelivered, DeletedSkipped int
	DeletedUnrouted                           int
	SlowHeld, SlowMost                        int64
	// The broker destinations' figures (checkBrokers), summed over them:
	// their lanes, the deliveries the ledger delivered into them and the
	// dead letters and failed attempts they had; what the brokers lack of those, hold twice,
	// out of order, with a broken previous_sequence chain, with a bad
	// signature (or of another endpoint); their deliveries neither
	// delivered nor skipped once quiet, and the kills after which a
	// broker did not come back.
	BrokerLanes, BrokerDelivered, BrokerDeadLettered int
	BrokerFailedAttempts                             int
	BrokerMissing, BrokerRepeated, BrokerOutOfOrder  int
	BrokerChainBreaks, BrokerBadSignatures           int
	BrokerUnfinished, BrokerKillFailures             int
	// The filtered endpoints' figures (checkFiltered): how many have a
	// filter, the accepted events of their types their filter left out,
	// their deliveries delivered, and what broke the filter's promise.
	FilteredEndpoints, FilteredOut, FilteredDelivered, FilteredViolations int
	// CrossTenant counts what one tenant's endpoint got of another
	// tenant: a delivery in hookflow's ledger, an entry in its receiver's
	// ledger with the other tenant's amount.
	CrossTenant int
	// Tenants is each tenant's share of the lanes, in Workload.Tenants
	// order.
	Tenants []TenantVerdict
	Details []string
	// failed are the lanes a violation was found in.
	failed map[Lane]bool
}

// TenantVerdict is one tenant's lanes: its correlations and those whose
// every lane passed every lane check (no loss, duplicate, order
// violation, mismatch, stuck or stranded delivery), its lanes and those
// that passed, and the deliveries its receivers' lanes applied.
type TenantVerdict struct {
	Tenant               string
	Correlations, Passed int
	Lanes, LanesPassed   int
	Applied              int
}

// laneFaults sums the counts a lane's checks add to.
func (v *Verdict) laneFaults() int {
	return v.Lost + v.Duplicates + v.OrderViolations + v.Stuck + v.Mismatches + v.Situations + v.CrossTenant + v.FilteredViolations
}

// OK reports whether every invariant held.
func (v Verdict) OK() bool {
	return v.Lost == 0 && v.Duplicates == 0 && v.OrderViolations == 0 && v.Stuck == 0 && v.Mismatches == 0 && v.NotAccepted == 0 &&
		v.Stranded == 0 && v.DoubleClaims == 0 && v.PostgresRestartFailures == 0 && v.Unverified == 0 && v.Breaker == 0 && v.Situations == 0 && v.CrossTenant == 0 &&
		v.FilteredViolations == 0 && v.brokersOK()
}

// brokersOK reports whether every broker destination kept its promise.
func (v Verdict) brokersOK() bool {
	return v.BrokerMissing == 0 && v.BrokerRepeated == 0 && v.BrokerOutOfOrder == 0 && v.BrokerChainBreaks == 0 && v.BrokerBadSignatures == 0 &&
		v.BrokerUnfinished == 0 && v.BrokerKillFailures == 0
}

func (v *Verdict) note(format string, args ...any) {
	if len(v.Details) < 30 {
		v.Details = append(v.Details, fmt.Sprintf(format, args...))
	}
}

// Check holds the run's observations against the invariants, lane by lane
// (a lane is a correlation's events whose type one endpoint subscribes to,
// in sequence order: what that endpoint's receiver must apply):
//
//   - every workload event was accepted, and hookflow routed it to exactly
//     the endpoints subscribed to its type (else: mismatch);
//   - every delivery an accepted event is owed is in a final state, and is
//     applied at its endpoint's receiver exactly when hookflow says
//     delivered; a dead-lettered or skipped delivery has a dead letter row,
//     and only a delivery an operator skipped is skipped (else: lost);
//   - no event id and no (correlation, sequence) is applied twice by one
//     receiver, and no receiver answered "applied" twice for one delivery
//     (duplicates);
//   - each receiver applied each lane's sequences exactly, in order: the
//     lane's events but the skipped ones, nothing of another lane (the
//     receiver takes an event only on the cursor its previous_sequence
//     names), and hookflow's delivered set is that same prefix (order);
//   - each receiver's balance is the sum of its applied amounts, its
//     processed_events match its ledger, nothing is left parked;
//   - every lane is complete, or its head is dead-lettered with an open
//     dead letter and its event's workflow runs and says that delivery
//     waits on that generation, so an operator can still replay or skip it
//     (else: stranded);
//   - no two concurrent clicks on one dead letter were both taken, and
//     every Postgres restart came back;
//   - the flapping endpoint's breaker did its part (checkBreaker);
//   - nothing of one tenant reached another's endpoint: hookflow routed
//     each event to its own tenant's endpoints only, and each receiver
//     lane holds its endpoint's tenant's events only, told apart by
//     amount (tenantAmounts), since the tenants share event IDs (else:
//     cross-tenant).
//
// Every lane check holds per tenant: a lane is one tenant's (correlation,
// endpoint), and Verdict.Tenants says how many of each tenant's passed.
func Check(w *Workload, o Observed) Verdict {
	v := Verdict{failed: map[Lane]bool{}}
	byID := make(map[string]Event, len(w.Events))
	for _, ev := range w.Events {
		byID[ev.ID] = ev
		switch {
		case w.IsVoided(ev) && o.Accepted[ev.ID]:
			v.Situations++
			v.note("void: %s, the sequence %s's producer lost and the operator voided, was accepted", ev.ID, ev.CorrelationID)
		case w.IsVoided(ev):
		case !o.Accepted[ev.ID]:
			v.NotAccepted++
			v.note("event %s was never accepted by the API", ev.ID)
		}
	}
	for _, r := range o.Rejected {
		v.note("post rejected: %s", r)
	}
	v.Events = len(o.Accepted)
	name := func(ep int) string { return w.Subscribers[ep].Name }
	for d, row := range o.Deliveries {
		ev, ok := byID[d.EventID]
		switch {
		case !ok:
			continue
		case d.Endpoint < 0 || d.Endpoint >= len(w.Subscribers):
			v.Mismatches++
			v.note("misrouted: %s has a delivery to an endpoint of no subscriber", d.EventID)
			continue
		case w.Subscribers[d.Endpoint].tenant() != ev.Tenant:
			v.CrossTenant++
			_, corr := Split(ev.CorrelationID) // the lane of that name there took it
			v.failed[Lane{Key(w.Subscribers[d.Endpoint].tenant(), corr), d.Endpoint}] = true
			v.note("cross-tenant: %s, of tenant %s, was routed to %s, of tenant %s", d.EventID, ev.Tenant, name(d.Endpoint), w.Subscribers[d.Endpoint].tenant())
		case !w.Routes(ev, d.Endpoint):
			v.Mismatches++
			v.note("misrouted: %s (%s) was routed to %s, %s", d.EventID, ev.Type, name(d.Endpoint), whyNot(w, ev, d.Endpoint, "which does not subscribe to it"))
		case w.IsVoided(ev):
			v.Mismatches++
			v.note("void: %s, a voided sequence, has a delivery to %s (%s)", d.EventID, name(d.Endpoint), row.State)
		}
		if row.DeadLetter != "" {
			v.DeadLettered++
		}
	}
	for id, n := range o.AppliedAnswers {
		if n > 1 {
			v.Duplicates++
			v.note("duplicate: %s's receiver answered \"applied\" %d times for %s", name(id.Endpoint), n, id.EventID)
		}
	}
	for ep := range w.Subscribers {
		checkReceiver(w, o, ep, byID, &v)
	}
	checkFiltered(w, o, &v)
	v.Stranded = stranded(w, o, &v)
	v.DoubleClaims = len(o.DoubleClaims)
	for _, d := range o.DoubleClaims {
		v.note("double claim: two concurrent clicks on one dead letter were both answered 202: %s", d)
	}
	if v.PostgresRestartFailures = o.PostgresRestartFailures; v.PostgresRestartFailures > 0 {
		v.note("postgres did not come back after %d of its restarts; the run did not go as planned", v.PostgresRestartFailures)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Unverified)) {
		if o.Unverified[name] == 0 {
			continue
		}
		v.Unverified += o.Unverified[name]
		v.note("unverified: %s refused to verify %d deliveries (its log says why); the run signs every one with the secret of the receiver its endpoint points at", name, o.Unverified[name])
	}
	if o.Breaker != nil {
		checkBreaker(*o.Breaker, &v)
	}
	if o.Situations != nil {
		checkSituations(w, o, *o.Situations, &v)
	}
	checkBrokers(o.Brokers, &v)
	if v.BrokerKillFailures = o.BrokerKillFailures; v.BrokerKillFailures > 0 {
		v.note("a broker did not start again after %d of its kills; the run did not go as planned", v.BrokerKillFailures)
	}
	v.Tenants = tenantVerdicts(w, o, v.failed)
	return v
}

// whyNot says why ev is not meant for endpoint ep: its filter, or else
// unsubscribed.
func whyNot(w *Workload, ev Event, ep int, unsubscribed string) string {
	if f := w.Subscribers[ep].Filter; w.Subscribes(ev, ep) && f != nil {
		return fmt.Sprintf("whose filter (%s) leaves it out (amount %d)", f, ev.Amount)
	}
	return unsubscribed
}

// checkFiltered holds each endpoint with a filter to what a filter
// promises: hookflow decided at acceptance, and kept with the event, which
// events of its types the endpoint takes.
//
//   - an event its filter leaves out lists it in filtered_out, has no
//     delivery to it and was never applied at its receiver;
//   - an event its filter takes does not list it in filtered_out (that it
//     was delivered, in order and once, is the lane checks', whose lanes
//     hold only the events it takes);
//   - every envelope of a delivery its receiver applied named, as
//     previous_sequence, the sequence the receiver applied just before it
//     in that lane (0 for the first): a filtered-out event is never
//     named, so the receiver never waits for it.
func checkFiltered(w *Workload, o Observed, v *Verdict) {
	for ep, s := range w.Subscribers {
		if s.Filter == nil {
			continue
		}
		v.FilteredEndpoints++
		name := s.Name
		fail := func(lane Lane, format string, args ...any) {
			v.FilteredViolations++
			v.failed[lane] = true
			v.note("filter: "+format, args...)
		}
		applied := map[string]bool{}
		for _, e := range at(o.Ledger, ep) {
			applied[e.EventID] = true
		}
		for _, ev := range w.Events {
			if !o.Accepted[ev.ID] || !w.Subscribes(ev, ep) {
				continue
			}
			lane := Lane{ev.CorrelationID, ep}
			listed := slices.Contains(o.FilteredOut[ev.ID], ep)
			row, routed := o.Deliveries[Delivery{ev.ID, ep}]
			if !w.Routes(ev, ep) {
				v.FilteredOut++
				switch {
				case !listed:
					fail(lane, "%s (amount %d) is left out by %s's filter (%s), but its filtered_out does not list it", ev.ID, ev.Amount, name, s.Filter)
				case routed:
					fail(lane, "%s (amount %d), left out by %s's filter (%s), has a delivery to it (%s)", ev.ID, ev.Amount, name, s.Filter, row.State)
				case applied[ev.ID]:
					fail(lane, "%s (amount %d), left out by %s's filter (%s), was applied at its receiver", ev.ID, ev.Amount, name, s.Filter)
				}
				continue
			}
			if listed {
				fail(lane, "%s (amount %d) is taken by %s's filter (%s), yet its filtered_out lists it", ev.ID, ev.Amount, name, s.Filter)
			}
			if routed && row.State == stateDelivered {
				v.FilteredDelivered++
			}
		}
		// The previous_sequence chain, lane by lane, as the receiver
		// applied it.
		last := map[string]int64{}
		for _, e := range at(o.Ledger, ep) {
			want := last[e.CorrelationID]
			last[e.CorrelationID] = e.Sequence
			for _, prev := range o.Previous[Delivery{e.EventID, ep}] {
				if prev != want {
					fail(Lane{e.CorrelationID, ep}, "%s's envelope to %s named previous_sequence %d; the lane's previous event there is %d", e.EventID, name, prev, want)
				}
			}
		}
	}
}

// tenantVerdicts tallies each tenant's lanes and correlations, and those
// with no violation.
func tenantVerdicts(w *Workload, o Observed, failed map[Lane]bool) []TenantVerdict {
	out := make([]TenantVerdict, len(w.Tenants))
	for i, t := range w.Tenants {
		out[i].Tenant = t
	}
	of := func(tenant string) *TenantVerdict {
		i := slices.Index(w.Tenants, tenant)
		if i < 0 {
			return nil
		}
		return &out[i]
	}
	for _, corr := range w.Correlations {
		tenant, _ := Split(corr)
		tv := of(tenant)
		if tv == nil {
			continue
		}
		tv.Correlations++
		passed := true
		for ep := range w.Subscribers {
			if len(w.Lane(corr, ep)) == 0 {
				continue
			}
			tv.Lanes++
			if failed[Lane{corr, ep}] {
				passed = false
			} else {
				tv.LanesPassed++
			}
		}
		if passed {
			tv.Passed++
		}
	}
	for ep, s := range w.Subscribers {
		if tv := of(s.tenant()); tv != nil {
			tv.Applied += len(at(o.Ledger, ep))
		}
	}
	return out
}

// checkSituations holds what the situations must have done, besides what
// the lane checks hold of every lane (the paused and slow endpoints' lanes
// complete and in order, the deleted endpoint's ended, every lane of a
// voided sequence's correlation past it):
//
//   - each was carried out: the pause (disabled, then enabled), the
//     delete, after which the endpoint answers 404, and each void (200);
//   - enabling the paused endpoint replayed every dead letter its
//     disabling wrote: none was left open for the operator;
//   - each voided sequence, posted again after its void, was refused as
//     taken (409), and every lane of its correlation with an event after
//     it delivered was told of it (skipped_sequences).
func checkSituations(w *Workload, o Observed, s SituationsObserved, v *Verdict) {
	v.PauseDeadLetters, v.PauseResumed = s.PauseDeadLetters, s.PauseResumed
	v.SlowHeld, v.SlowMost = s.SlowHeld, s.SlowMost
	for _, msg := range s.NotCarriedOut {
		v.Situations++
		v.note("situation not carried out: %s", msg)
	}
	if s.Paused >= 0 && s.PauseDone {
		v.Pauses++
	}
	for _, d := range s.PauseLeftOpen {
		v.Situations++
		v.note("pause: enabling %s left its dead letter %s open; the operator replayed it", w.Subscribers[s.Paused].Name, d)
	}
	if s.Deleted >= 0 && s.DeleteDone {
		v.Deletes++
		if s.GoneStatus != http.StatusNotFound {
			v.Situations++
			v.note("delete: %s, deleted, then answered %d, not 404", w.Subscribers[s.Deleted].Name, s.GoneStatus)
		}
	}
	for _, corr := range slices.Sorted(maps.Keys(w.Voided)) {
		seq := w.Voided[corr]
		if s.VoidAnswers[corr] != http.StatusOK {
			v.Situations++
			v.note("void: voiding %s sequence %d was answered %d", corr, seq, s.VoidAnswers[corr])
			continue
		}
		v.Voids++
		if s.VoidPosts[corr] == http.StatusConflict {
			v.Void409s++
		} else {
			v.Situations++
			v.note("void: %s sequence %d, voided, was posted again and answered %d, not 409", corr, seq, s.VoidPosts[corr])
		}
		for ep := range w.Subscribers {
			told := slices.Contains(s.SkippedSeen[Lane{corr, ep}], seq)
			for _, ev := range w.Lane(corr, ep) {
				if ev.Sequence > seq && o.Deliveries[Delivery{ev.ID, ep}].State == stateDelivered && !told {
					v.Situations++
					v.note("void: %s at %s delivered %s past voided sequence %d, and no envelope of the lane listed it in skipped_sequences", corr, w.Subscribers[ep].Name, ev.ID, seq)
					break
				}
			}
		}
	}
}

// checkBreaker holds the flapping endpoint's circuit breaker to what it is
// for, by counts, never by how long anything took:
//
//   - it was open during one of the outages at least once (opened by it, or
//     by a 5xx burst just before), and closed again after that;
//   - the attempts the receiver got while down are at most half of what an
//     unbroken retry schedule would have sent (BreakerObserved.Unbroken);
//   - no dead letter that an outage wrote between its first failure and its
//     close was left open for the operator after that close: auto_replay
//     replays those. One the operator replayed before the close was written
//     while the circuit was closed between two opens that the breaker
//     counts as one outage (a reopen within store.FlapReopenMultiple
//     backoffs keeps failing_since): that close's auto-replay would have
//     taken it, and the operator only came first;
//   - once quiet, its circuit is closed.
func checkBreaker(b BreakerObserved, v *Verdict) {
	v.BreakerOpens, v.BreakerCloses = b.Opens, len(b.Spells)
	v.AttemptsWhileDown, v.Unbroken = int(b.AttemptsWhileDown), b.Unbroken()
	if !slices.ContainsFunc(b.Spells, func(s Spell) bool { return overlaps(s, b.Outages) }) {
		v.Breaker++
		v.note("breaker: the flapping endpoint's circuit was not open and closed again around any of its %d outages (it opened %d times, closed %d)", len(b.Outages), b.Opens, len(b.Spells))
	}
	if 2*v.AttemptsWhileDown > v.Unbroken {
		v.Breaker++
		v.note("breaker: the flapping endpoint got %d attempts while down, not far below the %d of an unbroken retry schedule", v.AttemptsWhileDown, v.Unbroken)
	}
	for _, d := range b.LeftOpen {
		for _, s := range b.Spells {
			if !d.DeadLetteredAt.Before(s.FailingSince) && !d.DeadLetteredAt.After(s.ClosedAt) && d.ReplayedAt.After(s.ClosedAt) {
				v.Breaker++
				v.note("breaker: auto-replay left open %s's dead letter (generation %d, %q, written %s), written during the outage that closed at %s",
					d.EventID, d.Generation, d.Reason, d.DeadLetteredAt.Format(time.TimeOnly), s.ClosedAt.Format(time.TimeOnly))
				break
			}
		}
	}
	if b.FinalState != "closed" {
		v.Breaker++
		v.note("breaker: the flapping endpoint's circuit is %q once quiet, not closed", b.FinalState)
	}
}

// overlaps reports whether the circuit was open during one of the outages:
// opened before or during it, and closed after it began.
func overlaps(s Spell, outages []Outage) bool {
	for _, o := range outages {
		if !s.OpenedAt.After(o.To) && s.ClosedAt.After(o.From) {
			return true
		}
	}
	return false
}

// at returns element i of a per-endpoint slice, or the zero value.
func at[T any](s []T, i int) T {
	var zero T
	if i < 0 || i >= len(s) {
		return zero
	}
	return s[i]
}

// checkReceiver holds endpoint ep's receiver and hookflow's deliveries to
// ep against its lanes.
func checkReceiver(w *Workload, o Observed, ep int, byID map[string]Event, v *Verdict) {
	name := w.Subscribers[ep].Name
	v.Applied += len(at(o.Ledger, ep))
	// applied per event id and per (correlation, sequence); the order in
	// which the receiver applied each lane.
	appliedID := map[string]int{}
	appliedSeq := map[string]map[int64]int{}
	order := map[string][]LedgerEntry{}
	amounts := map[string]int64{}
	for _, e := range at(o.Ledger, ep) {
		appliedID[e.EventID]++
		if appliedID[e.EventID] == 2 {
			v.Duplicates++
			v.note("duplicate: %s applied %s more than once", name, e.EventID)
		}
		if appliedSeq[e.CorrelationID] == nil {
			appliedSeq[e.CorrelationID] = map[int64]int{}
		}
		appliedSeq[e.CorrelationID][e.Sequence]++
		if appliedSeq[e.CorrelationID][e.Sequence] == 2 {
			v.Duplicates++
			v.note("duplicate: %s applied %s sequence %d more than once", name, e.CorrelationID, e.Sequence)
		}
		ev, ok := byID[e.EventID]
		switch {
		case !ok:
			v.Mismatches++
			v.note("%s applied %s, which the workload never sent", name, e.EventID)
			continue
		case e.Amount != ev.Amount:
			// The tenants share event IDs: an entry with another tenant's
			// amount is that tenant's event, applied in this one's lane.
			v.failed[Lane{e.CorrelationID, ep}] = true
			if other, ok := crossedFrom(w, e, byID); ok {
				v.CrossTenant++
				v.note("cross-tenant: %s (tenant %s) applied %s of tenant %s", name, ev.Tenant, e.EventID, other)
			} else {
				v.Mismatches++
				v.note("%s applied %s with amount %d, sent with %d", name, e.EventID, e.Amount, ev.Amount)
			}
			continue
		case ev.CorrelationID != e.CorrelationID || ev.Sequence != e.Sequence:
			v.Mismatches++
			v.note("%s applied %s as %s/%d, sent as %s/%d", name, e.EventID, e.CorrelationID, e.Sequence, ev.CorrelationID, ev.Sequence)
			continue
		case !w.Routes(ev, ep):
			v.Mismatches++
			v.note("misrouted: %s applied %s (%s), %s", name, e.EventID, ev.Type, whyNot(w, ev, ep, "which it does not subscribe to"))
		case w.IsVoided(ev):
			v.Mismatches++
			v.note("void: %s applied %s, a voided sequence", name, e.EventID)
		}
		order[e.CorrelationID] = append(order[e.CorrelationID], e)
		amounts[e.CorrelationID] += ev.Amount
	}

	for _, corr := range w.Correlations {
		lane := w.Lane(corr, ep)
		if len(lane) == 0 {
			continue
		}
		v.Lanes++
		faults := v.laneFaults()
		checkLane(w, o, ep, corr, lane, appliedID, appliedSeq, order[corr], amounts[corr], v)
		if v.laneFaults() != faults {
			v.failed[Lane{corr, ep}] = true
		}
	}

	// The receiver's own bookkeeping.
	if len(at(o.Processed, ep)) != len(at(o.Ledger, ep)) {
		v.Mismatches++
		v.note("%s's receiver: %d processed_events rows but %d ledger entries", name, len(at(o.Processed, ep)), len(at(o.Ledger, ep)))
	}
	if n := at(o.Parked, ep); n > 0 {
		v.OrderViolations++
		v.note("%s's receiver: %d events left parked (sent ahead of their previous_sequence)", name, n)
	}
}

// crossedFrom reports whether ledger entry e, which does not carry the
// amount of its tenant's event, carries that of another tenant's event of
// the same ID, and which tenant's.
func crossedFrom(w *Workload, e LedgerEntry, byID map[string]Event) (string, bool) {
	i := int((e.Amount - 1) / tenantAmounts)
	if e.Amount < 1 || i >= len(w.Tenants) {
		return "", false
	}
	tenant, own := Split(e.EventID)
	other := w.Tenants[i]
	if other == tenant {
		return "", false
	}
	ev, ok := byID[Key(other, own)]
	return other, ok && ev.Amount == e.Amount
}

// checkLane holds one lane of endpoint ep (correlation corr's events
// meant for it, in order) against hookflow's deliveries and what ep's
// receiver applied: got is the lane's entries in application order,
// amount their sum.
func checkLane(w *Workload, o Observed, ep int, corr string, lane []Event, appliedID map[string]int, appliedSeq map[string]map[int64]int, got []LedgerEntry, amount int64, v *Verdict) {
	name := w.Subscribers[ep].Name
	sit := o.situations()
	// want: the lane's sequences the receiver must apply, in order (all
	// but the skipped deliveries); delivered: hookflow's say.
	var want []int64
	finished := true
	for _, ev := range lane {
		if !o.Accepted[ev.ID] {
			continue
		}
		d := Delivery{ev.ID, ep}
		row, known := o.Deliveries[d]
		applied := appliedID[ev.ID] > 0
		if ep == sit.Deleted {
			// The deleted endpoint's own rules; what it applied is held
			// to the lane order below like any endpoint's.
			switch checkDeleted(ev, row, known, applied, name, sit, v) {
			case deletedOwed:
				want = append(want, ev.Sequence)
			case deletedUnfinished:
				finished = false
			}
			continue
		}
		v.Deliveries++
		switch {
		case !known:
			v.Lost++
			v.note("lost: %s was accepted but has no delivery to %s in hookflow's ledger", ev.ID, name)
			finished = false
		case row.State == stateDelivered && !applied:
			v.Lost++
			v.note("lost: %s is delivered to %s in hookflow but not applied there", ev.ID, name)
		case row.State == stateDelivered:
			if row.DeadLetter == dlOpen {
				v.Mismatches++
				v.note("mismatch: %s is delivered to %s, yet its dead letter is open for an operator to replay or skip", ev.ID, name)
			}
		case row.State == stateSkipped && !o.Skipped[d]:
			v.Lost++
			v.note("lost: %s's delivery to %s is skipped, but no operator skipped it", ev.ID, name)
		case row.State == stateDeadLettered || row.State == stateSkipped:
			if row.State == stateSkipped {
				v.Skipped++
			} else {
				finished = false
			}
			if row.DeadLetter == "" {
				v.Lost++
				v.note("lost: %s's delivery to %s is %s without a dead letter row", ev.ID, name, row.State)
			}
			if applied && row.State == stateSkipped {
				v.Mismatches++
				v.note("mismatch: %s's delivery to %s is skipped in hookflow but applied there", ev.ID, name)
			}
		default:
			finished = false
			v.Stuck++
			v.note("stuck: %s's delivery to %s is still %s", ev.ID, name, row.State)
			if applied {
				v.Mismatches++
				v.note("mismatch: %s's delivery to %s is %s in hookflow but applied there", ev.ID, name, row.State)
			}
		}
		if row.State != stateSkipped {
			want = append(want, ev.Sequence)
		}
	}
	// The receiver applied a prefix of want, in order; all of it when
	// every delivery is finished. hookflow's delivered set is that
	// same prefix.
	ok := len(got) <= len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Sequence == want[i]
	}
	if !ok || (finished && len(got) != len(want)) {
		v.OrderViolations++
		seqs := make([]int64, len(got))
		for i, e := range got {
			seqs[i] = e.Sequence
		}
		v.note("order: %s applied %s's sequences %v; its lane there is %v (skips left out)", name, corr, seqs, want)
	}
	for i, seq := range want {
		id := w.EventID(corr, seq)
		if o.Deliveries[Delivery{id, ep}].State == stateDelivered && i >= len(got) {
			v.OrderViolations++
			v.note("order: hookflow delivered %s/%d to %s, past what the receiver applied in that lane", corr, seq, name)
		}
	}

	rc, ok := at(o.Receiver, ep)[corr]
	if !ok {
		if len(got) > 0 {
			v.Mismatches++
			v.note("%s's receiver API does not know %s", name, corr)
		}
		return
	}
	var last int64
	if len(got) > 0 {
		last = got[len(got)-1].Sequence
	}
	if len(rc.Applied) != len(appliedSeq[corr]) || rc.LastSequence != last {
		v.Mismatches++
		v.note("%s's receiver API %s: %d applied, last %d; its ledger: %d, last %d", name, corr, len(rc.Applied), rc.LastSequence, len(appliedSeq[corr]), last)
	}
	bal, err := strconv.ParseFloat(rc.Balance.String(), 64)
	if err != nil || int64(bal) != amount {
		v.Mismatches++
		v.note("balance %s at %s: the receiver says %s, applied amounts sum to %d", corr, name, rc.Balance, amount)
	}
}

// deletedOutcome is what one delivery the workload routes to the deleted
// endpoint is, for its lane's order: owed (delivered, or skipped after its
// receiver applied an attempt that was in flight at the delete: the
// receiver's lane has it), unfinished, or neither (skipped unapplied, or
// never routed).
type deletedOutcome int

const (
	deletedNone deletedOutcome = iota
	deletedOwed
	deletedUnfinished
)

// checkDeleted holds one delivery the workload routes to the deleted
// endpoint to what a delete promises: routing stops at once (an event
// accepted before the delete was sent has a delivery to it, one first
// posted after it was answered has none); each delivery ends delivered
// (applied exactly once, held by the rest of checkReceiver) or skipped,
// with or without a dead letter row and by no operator; a skipped one was
// not applied, unless the proxy had sent it before the delete was answered
// (an attempt in flight at the delete may land); none stays open.
func checkDeleted(ev Event, row DeliveryRow, known, applied bool, name string, s SituationsObserved, v *Verdict) deletedOutcome {
	switch {
	case !known && s.RoutedBefore[ev.ID]:
		v.Deliveries++
		v.Lost++
		v.note("lost: %s was accepted before %s was deleted but has no delivery to it", ev.ID, name)
		return deletedUnfinished
	case !known:
		v.DeletedUnrouted++
		if applied {
			v.Mismatches++
			v.note("mismatch: %s, never routed to %s (deleted), was applied there", ev.ID, name)
		}
		return deletedNone
	}
	v.Deliveries++
	if s.PostedAfter[ev.ID] {
		v.Situations++
		v.note("delete: %s, first posted after %s was deleted, was routed to it (%s)", ev.ID, name, row.State)
	}
	switch row.State {
	case stateDelivered:
		v.DeletedDelivered++
		if !applied {
			v.Lost++
			v.note("lost: %s is delivered to %s (deleted) in hookflow but not applied there", ev.ID, name)
		}
		return deletedOwed
	case stateSkipped:
		v.Skipped++
		v.DeletedSkipped++
		switch {
		case applied && !s.SentBefore[ev.ID]:
			v.Mismatches++
			v.note("mismatch: %s's delivery to %s is skipped (deleted), yet applied there, though nothing of it was sent before the delete", ev.ID, name)
			return deletedOwed
		case applied:
			return deletedOwed
		}
		return deletedNone
	}
	v.Stuck++
	v.note("stuck: %s's delivery to %s (deleted) is still %s", ev.ID, name, row.State)
	if applied {
		v.Mismatches++
		v.note("mismatch: %s's delivery to %s (deleted) is %s in hookflow but applied there", ev.ID, name, row.State)
	}
	return deletedUnfinished
}

// stranded counts the lanes that are neither complete nor waiting on a
// dead letter an operator can act on, and notes why.
func stranded(w *Workload, o Observed, v *Verdict) int {
	n := 0
	for _, corr := range w.Correlations {
		for ep := range w.Subscribers {
			unfinished := false
			for _, ev := range w.Lane(corr, ep) {
				row, known := o.Deliveries[Delivery{ev.ID, ep}]
				if ep == o.situations().Deleted && !known {
					continue // never routed there, or lost (checkDeleted says which)
				}
				if st := row.State; o.Accepted[ev.ID] && st != stateDelivered && st != stateSkipped {
					unfinished = true
				}
			}
			if !unfinished {
				continue
			}
			if ep == o.situations().Deleted {
				// No operator can act on a deleted endpoint's dead letter
				// (it answers 404): its lanes must have ended by themselves.
				n++
				v.failed[Lane{corr, ep}] = true
				v.note("stranded: %s at %s: its endpoint is deleted, yet a delivery of the lane is not delivered or skipped", corr, w.Subscribers[ep].Name)
				continue
			}
			if why := strandedWhy(w, o, Lane{corr, ep}); why != "" {
				n++
				v.failed[Lane{corr, ep}] = true
				v.note("stranded: %s at %s: %s", corr, w.Subscribers[ep].Name, why)
			}
		}
	}
	return n
}

// strandedWhy says why an unfinished lane is stranded, or "" when its head
// waits on a dead letter an operator can still replay or skip.
func strandedWhy(w *Workload, o Observed, lane Lane) string {
	h, ok := o.Heads[lane]
	if !ok {
		return "its head was not observed"
	}
	id := w.EventID(lane.Correlation, h.Next)
	switch {
	case id == "":
		return fmt.Sprintf("its head is at %d, past its events, yet some are unfinished", h.Next)
	case !o.Accepted[id]:
		return fmt.Sprintf("its head %s (sequence %d) was never accepted", id, h.Next)
	}
	return laneStrandedWhy(id, o.Deliveries[Delivery{id, lane.Endpoint}], h, o.endpointID(lane.Endpoint))
}

// endpointID is set by the observer: the checks name endpoints by index,
// a workflow's state query by hookflow id.
func (o Observed) endpointID(ep int) string { return at(o.EndpointIDs, ep) }

// laneStrandedWhy says why a lane whose head is event id (its delivery
// row, how its workflow stands) is stranded, or "" when it waits on an
// open dead letter its event's workflow waits on, with that generation,
// for the endpoint endpointID.
func laneStrandedWhy(id string, row DeliveryRow, h Head, endpointID string) string {
	lane, _ := h.Status.Lane(endpointID)
	wf := h.Workflow
	if h.QueryErr != "" {
		wf += " (" + h.QueryErr + ")"
	} else if h.Workflow == "running" {
		wf += fmt.Sprintf(" (it says the delivery is %s, generation %d; the event %s)", cmp.Or(string(lane.State), "unknown"), lane.Generation, h.Status.State)
	}
	switch {
	case row.State != stateDeadLettered:
		return fmt.Sprintf("its head %s is %s; its workflow is %s", id, cmp.Or(row.State, "not in the ledger"), wf)
	case row.DeadLetter != dlOpen:
		return fmt.Sprintf("its head %s is dead-lettered, but its dead letter is %s, which no operator can replay or skip; its workflow is %s", id, rowStatus(row.DeadLetter), wf)
	case h.Workflow != "running" || h.QueryErr != "":
		return fmt.Sprintf("its head %s waits on an open dead letter, but its workflow is %s", id, wf)
	case lane.State != contract.StateDeadLettered || lane.Generation != row.Generation:
		return fmt.Sprintf("its head %s has dead letter generation %d open, but its workflow is %s", id, row.Generation, wf)
	}
	return ""
}
