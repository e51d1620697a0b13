// Package chaos runs hookflow as real processes — Postgres, the Temporal
// server, the API, several workers and the reference receiver — under
// injected faults, then checks hookflow's promises against the receiver's
// ledger: every accepted event applied exactly once, or dead-lettered with a
// row, or skipped by an operator, in sequence order per correlation,
// nothing left in flight.
//
// Faults come from a seeded schedule: SIGKILLed workers, a Postgres crash and
// restart, a Temporal server crash and restart, and, in a proxy between the
// workers and the receiver, held requests past the HTTP timeout, lost
// acknowledgements (the receiver committed, the sender's connection is
// reset), 5xx bursts, and one endpoint down for longer than the recovery
// window, healed and replayed afterwards. The schedule also presses the
// buttons the Web UI and the API give any operator: double clicks on a dead
// letter's replay (or a replay and a skip at once), and Terminate and Reset
// of event workflows and sequencers. Once quiet, every correlation must be
// complete, or wait on a dead letter an operator can still act on.
//
// The files split the run by responsibility: stack.go starts and stops the
// processes, workload.go makes and posts the events, faults.go injects the
// timed faults, operator.go presses the operator's buttons, observe.go
// waits for quiet and gathers what the checks of check.go look at.
package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	hfclient "github.com/hookflow/hookflow/kit/client"
)

// Config is one chaos run.
type Config struct {
	// Binary is the hookflow executable the child processes run.
	Binary string
	// DataDir holds the Postgres cluster and every log. It must be empty or
	// hold an earlier chaos run (which is wiped).
	DataDir string
	// Seed makes the workload and the fault schedule repeatable.
	Seed uint64
	// Events are spread over Correlations; DuplicateRate of them are posted twice.
	Events, Correlations int
	DuplicateRate        float64
	// Workers is the number of hookflow worker processes.
	Workers int
	// FaultPhase is how long the timed faults (kills, restarts, bursts) go
	// on; events are posted over its first 70 %. The per-request faults of
	// the proxy go on until quiet.
	FaultPhase time.Duration
	// RecoveryWindow and DeliveryTimeout are given to the API and workers.
	RecoveryWindow, DeliveryTimeout time.Duration
	// KillEvery is the mean gap between worker SIGKILLs; BurstEvery between
	// 5xx bursts; OperatorEvery between the operator's actions (double
	// clicks, Terminate, Reset).
	KillEvery, BurstEvery, OperatorEvery time.Duration
	// Latency and LostAck are the per-request odds of those proxy faults.
	Latency, LostAck float64
	// QuietTimeout bounds the wait for every event to reach a final state
	// once the posts are done. The wait also ends after a few minutes
	// without any progress.
	QuietTimeout time.Duration
	// Posters is the number of goroutines posting events.
	Posters int
	// Calm runs the same workload and checks with no fault at all: the
	// baseline a chaos run is compared with.
	Calm bool
	// Stdout gets the result lines; Stderr the progress.
	Stdout, Stderr io.Writer
}

// Short is the short preset: 1,000 events over 50 correlations, 90 s of
// faults; 4–5 minutes on a 2-core machine of its own.
func Short() Config {
	return Config{
		Seed: 1, Events: 1000, Correlations: 50, DuplicateRate: 0.10, Workers: 3,
		FaultPhase: 90 * time.Second, RecoveryWindow: 15 * time.Second, DeliveryTimeout: 2 * time.Second,
		KillEvery: 10 * time.Second, BurstEvery: 15 * time.Second, OperatorEvery: 6 * time.Second,
		Latency: 0.03, LostAck: 0.05, QuietTimeout: 20 * time.Minute, Posters: 8,
	}
}

// Long is the default run: 10,000 events over 200 correlations.
func Long() Config {
	return Config{
		Seed: 1, Events: 10000, Correlations: 200, DuplicateRate: 0.10, Workers: 3,
		FaultPhase: 10 * time.Minute, RecoveryWindow: 30 * time.Second, DeliveryTimeout: 2 * time.Second,
		KillEvery: 10 * time.Second, BurstEvery: 20 * time.Second, OperatorEvery: 20 * time.Second,
		Latency: 0.03, LostAck: 0.05, QuietTimeout: time.Hour, Posters: 8,
	}
}

// Result is what a run found.
type Result struct {
	Verdict Verdict
	// Faults is the breakdown line; Summary the one-line verdict.
	Faults, Summary string
	Wall            time.Duration
}

// marker names the file that says a folder holds a chaos run.
const marker = ".hookflow-chaos"

// ErrDataDirInUse is returned for a data folder that holds something other
// than an earlier chaos run.
var ErrDataDirInUse = errors.New("the data folder is not empty and holds no earlier chaos run; choose an empty one")

// run is the state of one chaos run.
type run struct {
	cfg    Config
	dir    string
	logs   string
	began  time.Time
	phase0 time.Time
	logger *slog.Logger // the run's own log file

	pg       *pgHolder
	temporal *proc
	api      *proc
	receiver *proc
	workers  []*proc
	procs    []*proc

	proxy    *Proxy
	proxySrv *http.Server
	api1     *hfclient.Client
	token    string // the API's bootstrap token, shown for poking at the run
	recv     receiverClient
	hf, rcv  *pgxpool.Pool
	// tc is the operator's client of the Temporal server, for Terminate,
	// Reset and the queries of the checks.
	tc client.Client

	wl       *Workload
	healthy  []string // endpoint ids
	downEp   string
	downHeal atomic.Bool

	faults *tally

	outMu      sync.Mutex
	mu         sync.Mutex
	unexpected map[string]int
	accepted   map[string]bool
	rejected   []string
	replayed   map[string]int
	// skipped are the events an operator asked to skip, unless the API
	// refused it (409).
	skipped map[string]bool
	// clicks counts the double clicks by what the API answered them.
	clicks clickStats
	// doubleClaims are the dead letters whose two concurrent clicks were
	// both answered 202.
	doubleClaims []string
	// stray are the open dead letters of events not dead-lettered that the
	// progress saw (event/generation).
	stray     map[string]bool
	downDL    int
	posted    atomic.Int64
	postTries atomic.Int64
	postErrs  atomic.Int64 // no answer within the producer's 10 s timeout, or a connection error
	post5xx   atomic.Int64
}

// Run starts the stack, runs the workload under the fault schedule, waits for
// quiet and checks the invariants. The error is for a run that could not be
// carried out (a service that would not start); broken invariants are in
// the Result's Verdict.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := validate(&cfg); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, began: time.Now(), faults: newTally(), unexpected: map[string]int{},
		accepted: map[string]bool{}, replayed: map[string]int{}, skipped: map[string]bool{}, stray: map[string]bool{}}
	if err := r.prepareDir(); err != nil {
		return Result{}, err
	}
	logf, err := os.OpenFile(filepath.Join(r.logs, "chaos.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Result{}, err
	}
	defer logf.Close()
	r.logger = slog.New(slog.NewTextHandler(logf, nil))

	wl, err := NewWorkload(WorkloadConfig{
		Seed: cfg.Seed, Events: cfg.Events, Correlations: cfg.Correlations,
		DownCorrelations: max(1, cfg.Correlations/25), HealthyEndpoints: 3, DuplicateRate: cfg.DuplicateRate,
		Reorder: 5,
	})
	if err != nil {
		return Result{}, err
	}
	r.wl = wl

	superCtx, stopSupervisors := context.WithCancel(context.WithoutCancel(ctx))
	var torn sync.Once
	tearDown := func() { torn.Do(func() { r.teardown(stopSupervisors) }) }
	defer tearDown()
	if err := r.startStack(ctx, superCtx); err != nil {
		return Result{}, err
	}
	r.progressf("stack up in %s: postgres, temporal, api (%s, token %s), %d workers, receiver (%s), fault proxy; logs in %s",
		time.Since(r.began).Round(100*time.Millisecond), r.api1.BaseURL(), r.token, cfg.Workers, r.recv.base, r.logs)

	if err := r.exercise(ctx); err != nil {
		return Result{}, err
	}
	v, err := r.observe(ctx)
	if err != nil {
		return Result{}, err
	}
	res := r.result(v)
	tearDown()
	r.progressf("%s", r.cpuLine())
	fmt.Fprintln(cfg.Stdout, res.Faults)
	fmt.Fprintln(cfg.Stdout, res.Summary)
	if !v.OK() {
		for _, d := range v.Details {
			fmt.Fprintln(cfg.Stderr, "chaos: violation: "+d)
		}
		fmt.Fprintf(cfg.Stderr, "chaos: logs are in %s\n", r.logs)
	}
	return res, nil
}

func validate(cfg *Config) error {
	switch {
	case cfg.Binary == "":
		return errors.New("chaos: the hookflow binary is required")
	case cfg.DataDir == "":
		return errors.New("chaos: a data folder is required")
	case cfg.Workers < 1:
		return errors.New("chaos: at least one worker is required")
	case cfg.FaultPhase < 10*time.Second:
		return errors.New("chaos: the fault phase must last at least 10s")
	case cfg.RecoveryWindow <= 0 || cfg.DeliveryTimeout <= 0:
		return errors.New("chaos: recovery window and delivery timeout must be positive")
	}
	cfg.Posters = cmp.Or(cfg.Posters, 8)
	cfg.QuietTimeout = cmp.Or(cfg.QuietTimeout, 5*time.Minute)
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	return nil
}

// exercise posts the workload under the fault schedule, then stops the
// faults and waits for quiet.
func (r *run) exercise(ctx context.Context) error {
	cfg := r.cfg
	r.phase0 = time.Now()
	phaseEnd := r.phase0.Add(cfg.FaultPhase)
	plan := Plan(PlanConfig{Seed: cfg.Seed, Phase: cfg.FaultPhase, Workers: cfg.Workers,
		KillEvery: cfg.KillEvery, BurstEvery: cfg.BurstEvery, OperatorEvery: cfg.OperatorEvery})
	if cfg.Calm {
		plan = nil
		r.proxy.SetFaults(false)
		r.heal(ctx)
	}
	for _, a := range plan {
		r.logger.Info("planned fault", "at", a.At.Round(100*time.Millisecond).String(), "fault", a.String())
	}

	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBG(); wg.Wait() }()
	spawn := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }

	postsDone := make(chan struct{})
	spawn(func() {
		defer close(postsDone)
		r.postAll(bg, time.Duration(float64(cfg.FaultPhase)*0.7), phaseEnd.Add(cfg.QuietTimeout/2))
	})
	spawn(func() { r.runFaults(bg, plan) })
	if !cfg.Calm {
		spawn(func() { r.healDown(bg, phaseEnd.Add(cfg.QuietTimeout/2)) })
	}
	spawn(func() { r.operator(bg, max(cfg.RecoveryWindow, 10*time.Second)) })
	spawn(func() { r.progressLoop(bg) })

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(phaseEnd)):
	}
	// The timed faults end here; the per-request ones (held requests, lost
	// acks) go on until quiet, so every delivery of the run is exposed to
	// them however slowly the machine works through the backlog.
	r.progressf("fault phase over: no more kills, restarts, bursts or operator's actions; waiting for the last posts")
	r.proxy.SetBurst(false, false)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-postsDone:
	}
	// The down endpoint stays down (healDown) until its heads have
	// dead-lettered, even past the fault phase on a slow machine.
	return r.waitQuiet(ctx)
}

// result makes the two lines a run prints: the faults that took place and
// the verdict.
func (r *run) result(v Verdict) Result {
	total, breakdown := r.faultTotals()
	ps := r.proxy.Stats()
	r.mu.Lock()
	replays := 0
	for _, n := range r.replayed {
		replays += n
	}
	breakdown += fmt.Sprintf(" | dead letters on the down endpoint=%d, replays=%d, open dead letters seen of events not dead-lettered=%d"+
		" | posts=%d (duplicates %d; tries %d, unanswered %d, 5xx %d) | deliveries through the proxy=%d, parked answers=%d, refused for double clicks=%d",
		r.downDL, replays, len(r.stray), len(r.wl.Posts), r.wl.Duplicates, r.postTries.Load(), r.postErrs.Load(), r.post5xx.Load(), ps.Requests, ps.Parked, ps.Refused)
	r.mu.Unlock()
	wall := time.Since(r.began).Round(time.Second)
	summary := fmt.Sprintf("events=%d applied=%d dead_lettered=%d lost=%d duplicates=%d order_violations=%d faults=%d stuck=%d mismatches=%d not_accepted=%d"+
		" skipped=%d stranded=%d double_claims=%d postgres_restart_failures=%d seed=%d wall=%s",
		v.Events, v.Applied, v.DeadLettered, v.Lost, v.Duplicates, v.OrderViolations, total, v.Stuck, v.Mismatches, v.NotAccepted,
		v.Skipped, v.Stranded, v.DoubleClaims, v.PostgresRestartFailures, r.cfg.Seed, wall)
	return Result{Verdict: v, Faults: breakdown, Summary: summary, Wall: wall}
}

func (r *run) progressf(format string, args ...any) {
	el := time.Since(r.began).Round(time.Second)
	line := fmt.Sprintf("chaos %s: %s\n", el, fmt.Sprintf(format, args...))
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, _ = io.WriteString(r.cfg.Stderr, line)
}
