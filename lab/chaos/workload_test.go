package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func testWorkload(t *testing.T, seed uint64) *Workload {
	t.Helper()
	w, err := NewWorkload(WorkloadConfig{Seed: seed, Events: 1000, Correlations: 50, DuplicateRate: 0.1, Reorder: 5})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestNewWorkloadShape(t *testing.T) {
	t.Parallel()
	w := testWorkload(t, 7)
	if len(w.Events) != 1000 || len(w.Correlations) != 50 || len(w.Subscribers) != 3 {
		t.Fatalf("events=%d correlations=%d endpoints=%d", len(w.Events), len(w.Correlations), len(w.Subscribers))
	}
	// Each endpoint sees its own subset of every correlation: A all of it,
	// B and C less, and neither B's nor C's a subset of the other's.
	for _, corr := range w.Correlations {
		a, b, c := w.Lane(corr, 0), w.Lane(corr, 1), w.Lane(corr, 2)
		if len(a) != 20 || len(b) == 0 || len(c) == 0 || len(b) >= 20 || len(c) >= 20 {
			t.Errorf("%s: lanes of %d, %d and %d events", corr, len(a), len(b), len(c))
		}
	}
	if d := w.Deliveries(); d < 1800 || d > 2200 {
		t.Errorf("%d deliveries, want about 2,000", d)
	}
	for corr, n := range w.PerCorrelation() {
		if n != 20 {
			t.Errorf("%s has %d events, want 20", corr, n)
		}
	}
	if w.Duplicates != 100 || len(w.Posts) != 1100 {
		t.Fatalf("duplicates=%d posts=%d, want 100 and 1100", w.Duplicates, len(w.Posts))
	}
	seen := map[int]int{}
	for _, k := range w.Posts {
		seen[k]++
	}
	twice := 0
	for i := range w.Events {
		switch seen[i] {
		case 1:
		case 2:
			twice++
		default:
			t.Errorf("event %s posted %d times", w.Events[i].ID, seen[i])
		}
	}
	if twice != 100 {
		t.Errorf("%d events posted twice, want 100", twice)
	}
	if !reflect.DeepEqual(w, testWorkload(t, 7)) {
		t.Error("the same seed gave another workload")
	}
	if reflect.DeepEqual(w.Posts, testWorkload(t, 8).Posts) {
		t.Error("another seed gave the same posting order")
	}
}

// The order is shuffled, but an event overtakes fewer than Reorder of its
// predecessors.
func TestNewWorkloadOrder(t *testing.T) {
	t.Parallel()
	w := testWorkload(t, 3)
	first := map[string]int{} // event id → first post position
	posts := map[string]int{}
	for pos, k := range w.Posts {
		if _, ok := first[w.Events[k].ID]; !ok {
			first[w.Events[k].ID] = pos
		}
		posts[w.Events[k].ID]++
	}
	ahead := 0
	for _, ev := range w.Events {
		for _, other := range w.Events {
			if other.CorrelationID != ev.CorrelationID || other.Sequence >= ev.Sequence || first[other.ID] < first[ev.ID] {
				continue
			}
			ahead++
			// A duplicate post goes anywhere.
			if ev.Sequence-other.Sequence >= 5 && posts[ev.ID] == 1 {
				t.Errorf("%s is posted before %s, %d places back", ev.ID, other.ID, ev.Sequence-other.Sequence)
			}
		}
	}
	if ahead < 100 {
		t.Errorf("only %d events arrive before a predecessor; the order is hardly shuffled", ahead)
	}
}

func TestNewWorkloadRefusesBadShapes(t *testing.T) {
	t.Parallel()
	for _, cfg := range []WorkloadConfig{
		{Events: 10, Correlations: 0},
		{Events: 5, Correlations: 10},
		{Events: 10, Correlations: 2, DuplicateRate: 2},
	} {
		if _, err := NewWorkload(cfg); err == nil {
			t.Errorf("NewWorkload(%+v) = nil error", cfg)
		}
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	cfg := PlanConfig{Seed: 1, Phase: 90 * time.Second, Workers: 3, KillEvery: 10 * time.Second, BurstEvery: 15 * time.Second, OperatorEvery: 6 * time.Second}
	plan := Plan(cfg)
	if !reflect.DeepEqual(plan, Plan(cfg)) {
		t.Fatal("the same seed gave another plan")
	}
	count := map[string]int{}
	withSkip := 0
	var last time.Duration
	for _, a := range plan {
		count[a.Kind]++
		if a.WithSkip {
			withSkip++
		}
		if a.At < last || a.At >= cfg.Phase {
			t.Errorf("%s at %s: out of order or past the phase", a, a.At)
		}
		last = a.At
		if a.Kind == KindKillWorker && (a.Worker < 0 || a.Worker >= cfg.Workers) {
			t.Errorf("kill of worker %d", a.Worker)
		}
		if a.Kind == KindBurst && (a.For < time.Second || a.For > 3*time.Second) {
			t.Errorf("burst of %s", a.For)
		}
	}
	if count[KindRestartPostgres] != 1 || count[KindRestartTemporal] != 1 {
		t.Errorf("restarts: %v, want one of each", count)
	}
	if n := count[KindKillWorker]; n < 6 || n > 12 {
		t.Errorf("%d worker kills in 90s, want about 9", n)
	}
	if n := count[KindBurst]; n < 3 || n > 9 {
		t.Errorf("%d bursts in 90s, want about 6", n)
	}
	// About 15 operator's actions, the kinds dealt in turn, double clicks
	// twice as often.
	for _, kind := range operatorKinds {
		lo, hi := 2, 3
		if kind == KindDoubleClick {
			lo, hi = 4, 6
		}
		if n := count[kind]; n < lo || n > hi {
			t.Errorf("%d %s in 90s, want %d to %d", n, kind, lo, hi)
		}
	}
	if withSkip == 0 || withSkip == count[KindDoubleClick] {
		t.Errorf("%d of %d double clicks are a replay and a skip, want some but not all", withSkip, count[KindDoubleClick])
	}

	// The operator's actions come from a stream of their own: the other
	// faults of a seed stay where they were without them.
	cfg.OperatorEvery = 0
	var others []Action
	for _, a := range plan {
		if !slices.Contains(operatorKinds[:], a.Kind) {
			others = append(others, a)
		}
	}
	if !reflect.DeepEqual(others, Plan(cfg)) {
		t.Error("the operator's actions moved the other faults")
	}
}

// The flapping endpoint's outages each last long enough for its breaker's
// first probe to fail and end before its second, with up periods long
// enough for that probe to close it, and they leave the other faults of a
// seed where they were.
func TestPlanFlaps(t *testing.T) {
	t.Parallel()
	cfg := PlanConfig{Seed: 1, Phase: 90 * time.Second, Workers: 3, KillEvery: 10 * time.Second, BurstEvery: 15 * time.Second, Flap: true}
	var flaps, others []Action
	for _, a := range Plan(cfg) {
		if a.Kind == KindFlap {
			flaps = append(flaps, a)
		} else {
			others = append(others, a)
		}
	}
	cfg.Flap = false
	if !reflect.DeepEqual(others, Plan(cfg)) {
		t.Error("the flaps moved the other faults")
	}
	if n := len(flaps); n < 2 || n > 3 {
		t.Fatalf("%d outages in 90s, want 2 or 3", n)
	}
	up := time.Duration(0)
	for _, a := range flaps {
		if a.For < flapDownMin || a.For > flapDownMax {
			t.Errorf("%s: outside %s to %s", a, flapDownMin, flapDownMax)
		}
		if gap := a.At - up; gap < flapUpMin {
			t.Errorf("%s at %s: only %s up before it", a, a.At, gap)
		}
		up = a.At + a.For
		if up > cfg.Phase*3/4 {
			t.Errorf("%s at %s ends past 75%% of the phase", a, a.At)
		}
	}
}

// Every broker is killed at least once in the short run's phase, each
// down a few seconds, the brokers in turn, and the kills leave the other
// faults of a seed where they were.
func TestPlanBrokerKills(t *testing.T) {
	t.Parallel()
	short := Short()
	for seed := uint64(1); seed <= 50; seed++ {
		cfg := PlanConfig{Seed: seed, Phase: short.FaultPhase, Workers: 3, KillEvery: 10 * time.Second, BurstEvery: 15 * time.Second, Flap: true,
			Brokers: brokerKinds, BrokerEvery: short.BrokerEvery}
		kills := map[string]int{}
		var others []Action
		for _, a := range Plan(cfg) {
			if a.Kind != KindKillBroker {
				others = append(others, a)
				continue
			}
			kills[a.Broker]++
			if a.For < brokerDownMin || a.For > brokerDownMax || a.At > cfg.Phase*85/100 {
				t.Errorf("seed %d: %s at %s: down outside %s to %s, or past 85%% of the phase", seed, a, a.At, brokerDownMin, brokerDownMax)
			}
		}
		for _, b := range brokerKinds {
			if kills[b] < 1 || kills[b] > 2 {
				t.Errorf("seed %d: %s killed %d times in %s, want once or twice", seed, b, kills[b], cfg.Phase)
			}
		}
		cfg.Brokers = nil
		if !reflect.DeepEqual(others, Plan(cfg)) {
			t.Errorf("seed %d: the broker kills moved the other faults", seed)
		}
	}
}
