package chaos

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
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
		Receiver: map[string]receiverCorrelation{}, AppliedAnswers: map[string]int{}}
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
