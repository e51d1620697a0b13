package chaos

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/refreceiver"
)

// cleanRun is a workload whose every event was delivered and applied in
// order, as the observations of a perfect run.
func cleanRun(t *testing.T) (*Workload, Observed) {
	t.Helper()
	w, err := NewWorkload(WorkloadConfig{Seed: 1, Events: 30, Correlations: 3, DownCorrelations: 1, HealthyEndpoints: 2, DuplicateRate: 0.1, Reorder: 3})
	if err != nil {
		t.Fatal(err)
	}
	o := Observed{Accepted: map[string]bool{}, States: map[string]string{}, DeadLetters: map[string]string{},
		Receiver: map[string]refreceiver.Correlation{}, AppliedAnswers: map[string]int{}, Skipped: map[string]bool{}, Heads: map[string]Head{}}
	sums := map[string]int64{}
	for _, ev := range w.Events {
		o.Accepted[ev.ID] = true
		o.States[ev.ID] = stateDelivered
		e := LedgerEntry{EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence}
		o.Ledger = append(o.Ledger, e)
		o.Processed = append(o.Processed, e)
		o.AppliedAnswers[ev.ID] = 1
		sums[ev.CorrelationID] += ev.Amount
		rc := o.Receiver[ev.CorrelationID]
		rc.Applied = append(rc.Applied, ev.ID)
		rc.LastSequence = ev.Sequence
		o.Receiver[ev.CorrelationID] = rc
	}
	for corr, rc := range o.Receiver {
		rc.Balance = json.Number(strconv.FormatInt(sums[corr], 10))
		o.Receiver[corr] = rc
	}
	return w, o
}

// unapply takes an event out of every record the receiver keeps, as if it
// never arrived there.
func unapply(t *testing.T, w *Workload, o *Observed, id string) {
	t.Helper()
	drop := func(es []LedgerEntry) []LedgerEntry {
		return slices.DeleteFunc(es, func(e LedgerEntry) bool { return e.EventID == id })
	}
	o.Ledger, o.Processed = drop(o.Ledger), drop(o.Processed)
	delete(o.AppliedAnswers, id)
	var ev Event
	for _, e := range w.Events {
		if e.ID == id {
			ev = e
		}
	}
	rc := o.Receiver[ev.CorrelationID]
	rc.Applied = slices.DeleteFunc(slices.Clone(rc.Applied), func(a string) bool { return a == id })
	bal, err := strconv.ParseInt(rc.Balance.String(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rc.Balance = json.Number(strconv.FormatInt(bal-ev.Amount, 10))
	rc.LastSequence = 0
	for _, e := range o.Ledger {
		if e.CorrelationID == ev.CorrelationID {
			rc.LastSequence = max(rc.LastSequence, e.Sequence)
		}
	}
	o.Receiver[ev.CorrelationID] = rc
}

// lastOf returns the last event of the workload's first correlation.
func lastOf(w *Workload) Event {
	var last Event
	for _, ev := range w.Events {
		if ev.CorrelationID == w.Correlations[0] {
			last = ev
		}
	}
	return last
}

func TestCheckCleanRun(t *testing.T) {
	t.Parallel()
	w, o := cleanRun(t)
	// A dead-lettered-then-replayed event is fine.
	o.DeadLetters[w.Events[0].ID] = "replayed"
	v := Check(w, o)
	if !v.OK() || v.Events != 30 || v.Applied != 30 || v.DeadLettered != 1 {
		t.Fatalf("verdict %+v, want OK with 30 events, 30 applied, 1 dead-lettered", v)
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
			o.Ledger = append(o.Ledger, o.Ledger[3])
		}, func(v Verdict) bool { return v.Duplicates >= 1 }, "duplicate"},
		{"two applied answers", func(w *Workload, o *Observed) {
			o.AppliedAnswers[w.Events[2].ID] = 2
		}, func(v Verdict) bool { return v.Duplicates == 1 }, "answered \"applied\" 2 times"},
		{"out of order", func(w *Workload, o *Observed) {
			o.Ledger[1], o.Ledger[2] = o.Ledger[2], o.Ledger[1]
		}, func(v Verdict) bool { return v.OrderViolations >= 1 }, "order:"},
		{"gap", func(w *Workload, o *Observed) {
			o.Ledger = append(o.Ledger[:4], o.Ledger[5:]...)
			o.Processed = o.Processed[1:]
		}, func(v Verdict) bool { return v.OrderViolations >= 1 && v.Lost == 1 }, "lost:"},
		{"delivered, never applied", func(w *Workload, o *Observed) {
			o.Ledger = o.Ledger[:len(o.Ledger)-1]
			o.Processed = o.Processed[1:]
		}, func(v Verdict) bool { return v.Lost == 1 }, "not applied at the receiver"},
		{"accepted, unknown to hookflow", func(w *Workload, o *Observed) {
			delete(o.States, w.Events[5].ID)
		}, func(v Verdict) bool { return v.Lost == 1 }, "not in hookflow's ledger"},
		{"dead-lettered without a row", func(w *Workload, o *Observed) {
			o.States[w.Events[5].ID] = stateDeadLettered
		}, func(v Verdict) bool { return v.Lost == 1 }, "without a dead letter row"},
		{"still waiting", func(w *Workload, o *Observed) {
			o.States[w.Events[7].ID] = "waiting"
		}, func(v Verdict) bool { return v.Stuck == 1 && v.Mismatches == 1 }, "stuck:"},
		{"never accepted", func(w *Workload, o *Observed) {
			delete(o.Accepted, w.Events[9].ID)
		}, func(v Verdict) bool { return v.NotAccepted == 1 }, "never accepted"},
		{"balance off", func(w *Workload, o *Observed) {
			rc := o.Receiver[w.Events[0].CorrelationID]
			rc.Balance = "1"
			o.Receiver[w.Events[0].CorrelationID] = rc
		}, func(v Verdict) bool { return v.Mismatches == 1 }, "balance"},
		{"left parked", func(w *Workload, o *Observed) {
			o.Parked = 1
		}, func(v Verdict) bool { return v.OrderViolations == 1 }, "parked"},
		{"skipped, by no operator", func(w *Workload, o *Observed) {
			ev := w.Events[4]
			unapply(t, w, o, ev.ID)
			o.States[ev.ID], o.DeadLetters[ev.ID] = stateSkipped, "skipped"
		}, func(v Verdict) bool { return v.Lost == 1 && v.OrderViolations == 0 }, "no operator skipped it"},
		{"head waits for a release nobody sends", func(w *Workload, o *Observed) {
			ev := lastOf(w)
			unapply(t, w, o, ev.ID)
			o.States[ev.ID] = "waiting"
			o.Heads[ev.CorrelationID] = Head{Next: ev.Sequence, Workflow: "running", Status: contract.EventStatus{State: contract.StateWaiting}}
		}, func(v Verdict) bool { return v.Stranded == 1 && v.Stuck == 1 }, "stranded: corr-0000: its head ev-corr-0000-10 is waiting"},
		{"head dead-lettered, its replay claimed but never carried out", func(w *Workload, o *Observed) {
			ev := lastOf(w)
			unapply(t, w, o, ev.ID)
			o.States[ev.ID], o.DeadLetters[ev.ID] = stateDeadLettered, "replayed"
			o.Heads[ev.CorrelationID] = Head{Next: ev.Sequence, Generation: 1, Workflow: "running",
				Status: contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{{State: contract.StateDeadLettered, Generation: 1}}}}
		}, func(v Verdict) bool { return v.Stranded == 1 && v.Stuck == 0 }, "which no operator can replay or skip"},
		{"head dead-lettered, its workflow terminated", func(w *Workload, o *Observed) {
			ev := lastOf(w)
			unapply(t, w, o, ev.ID)
			o.States[ev.ID], o.DeadLetters[ev.ID] = stateDeadLettered, "open"
			o.Heads[ev.CorrelationID] = Head{Next: ev.Sequence, Generation: 1, Workflow: "terminated"}
		}, func(v Verdict) bool { return v.Stranded == 1 }, "its workflow is terminated"},
		{"head dead-lettered, its workflow waits on another generation", func(w *Workload, o *Observed) {
			ev := lastOf(w)
			unapply(t, w, o, ev.ID)
			o.States[ev.ID], o.DeadLetters[ev.ID] = stateDeadLettered, "open"
			o.Heads[ev.CorrelationID] = Head{Next: ev.Sequence, Generation: 2, Workflow: "running",
				Status: contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{{State: contract.StateDeadLettered, Generation: 1}}}}
		}, func(v Verdict) bool { return v.Stranded == 1 }, "generation 2 open"},
		{"unfinished, its head not observed", func(w *Workload, o *Observed) {
			ev := lastOf(w)
			unapply(t, w, o, ev.ID)
			o.States[ev.ID], o.DeadLetters[ev.ID] = stateDeadLettered, "open"
		}, func(v Verdict) bool { return v.Stranded == 1 }, "not observed"},
		{"delivered, its dead letter still open", func(w *Workload, o *Observed) {
			o.DeadLetters[w.Events[6].ID] = "open"
		}, func(v Verdict) bool { return v.Mismatches == 1 }, "yet its dead letter is open"},
		{"double claim", func(w *Workload, o *Observed) {
			o.DoubleClaims = []string{"ev-corr-0001-3 (replay: 202, skip: 202)"}
		}, func(v Verdict) bool { return v.DoubleClaims == 1 }, "both answered 202"},
		{"postgres did not come back", func(w *Workload, o *Observed) {
			o.PostgresRestartFailures = 1
		}, func(v Verdict) bool { return v.PostgresRestartFailures == 1 }, "postgres did not come back"},
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

// An operator's skip leaves a gap the receiver was told about: no event is
// lost and the order holds. A correlation whose head waits on an open dead
// letter its workflow waits on is not stranded: an operator can act on it.
func TestCheckSkippedAndWaitingOnOperator(t *testing.T) {
	t.Parallel()
	w, o := cleanRun(t)
	skip := w.Events[4]
	unapply(t, w, &o, skip.ID)
	o.States[skip.ID], o.DeadLetters[skip.ID], o.Skipped[skip.ID] = stateSkipped, "skipped", true

	head := lastOf(w)
	unapply(t, w, &o, head.ID)
	o.States[head.ID], o.DeadLetters[head.ID] = stateDeadLettered, "open"
	o.Heads[head.CorrelationID] = Head{Next: head.Sequence, Generation: 3, Workflow: "running",
		Status: contract.EventStatus{State: contract.StateDeadLettered, Lanes: []contract.LaneStatus{{State: contract.StateDeadLettered, Generation: 3}}}}

	v := Check(w, o)
	if !v.OK() || v.Skipped != 1 || v.Stranded != 0 || v.Applied != 28 {
		t.Fatalf("verdict %+v, want OK with 1 skipped, 28 applied, none stranded", v)
	}
}
