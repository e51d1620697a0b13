package chaos

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/destcheck"
	"github.com/hookflow/hookflow/services/refreceiver"
)

// testEndpoints are the hookflow ids of the test workloads' endpoints.
var testEndpoints = []string{"ep_a", "ep_b", "ep_c"}

// cleanRun is a workload whose every delivery was delivered and applied in
// its lane's order, as the observations of a perfect run.
func cleanRun(t *testing.T) (*Workload, Observed) {
	t.Helper()
	return cleanRunOf(t, WorkloadConfig{Seed: 1, Events: 30, Correlations: 3, DuplicateRate: 0.1, Reorder: 3})
}

// cleanRunOf is cleanRun of the workload cfg makes.
func cleanRunOf(t *testing.T, cfg WorkloadConfig) (*Workload, Observed) {
	t.Helper()
	w, err := NewWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := len(w.Subscribers)
	o := Observed{Accepted: map[string]bool{}, States: map[string]string{}, Deliveries: map[Delivery]DeliveryRow{},
		Ledger: make([][]LedgerEntry, n), Processed: make([][]LedgerEntry, n), Parked: make([]int, n),
		AppliedAnswers: map[Delivery]int{}, Skipped: map[Delivery]bool{}, Heads: map[Lane]Head{}, EndpointIDs: testEndpoints}
	for ep := 0; ep < n; ep++ {
		o.Receiver = append(o.Receiver, map[string]refreceiver.Correlation{})
	}
	for _, ev := range w.Events {
		o.Accepted[ev.ID] = true
		o.States[ev.ID] = stateDelivered
		for ep := range w.Subscribers {
			if w.Routes(ev, ep) {
				apply(o, ep, ev)
			}
		}
	}
	return w, o
}

// apply records ev delivered to ep and applied by its receiver.
func apply(o Observed, ep int, ev Event) {
	o.Deliveries[Delivery{ev.ID, ep}] = DeliveryRow{State: stateDelivered}
	if o.Previous != nil {
		o.Previous[Delivery{ev.ID, ep}] = []int64{o.Receiver[ep][ev.CorrelationID].LastSequence}
	}
	e := LedgerEntry{EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, Amount: ev.Amount}
	o.Ledger[ep] = append(o.Ledger[ep], e)
	o.Processed[ep] = append(o.Processed[ep], e)
	o.AppliedAnswers[Delivery{ev.ID, ep}] = 1
	rc := o.Receiver[ep][ev.CorrelationID]
	rc.Applied = append(rc.Applied, ev.ID)
	rc.LastSequence = ev.Sequence
	bal, _ := strconv.ParseInt(cmpOr(rc.Balance.String(), "0"), 10, 64)
	rc.Balance = json.Number(strconv.FormatInt(bal+ev.Amount, 10))
	o.Receiver[ep][ev.CorrelationID] = rc
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// unapply takes ev out of every record ep's receiver keeps, as if it never
// arrived there.
func unapply(t *testing.T, o *Observed, ep int, ev Event) {
	t.Helper()
	drop := func(es []LedgerEntry) []LedgerEntry {
		return slices.DeleteFunc(es, func(e LedgerEntry) bool { return e.EventID == ev.ID })
	}
	o.Ledger[ep], o.Processed[ep] = drop(o.Ledger[ep]), drop(o.Processed[ep])
	delete(o.AppliedAnswers, Delivery{ev.ID, ep})
	rc := o.Receiver[ep][ev.CorrelationID]
	rc.Applied = slices.DeleteFunc(slices.Clone(rc.Applied), func(a string) bool { return a == ev.ID })
	bal, err := strconv.ParseInt(rc.Balance.String(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rc.Balance = json.Number(strconv.FormatInt(bal-ev.Amount, 10))
	rc.LastSequence = 0
	for _, e := range o.Ledger[ep] {
		if e.CorrelationID == ev.CorrelationID {
			rc.LastSequence = max(rc.LastSequence, e.Sequence)
		}
	}
	o.Receiver[ep][ev.CorrelationID] = rc
}

// lastOf returns the last event of the workload's first correlation's lane
// at ep.
func lastOf(w *Workload, ep int) Event {
	lane := w.Lane(w.Correlations[0], ep)
	return lane[len(lane)-1]
}

// B is the endpoint the tests mutate: it gets a subset of each
// correlation.
const epB = 1

func TestCheckCleanRun(t *testing.T) {
	t.Parallel()
	w, o := cleanRun(t)
	// A dead-lettered-then-replayed delivery is fine.
	o.Deliveries[Delivery{w.Events[0].ID, 0}] = DeliveryRow{State: stateDelivered, DeadLetter: dlReplayed, Generation: 1}
	v := Check(w, o)
	if !v.OK() || v.Events != 30 || v.Deliveries != w.Deliveries() || v.Applied != w.Deliveries() || v.DeadLettered != 1 || v.Lanes != 9 {
		t.Fatalf("verdict %+v, want OK with 30 events, %d deliveries applied in 9 lanes, 1 dead-lettered", v, w.Deliveries())
	}
	if v.Deliveries <= 30 || v.Deliveries >= 90 {
		t.Fatalf("%d deliveries of 30 events to 3 endpoints: each endpoint should see its own subset", v.Deliveries)
	}
}

func TestCheckFindsViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(w *Workload, o *Observed)
		want   func(v Verdict) bool
		about  string
	}{
		{"applied twice", func(w *Workload, o *Observed) {
			o.Ledger[epB] = append(o.Ledger[epB], o.Ledger[epB][1])
		}, func(v Verdict) bool { return v.Duplicates >= 1 }, "duplicate"},
		{"two applied answers", func(w *Workload, o *Observed) {
			o.AppliedAnswers[Delivery{o.Ledger[epB][0].EventID, epB}] = 2
		}, func(v Verdict) bool { return v.Duplicates == 1 }, "answered \"applied\" 2 times"},
		{"out of order in a lane", func(w *Workload, o *Observed) {
			o.Ledger[epB][0], o.Ledger[epB][1] = o.Ledger[epB][1], o.Ledger[epB][0]
		}, func(v Verdict) bool { return v.OrderViolations >= 1 }, "order:"},
		{"gap in a lane", func(w *Workload, o *Observed) {
			ev := w.Lane(w.Correlations[0], epB)[1]
			unapply(t, o, epB, ev)
			o.Processed[epB] = append(o.Processed[epB], LedgerEntry{EventID: ev.ID})
		}, func(v Verdict) bool { return v.OrderViolations >= 1 && v.Lost == 1 }, "not applied there"},
		{"routed to an endpoint that does not subscribe", func(w *Workload, o *Observed) {
			for _, ev := range w.Events {
				if !w.Subscribers[epB].Wants(ev.Type) {
					o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDelivered}
					return
				}
			}
		}, func(v Verdict) bool { return v.Mismatches == 1 }, "misrouted"},
		{"applied by a receiver that does not subscribe", func(w *Workload, o *Observed) {
			for _, ev := range w.Events {
				if !w.Subscribers[epB].Wants(ev.Type) {
					o.Ledger[epB] = append(o.Ledger[epB], LedgerEntry{EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, Amount: ev.Amount})
					return
				}
			}
		}, func(v Verdict) bool { return v.Mismatches >= 1 }, "which it does not subscribe to"},
		{"accepted, no delivery in hookflow", func(w *Workload, o *Observed) {
			delete(o.Deliveries, Delivery{w.Events[5].ID, 0})
		}, func(v Verdict) bool { return v.Lost == 1 }, "has no delivery to A"},
		{"dead-lettered without a row", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDeadLettered}
			o.Heads[Lane{ev.CorrelationID, epB}] = Head{Next: ev.Sequence, Workflow: "running"}
		}, func(v Verdict) bool { return v.Lost == 1 }, "without a dead letter row"},
		{"still waiting", func(w *Workload, o *Observed) {
			o.Deliveries[Delivery{o.Ledger[epB][2].EventID, epB}] = DeliveryRow{State: "waiting"}
		}, func(v Verdict) bool { return v.Stuck == 1 && v.Mismatches == 1 }, "stuck:"},
		{"never accepted", func(w *Workload, o *Observed) {
			delete(o.Accepted, w.Events[9].ID)
		}, func(v Verdict) bool { return v.NotAccepted == 1 }, "never accepted"},
		{"balance off", func(w *Workload, o *Observed) {
			rc := o.Receiver[epB][w.Correlations[0]]
			rc.Balance = "1"
			o.Receiver[epB][w.Correlations[0]] = rc
		}, func(v Verdict) bool { return v.Mismatches == 1 }, "balance"},
		{"left parked", func(w *Workload, o *Observed) {
			o.Parked[2] = 1
		}, func(v Verdict) bool { return v.OrderViolations == 1 }, "parked"},
		{"skipped, by no operator", func(w *Workload, o *Observed) {
			ev := w.Lane(w.Correlations[0], epB)[1]
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateSkipped, DeadLetter: dlSkipped, Generation: 1}
		}, func(v Verdict) bool { return v.Lost == 1 && v.OrderViolations == 0 }, "no operator skipped it"},
		{"head waits for a release nobody sends", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: "waiting"}
			o.Heads[Lane{ev.CorrelationID, epB}] = Head{Next: ev.Sequence, Workflow: "running", Status: contract.EventStatus{State: contract.StateWaiting}}
		}, func(v Verdict) bool { return v.Stranded == 1 && v.Stuck == 1 }, "stranded: default/corr-0000 at B: its head"},
		{"head dead-lettered, its replay claimed but never carried out", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlReplayed, Generation: 1}
			o.Heads[Lane{ev.CorrelationID, epB}] = Head{Next: ev.Sequence, Generation: 1, Workflow: "running",
				Status: deadAt(epB, 1)}
		}, func(v Verdict) bool { return v.Stranded == 1 && v.Stuck == 0 }, "which no operator can replay or skip"},
		{"head dead-lettered, its workflow terminated", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 1}
			o.Heads[Lane{ev.CorrelationID, epB}] = Head{Next: ev.Sequence, Generation: 1, Workflow: "terminated"}
		}, func(v Verdict) bool { return v.Stranded == 1 }, "its workflow is terminated"},
		{"head dead-lettered, its workflow waits on another generation", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 2}
			o.Heads[Lane{ev.CorrelationID, epB}] = Head{Next: ev.Sequence, Generation: 2, Workflow: "running", Status: deadAt(epB, 1)}
		}, func(v Verdict) bool { return v.Stranded == 1 }, "generation 2 open"},
		{"head dead-lettered, its workflow says another lane is", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 1}
			o.Heads[Lane{ev.CorrelationID, epB}] = Head{Next: ev.Sequence, Generation: 1, Workflow: "running", Status: deadAt(0, 1)}
		}, func(v Verdict) bool { return v.Stranded == 1 }, "generation 1 open"},
		{"unfinished, its head not observed", func(w *Workload, o *Observed) {
			ev := lastOf(w, epB)
			unapply(t, o, epB, ev)
			o.Deliveries[Delivery{ev.ID, epB}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 1}
		}, func(v Verdict) bool { return v.Stranded == 1 }, "not observed"},
		{"delivered, its dead letter still open", func(w *Workload, o *Observed) {
			o.Deliveries[Delivery{w.Events[6].ID, 0}] = DeliveryRow{State: stateDelivered, DeadLetter: dlOpen, Generation: 1}
		}, func(v Verdict) bool { return v.Mismatches == 1 }, "yet its dead letter is open"},
		{"double claim", func(w *Workload, o *Observed) {
			o.DoubleClaims = []string{"ev-corr-0001-3 (replay: 202, skip: 202)"}
		}, func(v Verdict) bool { return v.DoubleClaims == 1 }, "both answered 202"},
		{"postgres did not come back", func(w *Workload, o *Observed) {
			o.PostgresRestartFailures = 1
		}, func(v Verdict) bool { return v.PostgresRestartFailures == 1 }, "postgres did not come back"},
		{"a receiver refused signatures", func(w *Workload, o *Observed) {
			o.Unverified = map[string]int{"receiver-a": 3, "receiver-b": 0}
		}, func(v Verdict) bool { return v.Unverified == 3 }, "receiver-a refused to verify 3 deliveries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, o := cleanRun(t)
			tc.mutate(w, &o)
			v := Check(w, o)
			if v.OK() || !tc.want(v) {
				t.Fatalf("verdict %+v", v)
			}
			if !strings.Contains(strings.Join(v.Details, "\n"), tc.about) {
				t.Fatalf("details %q do not mention %q", v.Details, tc.about)
			}
		})
	}
}

// deadAt is an event workflow's state query answer: its delivery to
// endpoint ep waits on dead letter generation gen.
func deadAt(ep int, gen int32) contract.EventStatus {
	return contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{
		{Endpoint: testEndpoints[ep], State: contract.StateDeadLettered, Generation: gen},
	}}
}

// An operator's skip leaves a gap in its lane the receiver was told about:
// nothing is lost and the order holds. A lane whose head waits on an open
// dead letter its event's workflow waits on is not stranded: an operator
// can act on it. The same event's other lanes go on.
func TestCheckSkippedAndWaitingOnOperator(t *testing.T) {
	t.Parallel()
	w, o := cleanRun(t)
	skip := w.Lane(w.Correlations[0], epB)[1]
	unapply(t, &o, epB, skip)
	o.Deliveries[Delivery{skip.ID, epB}] = DeliveryRow{State: stateSkipped, DeadLetter: dlSkipped, Generation: 1}
	o.Skipped[Delivery{skip.ID, epB}] = true

	head := lastOf(w, epB)
	unapply(t, &o, epB, head)
	o.Deliveries[Delivery{head.ID, epB}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 3}
	o.Heads[Lane{head.CorrelationID, epB}] = Head{Next: head.Sequence, Generation: 3, Workflow: "running", Status: deadAt(epB, 3)}

	v := Check(w, o)
	if !v.OK() || v.Skipped != 1 || v.Stranded != 0 || v.Applied != w.Deliveries()-2 {
		t.Fatalf("verdict %+v, want OK with 1 skipped, %d applied, none stranded", v, w.Deliveries()-2)
	}
}

// The checks' reading of the subscription patterns.
func TestSubscriberWants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{nil, "anything", true},
		{[]string{"*"}, "order.paid", true},
		{[]string{"order.*"}, "order.paid", true},
		{[]string{"order.*"}, "order.a.b", true},
		{[]string{"order.*"}, "order", false},
		{[]string{"order.*"}, "orders.paid", false},
		{[]string{"order.paid", "invoice.*"}, "invoice.issued", true},
		{[]string{"order.paid", "invoice.*"}, "order.created", false},
	} {
		if got := (Subscriber{EventTypes: tc.patterns}).Wants(tc.typ); got != tc.want {
			t.Errorf("%v wants %q = %v, want %v", tc.patterns, tc.typ, got, tc.want)
		}
	}
}

// flappedBreaker is a breaker that did its part through two outages of
// 10 s, 20 deliveries in flight as each began: it opened in each and
// closed 5 s after it, let 12 attempts through, and auto-replay left
// nothing open.
func flappedBreaker() BreakerObserved {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	return BreakerObserved{
		Outages:           []Outage{{at(0), at(10)}, {at(30), at(40)}},
		Opens:             2,
		Spells:            []Spell{{at(0), at(1), at(15)}, {at(30), at(31), at(45)}},
		AttemptsWhileDown: 12, HeadsAtOutage: []int{20, 20}, Window: 15 * time.Second,
		AutoReplayed: 9, FinalState: "closed",
	}
}

// An unbroken retry schedule sends 0, 1, 5, 21, 85 s after a first failure.
func TestUnbrokenAttempts(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{0: 0, time.Second / 2: 1, 3 * time.Second: 2, 15 * time.Second: 3, 30 * time.Second: 4, 5 * time.Minute: 5} {
		if got := UnbrokenAttempts(d); got != want {
			t.Errorf("UnbrokenAttempts(%s) = %d, want %d", d, got, want)
		}
	}
	if b := flappedBreaker(); b.Unbroken() != 2*20*3 {
		t.Errorf("Unbroken() = %d, want %d (two outages of 10 s, 20 in flight each, 3 attempts)", b.Unbroken(), 2*20*3)
	}
}

// The breaker's checks pass a breaker that did its part, and flag each way
// of not doing it.
func TestCheckBreaker(t *testing.T) {
	t.Parallel()
	w, o := cleanRun(t)
	b := flappedBreaker()
	o.Breaker = &b
	if v := Check(w, o); !v.OK() || v.BreakerOpens != 2 || v.BreakerCloses != 2 || v.AttemptsWhileDown != 12 || v.Unbroken != 120 {
		t.Fatalf("verdict %+v, want OK with the breaker's figures", v)
	}
	for name, spoil := range map[string]func(b *BreakerObserved){
		"open only between outages": func(b *BreakerObserved) {
			b.Spells = []Spell{{b.Outages[0].To.Add(time.Second), b.Outages[0].To.Add(2 * time.Second), b.Outages[0].To.Add(9 * time.Second)}}
		},
		"never closed":           func(b *BreakerObserved) { b.Spells, b.FinalState = nil, "open" },
		"attempts not far below": func(b *BreakerObserved) { b.AttemptsWhileDown = 61 },
		"open once quiet":        func(b *BreakerObserved) { b.FinalState = "open" },
		"auto-replay left one open": func(b *BreakerObserved) {
			b.LeftOpen = []LeftOpen{{EventID: "ev-x", Generation: 1, Reason: "endpoint circuit open", DeadLetteredAt: b.Outages[1].From.Add(8 * time.Second),
				ReplayedAt: b.Spells[1].ClosedAt.Add(autoReplayGrace + time.Second)}}
		},
	} {
		bad := flappedBreaker()
		spoil(&bad)
		o.Breaker = &bad
		if v := Check(w, o); v.OK() || v.Breaker == 0 {
			t.Errorf("%s: verdict %+v, want a breaker violation", name, v)
		}
	}
	// Open already when an outage began (a burst opened it) counts.
	early := flappedBreaker()
	early.Spells = []Spell{{early.Outages[0].From.Add(-3 * time.Second), early.Outages[0].From.Add(-2 * time.Second), early.Outages[1].To.Add(time.Second)}}
	o.Breaker = &early
	if v := Check(w, o); !v.OK() {
		t.Errorf("open from before the first outage to after the last: verdict %+v, want OK", v)
	}
	// A dead letter written after its outage's close is not auto-replay's:
	// the operator's replay of it is no violation.
	late := flappedBreaker()
	late.LeftOpen = []LeftOpen{{EventID: "ev-y", Generation: 1, Reason: "recovery window spent; last attempt: no answer", DeadLetteredAt: late.Spells[0].ClosedAt.Add(time.Second),
		ReplayedAt: late.Spells[0].ClosedAt.Add(autoReplayGrace + time.Second)}}
	o.Breaker = &late
	if v := Check(w, o); !v.OK() {
		t.Errorf("a dead letter written after the close: verdict %+v, want OK", v)
	}
	// The chaos long run on 30e0bf8: a dead letter written while the
	// circuit was closed between a close and a reopen that the breaker took
	// for the same outage (failing_since kept), which the operator replayed
	// before the outage's last close, whose auto-replay would have taken it.
	flap := flappedBreaker()
	flap.Spells[1].FailingSince = flap.Spells[0].FailingSince
	between := flap.Spells[0].ClosedAt.Add(5 * time.Second)
	flap.LeftOpen = []LeftOpen{{EventID: "ev-z", Generation: 1, Reason: "recovery window spent; last attempt: 503", DeadLetteredAt: between,
		ReplayedAt: between.Add(autoReplayGrace + time.Second)}}
	o.Breaker = &flap
	if v := Check(w, o); !v.OK() {
		t.Errorf("a dead letter the operator replayed before its outage's close: verdict %+v, want OK", v)
	}
}

// The situation endpoints of situationRun, by index: A is paused, S slow,
// D deleted; S has a filter too.
const (
	epA = 0
	epS = 3
	epD = 4
)

// situationRun is cleanRun with the run's situations: one correlation's
// producer lost a sequence, which the operator voided (answered 200, its
// later post 409, every lane told); A was paused and enabled; D was
// deleted once each correlation's first half was posted, so that its
// second half was never routed there.
func situationRun(t *testing.T) (*Workload, Observed) {
	t.Helper()
	w, err := NewWorkload(WorkloadConfig{Seed: 1, Events: 30, Correlations: 3, DuplicateRate: 0.1, Reorder: 3, Voids: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Voided) != 1 {
		t.Fatalf("voided %v, want one correlation", w.Voided)
	}
	w.Subscribers = append(w.Subscribers, SituationSubscribers()...)
	n := len(w.Subscribers)
	o := Observed{Accepted: map[string]bool{}, States: map[string]string{}, Deliveries: map[Delivery]DeliveryRow{},
		Ledger: make([][]LedgerEntry, n), Processed: make([][]LedgerEntry, n), Parked: make([]int, n),
		AppliedAnswers: map[Delivery]int{}, Skipped: map[Delivery]bool{}, Heads: map[Lane]Head{},
		EndpointIDs: []string{"ep_a", "ep_b", "ep_c", "ep_s", "ep_d"}, FilteredOut: map[string][]int{}, Previous: map[Delivery][]int64{}}
	for ep := 0; ep < n; ep++ {
		o.Receiver = append(o.Receiver, map[string]refreceiver.Correlation{})
	}
	s := SituationsObserved{Paused: epA, Slow: 3, Deleted: epD, PauseDone: true, DeleteDone: true, GoneStatus: 404,
		RoutedBefore: map[string]bool{}, PostedAfter: map[string]bool{}, SentBefore: map[string]bool{},
		VoidAnswers: map[string]int{}, VoidPosts: map[string]int{}, SkippedSeen: map[Lane][]int64{}}
	for _, ev := range w.Events {
		if w.IsVoided(ev) {
			continue
		}
		o.Accepted[ev.ID] = true
		o.States[ev.ID] = stateDelivered
		late := ev.Sequence > 5
		if late {
			s.PostedAfter[ev.ID] = true
		} else {
			s.RoutedBefore[ev.ID] = true
		}
		for ep := range w.Subscribers {
			if w.Subscribes(ev, ep) && !w.Routes(ev, ep) {
				o.FilteredOut[ev.ID] = append(o.FilteredOut[ev.ID], ep)
			}
			if !w.Routes(ev, ep) || (ep == epD && late) {
				continue
			}
			apply(o, ep, ev)
			if ep == epD {
				s.SentBefore[ev.ID] = true
			}
		}
	}
	for corr, seq := range w.Voided {
		s.VoidAnswers[corr], s.VoidPosts[corr] = 200, 409
		for ep := range w.Subscribers {
			s.SkippedSeen[Lane{corr, ep}] = []int64{seq}
		}
	}
	o.Situations = &s
	return w, o
}

// filteredEvent returns an event S's filter leaves out and the next one
// of its correlation that S takes.
func filteredEvent(t *testing.T, w *Workload) (left, next Event) {
	t.Helper()
	for _, corr := range w.Correlations {
		var out *Event
		for _, ev := range w.Events {
			switch {
			case ev.CorrelationID != corr || !w.Subscribes(ev, epS) || w.IsVoided(ev):
			case !w.Routes(ev, epS):
				out = &ev
			case out != nil:
				return *out, ev
			}
		}
	}
	t.Fatal("no event left out by S's filter with one taken after it")
	return Event{}, Event{}
}

// voidedEvent returns the workload's voided event and its successor in
// lane ep (the zero Event when the lane has none after it).
func voidedEvent(w *Workload, ep int) (voided, next Event) {
	for corr, seq := range w.Voided {
		voided = w.Events[slices.IndexFunc(w.Events, func(ev Event) bool { return ev.CorrelationID == corr && ev.Sequence == seq })]
		for _, ev := range w.Lane(corr, ep) {
			if ev.Sequence > seq {
				return voided, ev
			}
		}
	}
	return voided, Event{}
}

// deletedLane returns the events of the first correlation's lane at D that
// were routed there before its delete.
func deletedLane(t *testing.T, w *Workload, o Observed) []Event {
	t.Helper()
	var out []Event
	for _, ev := range w.Lane(w.Correlations[0], epD) {
		if _, ok := o.Deliveries[Delivery{ev.ID, epD}]; ok {
			out = append(out, ev)
		}
	}
	if len(out) < 2 {
		t.Fatalf("D's lane of %s has %d deliveries before its delete; the test needs two", w.Correlations[0], len(out))
	}
	return out
}

// A run whose situations went as they should passes: the voided sequence
// is neither owed nor never accepted, the deleted endpoint's events first
// posted after its delete are owed it nothing, its deliveries skipped by
// the delete (no operator, no dead letter row) are expected, and so is one
// skipped though its receiver applied an attempt sent before the delete.
func TestCheckSituationsClean(t *testing.T) {
	t.Parallel()
	w, o := situationRun(t)
	lane := deletedLane(t, w, o)
	unapply(t, &o, epD, lane[len(lane)-1])
	o.Deliveries[Delivery{lane[len(lane)-1].ID, epD}] = DeliveryRow{State: stateSkipped}
	o.Deliveries[Delivery{lane[0].ID, epD}] = DeliveryRow{State: stateSkipped, DeadLetter: dlSkipped, Generation: 1}
	v := Check(w, o)
	if !v.OK() || v.Voids != 1 || v.Void409s != 1 || v.Pauses != 1 || v.Deletes != 1 || v.DeletedSkipped != 2 || v.DeletedUnrouted == 0 || v.NotAccepted != 0 ||
		v.FilteredEndpoints != 1 || v.FilteredOut == 0 || v.FilteredDelivered == 0 {
		t.Fatalf("verdict %+v, want OK with 1 void (409), 1 pause, 1 delete, 2 skipped at D and some never routed there, events left out by S's filter and some delivered past it", v)
	}
}

// Each way a situation can go wrong is found.
func TestCheckSituationsFindViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, w *Workload, o *Observed)
		want   func(v Verdict) bool
		about  string
	}{
		{"a delivery to the deleted endpoint left open", func(t *testing.T, w *Workload, o *Observed) {
			ev := deletedLane(t, w, *o)[1]
			unapply(t, o, epD, ev)
			o.Deliveries[Delivery{ev.ID, epD}] = DeliveryRow{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 1}
			o.Heads[Lane{ev.CorrelationID, epD}] = Head{Next: ev.Sequence, Generation: 1, Workflow: "running", Status: deadAt(0, 1)}
		}, func(v Verdict) bool { return v.Stuck == 1 && v.Stranded == 1 }, "its endpoint is deleted"},
		{"routed to the deleted endpoint after its delete", func(t *testing.T, w *Workload, o *Observed) {
			for _, ev := range w.Lane(w.Correlations[0], epD) {
				if o.Situations.PostedAfter[ev.ID] {
					o.Deliveries[Delivery{ev.ID, epD}] = DeliveryRow{State: stateSkipped}
					return
				}
			}
			t.Fatal("no event of D's lane first posted after the delete")
		}, func(v Verdict) bool { return v.Situations == 1 }, "first posted after D was deleted"},
		{"accepted before the delete, no delivery to the deleted endpoint", func(t *testing.T, w *Workload, o *Observed) {
			ev := deletedLane(t, w, *o)[1]
			unapply(t, o, epD, ev)
			delete(o.Deliveries, Delivery{ev.ID, epD})
		}, func(v Verdict) bool { return v.Lost == 1 }, "accepted before D was deleted"},
		{"skipped at the deleted endpoint, applied, nothing sent before the delete", func(t *testing.T, w *Workload, o *Observed) {
			ev := deletedLane(t, w, *o)[1]
			o.Deliveries[Delivery{ev.ID, epD}] = DeliveryRow{State: stateSkipped}
			delete(o.Situations.SentBefore, ev.ID)
		}, func(v Verdict) bool { return v.Mismatches == 1 }, "nothing of it was sent before the delete"},
		{"the deleted endpoint answers 200", func(t *testing.T, w *Workload, o *Observed) {
			o.Situations.GoneStatus = 200
		}, func(v Verdict) bool { return v.Situations == 1 }, "not 404"},
		{"a voided sequence delivered", func(t *testing.T, w *Workload, o *Observed) {
			ev, _ := voidedEvent(w, epA)
			apply(*o, epA, ev)
		}, func(v Verdict) bool { return v.Mismatches >= 2 }, "a voided sequence"},
		{"a voided sequence accepted", func(t *testing.T, w *Workload, o *Observed) {
			ev, _ := voidedEvent(w, epA)
			o.Accepted[ev.ID] = true
		}, func(v Verdict) bool { return v.Situations == 1 }, "was accepted"},
		{"a voided sequence posted again, not refused", func(t *testing.T, w *Workload, o *Observed) {
			for corr := range w.Voided {
				o.Situations.VoidPosts[corr] = 202
			}
		}, func(v Verdict) bool { return v.Situations == 1 && v.Void409s == 0 }, "not 409"},
		{"a void not answered", func(t *testing.T, w *Workload, o *Observed) {
			for corr := range w.Voided {
				o.Situations.VoidAnswers[corr] = 503
			}
		}, func(v Verdict) bool { return v.Situations == 1 && v.Voids == 0 }, "was answered 503"},
		{"a lane parked behind a voided sequence", func(t *testing.T, w *Workload, o *Observed) {
			_, next := voidedEvent(w, epA)
			var after []Event
			for _, ev := range w.Lane(next.CorrelationID, epA) {
				if ev.Sequence >= next.Sequence {
					after = append(after, ev)
				}
			}
			for i := len(after) - 1; i >= 0; i-- {
				unapply(t, o, epA, after[i])
				o.Deliveries[Delivery{after[i].ID, epA}] = DeliveryRow{State: "waiting"}
			}
			o.Heads[Lane{next.CorrelationID, epA}] = Head{Next: next.Sequence, Workflow: "running", Status: contract.EventStatus{State: contract.StateWaiting}}
			o.Parked[epA] = 1
		}, func(v Verdict) bool { return v.Stranded == 1 && v.Stuck >= 1 && v.OrderViolations == 1 }, "stranded:"},
		{"a lane never told of a voided sequence", func(t *testing.T, w *Workload, o *Observed) {
			_, next := voidedEvent(w, epA)
			delete(o.Situations.SkippedSeen, Lane{next.CorrelationID, epA})
		}, func(v Verdict) bool { return v.Situations == 1 }, "skipped_sequences"},
		{"the paused endpoint's event lost", func(t *testing.T, w *Workload, o *Observed) {
			lane := w.Lane(w.Correlations[1], epA)
			ev := lane[slices.IndexFunc(lane, func(ev Event) bool { return ev.Sequence > 3 && !w.IsVoided(ev) })]
			unapply(t, o, epA, ev)
		}, func(v Verdict) bool { return v.Lost == 1 }, "not applied there"},
		{"enabling left a dead letter of the pause open", func(t *testing.T, w *Workload, o *Observed) {
			o.Situations.PauseLeftOpen = []string{`ev-x (generation 1, "endpoint disabled: …")`}
		}, func(v Verdict) bool { return v.Situations == 1 }, "left its dead letter"},
		{"an event left out by a filter routed all the same", func(t *testing.T, w *Workload, o *Observed) {
			left, _ := filteredEvent(t, w)
			apply(*o, epS, left)
		}, func(v Verdict) bool { return v.FilteredViolations >= 1 && v.Mismatches >= 1 }, "has a delivery to it"},
		{"an event left out by a filter not listed so", func(t *testing.T, w *Workload, o *Observed) {
			left, _ := filteredEvent(t, w)
			delete(o.FilteredOut, left.ID)
		}, func(v Verdict) bool { return v.FilteredViolations == 1 }, "its filtered_out does not list it"},
		{"an event a filter takes listed as left out", func(t *testing.T, w *Workload, o *Observed) {
			_, next := filteredEvent(t, w)
			o.FilteredOut[next.ID] = []int{epS}
		}, func(v Verdict) bool { return v.FilteredViolations == 1 }, "yet its filtered_out lists it"},
		{"previous_sequence naming an event the filter left out", func(t *testing.T, w *Workload, o *Observed) {
			left, next := filteredEvent(t, w)
			o.Previous[Delivery{next.ID, epS}] = []int64{left.Sequence}
		}, func(v Verdict) bool { return v.FilteredViolations == 1 }, "named previous_sequence"},
		{"a situation not carried out", func(t *testing.T, w *Workload, o *Observed) {
			o.Situations.NotCarriedOut = []string{"pause: disabling A was answered 0"}
			o.Situations.PauseDone = false
		}, func(v Verdict) bool { return v.Situations == 1 && v.Pauses == 0 }, "not carried out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, o := situationRun(t)
			tc.mutate(t, w, &o)
			v := Check(w, o)
			if v.OK() || !tc.want(v) {
				t.Fatalf("verdict %+v", v)
			}
			if !strings.Contains(strings.Join(v.Details, "\n"), tc.about) {
				t.Fatalf("details %q do not mention %q", v.Details, tc.about)
			}
		})
	}
}

// TestCheckTenants: three tenants share correlation and event IDs; a clean
// run passes every tenant's correlations, and one tenant's event that
// reaches another tenant's endpoint (routed there by hookflow, or applied
// in that endpoint's lane at the receiver they share) is a cross-tenant
// violation that fails that tenant's lane, not the others'.
func TestCheckTenants(t *testing.T) {
	t.Parallel()
	cfg := WorkloadConfig{Seed: 1, Events: 60, Correlations: 6, DuplicateRate: 0.1, Reorder: 3, Tenants: ChaosTenants(3)}
	w, o := cleanRunOf(t, cfg)
	if len(w.Subscribers) != 9 {
		t.Fatalf("%d endpoints, want 3 per tenant", len(w.Subscribers))
	}
	// The tenants reuse each other's IDs: the first two correlations are
	// corr-0000 of tenant-1 and of tenant-2.
	_, a := Split(w.Correlations[0])
	_, b := Split(w.Correlations[1])
	if a != b || w.Correlations[0] == w.Correlations[1] {
		t.Fatalf("correlations %v do not share IDs across tenants", w.Correlations[:2])
	}
	v := Check(w, o)
	if !v.OK() || len(v.Tenants) != 3 {
		t.Fatalf("clean run: %+v", v)
	}
	for _, tv := range v.Tenants {
		if tv.Correlations != 2 || tv.Passed != 2 || tv.LanesPassed != tv.Lanes || tv.Lanes == 0 || tv.Applied == 0 {
			t.Errorf("clean run, %+v", tv)
		}
	}

	// ep1 is tenant-1's endpoint B, ep2 tenant-2's (3 kinds per tenant).
	const ep1, ep2 = 1, 4
	var mine, theirs Event
	for _, ev := range w.Lane(w.Correlations[0], ep1) {
		_, own := Split(ev.ID)
		i := slices.IndexFunc(w.Events, func(e Event) bool { return e.ID == Key("tenant-2", own) })
		if i >= 0 && w.Routes(w.Events[i], ep2) {
			mine, theirs = ev, w.Events[i]
			break
		}
	}
	if mine.ID == "" {
		t.Fatal("no event of tenant-1's B lane has a namesake in tenant-2's B lane")
	}
	for name, mutate := range map[string]func(o *Observed){
		// tenant-2's event, of the same ID, applied in tenant-1's lane in
		// place of tenant-1's: only its amount tells it apart.
		"applied in another tenant's lane": func(o *Observed) {
			for i, e := range o.Ledger[ep1] {
				if e.EventID == mine.ID {
					o.Ledger[ep1][i].Amount = theirs.Amount
				}
			}
		},
		"routed to another tenant's endpoint": func(o *Observed) {
			o.Deliveries[Delivery{theirs.ID, ep1}] = DeliveryRow{State: stateDelivered}
		},
	} {
		t.Run(name, func(t *testing.T) {
			w, o := cleanRunOf(t, cfg)
			mutate(&o)
			v := Check(w, o)
			if v.OK() || v.CrossTenant != 1 {
				t.Fatalf("cross_tenant=%d, details %q", v.CrossTenant, v.Details)
			}
			if !strings.Contains(strings.Join(v.Details, "\n"), "cross-tenant: ") {
				t.Fatalf("details %q do not say cross-tenant", v.Details)
			}
			if tv := v.Tenants[0]; tv.Passed != 1 || tv.LanesPassed != tv.Lanes-1 {
				t.Errorf("tenant-1: %+v, want one lane and one correlation failed", tv)
			}
			for _, tv := range v.Tenants[1:] {
				if tv.Passed != tv.Correlations {
					t.Errorf("%+v: another tenant's lane failed it", tv)
				}
			}
		})
	}
}

// A broker destination passes when it holds each delivered event once and
// in order; anything destcheck finds in it, a delivery left unfinished or a
// broker that did not come back from a kill fails the run, and is named.
func TestCheckBrokers(t *testing.T) {
	t.Parallel()
	clean := func() []BrokerObserved {
		return []BrokerObserved{
			{Name: "nats@tenant-1", Report: destcheck.Report{Lanes: []destcheck.Lane{{Lane: "c1", Delivered: 3, Stored: 3}, {Lane: "c2", Delivered: 2, Stored: 2}}}, DeadLettered: 1},
			{Name: "redis@tenant-1", Report: destcheck.Report{Lanes: []destcheck.Lane{{Lane: "c1", Delivered: 4, Stored: 4}}}},
		}
	}
	w, o := cleanRun(t)
	o.Brokers = clean()
	v := Check(w, o)
	if !v.OK() || v.BrokerLanes != 3 || v.BrokerDelivered != 9 || v.BrokerDeadLettered != 1 {
		t.Fatalf("verdict %+v, want OK with 3 broker lanes, 9 delivered, 1 dead-lettered", v)
	}
	for _, tc := range []struct {
		name   string
		mutate func(o *Observed)
		count  func(v Verdict) int
		about  string
	}{
		{"missing", func(o *Observed) { o.Brokers[0].Report.Lanes[1].Missing = []int64{2} }, func(v Verdict) int { return v.BrokerMissing }, "c2: missing"},
		{"repeated", func(o *Observed) { o.Brokers[1].Report.Lanes[0].Repeated = []int64{3} }, func(v Verdict) int { return v.BrokerRepeated }, "repeated"},
		{"out of order", func(o *Observed) { o.Brokers[0].Report.Lanes[0].OutOfOrder = []int64{1} }, func(v Verdict) int { return v.BrokerOutOfOrder }, "out of order"},
		{"chain break", func(o *Observed) { o.Brokers[0].Report.Lanes[0].ChainBreaks = []int64{3} }, func(v Verdict) int { return v.BrokerChainBreaks }, "chain breaks"},
		{"bad signature", func(o *Observed) { o.Brokers[1].Report.Lanes[0].BadSignature = []int64{4} }, func(v Verdict) int { return v.BrokerBadSignatures }, "bad signatures"},
		{"another endpoint's", func(o *Observed) { o.Brokers[1].Report.Foreign = 1 }, func(v Verdict) int { return v.BrokerBadSignatures }, "another endpoint"},
		{"unfinished", func(o *Observed) { o.Brokers[0].Unfinished = 1 }, func(v Verdict) int { return v.BrokerUnfinished }, "neither delivered nor skipped"},
		{"not back from a kill", func(o *Observed) { o.BrokerKillFailures = 1 }, func(v Verdict) int { return v.BrokerKillFailures }, "did not start again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, o := cleanRun(t)
			o.Brokers = clean()
			tc.mutate(&o)
			v := Check(w, o)
			if v.OK() || tc.count(v) != 1 {
				t.Fatalf("verdict %+v, want a failure counted once", v)
			}
			if !slices.ContainsFunc(v.Details, func(d string) bool { return strings.Contains(d, tc.about) }) {
				t.Errorf("details %q name no %q", v.Details, tc.about)
			}
		})
	}
}
