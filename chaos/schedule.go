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
)

// Action is one timed fault.
type Action struct {
	At   time.Duration // since the fault phase began
	Kind string
	// Worker is the index of the worker to kill (KindKillWorker).
	Worker int
	// For is how long a burst lasts (KindBurst).
	For time.Duration
	// RetryAfter: the burst's 503s carry Retry-After (KindBurst).
	RetryAfter bool
}

func (a Action) String() string {
	switch a.Kind {
	case KindKillWorker:
		return fmt.Sprintf("%s worker-%d", a.Kind, a.Worker+1)
	case KindBurst:
		return fmt.Sprintf("%s for %s (retry-after %v)", a.Kind, a.For.Round(100*time.Millisecond), a.RetryAfter)
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
}

// Plan returns the timed faults of a run, sorted by time: a worker SIGKILL
// about every KillEvery (±30 %), one Postgres restart at 30–45 % of the
// phase, one Temporal restart at 60–75 %, and short 5xx bursts (1–3 s)
// about every BurstEvery. The same seed gives the same plan.
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
	out = append(out, Action{At: frac(0.60, 0.75), Kind: KindRestartTemporal})
	if cfg.BurstEvery > 0 {
		for t := jitter(cfg.BurstEvery); t < cfg.Phase; t += jitter(cfg.BurstEvery) {
			out = append(out, Action{At: t, Kind: KindBurst, For: time.Second + time.Duration(rng.Int64N(int64(2*time.Second))), RetryAfter: rng.IntN(2) == 0})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
