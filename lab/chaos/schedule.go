package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// Fault kinds of the timed schedule.
const (
	KindKillWorker      = "kill_worker"
	KindRestartPostgres = "restart_postgres"
	KindRestartTemporal = "restart_temporal"
	KindBurst           = "burst_503"
	// KindFlap: the flapping endpoint goes down (resets and 503s) for a
	// while, then comes back.
	KindFlap = "flap_down"
	// KindKillBroker: a broker of the broker destinations (Action.Broker)
	// is SIGKILLed, left down a few seconds and started again on its data.
	KindKillBroker = "kill_broker"
)

// A killed broker stays down this long: past a few of the first attempts'
// retries, so that deliveries into it fail and wait, and its circuit may
// open.
const brokerDownMin, brokerDownMax = 2 * time.Second, 6 * time.Second

// The flapping endpoint's outages and the up periods between them. An
// outage outlasts the first probe of its breaker (5 s after it opened, a
// moment after the outage began) and ends before the second (10 s after
// the first failed), so each outage opens the breaker and the second probe
// closes it; an up period outlasts the wait for that probe, so the breaker
// closes before the next outage.
const (
	flapDownMin, flapDownMax = 7 * time.Second, 14 * time.Second
	flapUpMin, flapUpMax     = 12 * time.Second, 20 * time.Second
)

// Kinds of the operator's buttons, which the Web UI and the API let anyone
// press at any time.
const (
	// KindDoubleClick: two concurrent API replays of one open dead letter,
	// or a replay and a skip (Action.WithSkip); one must win, the other get
	// 409. The dead letter is made for it: the proxy refuses (422) the next
	// new delivery of a correlation, which dead-letters at once.
	KindDoubleClick = "double_click"
	// KindTerminateEvent: Terminate of an unfinished event's workflow.
	KindTerminateEvent = "terminate_event"
	// KindTerminateSequencer: Terminate of a correlation's sequencer.
	KindTerminateSequencer = "terminate_sequencer"
	// KindResetEvent: Reset of an event's workflow to an earlier completed
	// workflow task, signals reapplied (Temporal's default).
	KindResetEvent = "reset_event"
	// KindResetSequencer: the same Reset of a sequencer.
	KindResetSequencer = "reset_sequencer"
)

// operatorKinds are the operator's buttons.
var operatorKinds = [...]string{KindDoubleClick, KindTerminateEvent, KindTerminateSequencer, KindResetEvent, KindResetSequencer}

// operatorDeal is what Plan deals the operator's actions from, in a seeded
// order: double clicks twice as often as the others, since only half of
// them press skip, and the skip wins only half of the races.
var operatorDeal = [...]string{KindDoubleClick, KindDoubleClick, KindTerminateEvent, KindTerminateSequencer, KindResetEvent, KindResetSequencer}

// Action is one timed fault.
type Action struct {
	At   time.Duration // since the fault phase began
	Kind string
	// Worker is the index of the worker to kill (KindKillWorker).
	Worker int
	// For is how long a burst lasts (KindBurst), or an outage of the
	// flapping endpoint (KindFlap).
	For time.Duration
	// RetryAfter: the burst's 503s carry Retry-After (KindBurst).
	RetryAfter bool
	// Pick chooses the target of an operator's action among the candidates
	// there are when it is carried out (sorted, so a seed picks the same
	// one from the same candidates), and the workflow task a Reset goes
	// back to.
	Pick uint64
	// WithSkip: the double click is a replay and a skip, not two replays.
	WithSkip bool
	// Broker is the broker to kill (KindKillBroker): BrokerNATS or
	// BrokerRedis.
	Broker string
}

func (a Action) String() string {
	switch a.Kind {
	case KindKillWorker:
		return fmt.Sprintf("%s worker-%d", a.Kind, a.Worker+1)
	case KindBurst:
		return fmt.Sprintf("%s for %s (retry-after %v)", a.Kind, a.For.Round(100*time.Millisecond), a.RetryAfter)
	case KindKillBroker:
		return fmt.Sprintf("%s %s for %s", a.Kind, a.Broker, a.For.Round(100*time.Millisecond))
	case KindFlap, KindRestartTemporal:
		return fmt.Sprintf("%s for %s", a.Kind, a.For.Round(100*time.Millisecond))
	case KindDoubleClick:
		if a.WithSkip {
			return a.Kind + " (replay and skip)"
		}
		return a.Kind + " (two replays)"
	}
	return a.Kind
}

// PlanConfig shapes the timed schedule.
type PlanConfig struct {
	Seed       uint64
	Phase      time.Duration // how long faults are injected
	Workers    int
	KillEvery  time.Duration // mean gap between worker kills
	BurstEvery time.Duration // mean gap between 5xx bursts
	// OperatorEvery is the mean gap between the operator's actions; zero
	// presses no button.
	OperatorEvery time.Duration
	// Flap schedules the flapping endpoint's outages.
	Flap bool
	// Brokers are the brokers to kill, in turn, about every BrokerEvery.
	Brokers     []string
	BrokerEvery time.Duration
}

// Plan returns the timed faults of a run, sorted by time: a worker SIGKILL
// about every KillEvery (±30 %), one Postgres restart at 30–45 % of the
// phase, one Temporal outage (3–6 s down) at 50–65 %, within the posts, short 5xx bursts (1–3 s) about
// every BurstEvery, and an operator's action about every OperatorEvery,
// dealt in turn from operatorDeal, every other double click a replay and
// a skip, and, with Flap, the flapping endpoint's outages (7–14 s, 12–20 s
// apart, the first after such an up period) until 75 % of the phase, so
// that its breaker closes after the last within the phase; and, with
// Brokers, a broker killed (down 2–6 s) about every BrokerEvery, the
// brokers in turn, the first after half such a gap, until 85 % of the
// phase. The same seed gives the same plan.
func Plan(cfg PlanConfig) []Action {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x706c616e))
	jitter := func(mean time.Duration) time.Duration {
		return time.Duration(float64(mean) * (0.7 + 0.6*rng.Float64()))
	}
	var out []Action
	if cfg.Workers > 0 && cfg.KillEvery > 0 {
		for t := jitter(cfg.KillEvery); t < cfg.Phase; t += jitter(cfg.KillEvery) {
			out = append(out, Action{At: t, Kind: KindKillWorker, Worker: rng.IntN(cfg.Workers)})
		}
	}
	frac := func(lo, hi float64) time.Duration {
		return time.Duration(float64(cfg.Phase) * (lo + (hi-lo)*rng.Float64()))
	}
	out = append(out, Action{At: frac(0.30, 0.45), Kind: KindRestartPostgres})
	// The Temporal server stays down a few seconds, while the producers
	// still post out of order: the API accepts those events queued and
	// its sweep starts them once the server is back. Its length comes
	// from a stream of its own, so that the other faults stay where they
	// were.
	trng := rand.New(rand.NewPCG(cfg.Seed, 0x6f757461))
	out = append(out, Action{At: frac(0.50, 0.65), Kind: KindRestartTemporal, For: 3*time.Second + time.Duration(trng.Int64N(int64(3*time.Second)))})
	if cfg.BurstEvery > 0 {
		for t := jitter(cfg.BurstEvery); t < cfg.Phase; t += jitter(cfg.BurstEvery) {
			out = append(out, Action{At: t, Kind: KindBurst, For: time.Second + time.Duration(rng.Int64N(int64(2*time.Second))), RetryAfter: rng.IntN(2) == 0})
		}
	}
	if cfg.OperatorEvery > 0 {
		// A stream of its own, so that the operator leaves the other faults
		// of a seed where they were.
		orng := rand.New(rand.NewPCG(cfg.Seed, 0x6f706572))
		ojitter := func() time.Duration { return time.Duration(float64(cfg.OperatorEvery) * (0.7 + 0.6*orng.Float64())) }
		deal := orng.Perm(len(operatorDeal))
		withSkip := orng.IntN(2) == 0
		n := 0
		for t := ojitter(); t < cfg.Phase; t += ojitter() {
			a := Action{At: t, Kind: operatorDeal[deal[n%len(deal)]], Pick: orng.Uint64()}
			if a.Kind == KindDoubleClick {
				a.WithSkip, withSkip = withSkip, !withSkip
			}
			out = append(out, a)
			n++
		}
	}
	if cfg.Flap {
		// A stream of its own as well.
		frng := rand.New(rand.NewPCG(cfg.Seed, 0x666c6170))
		between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(frng.Int64N(int64(hi-lo))) }
		end := time.Duration(float64(cfg.Phase) * 0.75)
		for t := between(flapUpMin, flapUpMax); ; {
			d := between(flapDownMin, flapDownMax)
			if t+d > end {
				break
			}
			out = append(out, Action{At: t, Kind: KindFlap, For: d})
			t += d + between(flapUpMin, flapUpMax)
		}
	}
	if len(cfg.Brokers) > 0 && cfg.BrokerEvery > 0 {
		// A stream of its own, so that a run with brokers keeps the other
		// faults of its seed where they were.
		brng := rand.New(rand.NewPCG(cfg.Seed, 0x62726b72))
		gap := func() time.Duration { return time.Duration(float64(cfg.BrokerEvery) * (0.7 + 0.6*brng.Float64())) }
		end := time.Duration(float64(cfg.Phase) * 0.85)
		n := 0
		for t := gap() / 2; t < end; t += gap() {
			down := brokerDownMin + time.Duration(brng.Int64N(int64(brokerDownMax-brokerDownMin)))
			out = append(out, Action{At: t, Kind: KindKillBroker, Broker: cfg.Brokers[n%len(cfg.Brokers)], For: down})
			n++
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
