//go:build !deploy

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/lab/chaos"
)

// runChaos is hookflow chaos: the stack as real processes under a seeded
// fault schedule, then every invariant checked against the receiver's ledger.
func runChaos(ctx context.Context, env *cliEnv, args []string) error {
	long := chaos.Long()
	var (
		fs                  *flag.FlagSet
		short, calm         bool
		seed                uint64
		events, corrs, wrks int
		tenants             int
		phase, quiet        time.Duration
		model               bool
		sequences, parallel int
		settle              time.Duration
		seedList            string
	)
	cfg, rest, err := config.LoadWithFlags("chaos",
		"Run Postgres, the Temporal server, migrate, the API, worker processes and a reference receiver per endpoint as\n"+
			"real processes; create --tenants tenants (PUT /v1/tenants, a key each), deal the correlations out to them (their\n"+
			"correlation and event IDs the same in every tenant) and publish events of several types once each, fanned out\n"+
			"to each tenant's five endpoints by their subscriptions (A *, B order.*, C order.paid and invoice.*, S\n"+
			"customer.updated, D order.shipped; the tenants' endpoints of a kind share a receiver); inject faults on a seeded schedule (worker\n"+
			"SIGKILLs, a Postgres and a Temporal crash-restart, held requests, lost acks, 5xx bursts, endpoint C down past\n"+
			"the recovery window, then replayed, endpoint B flapping down and up so that its circuit breaker opens and\n"+
			"closes and auto_replay replays its outages) and press the operator's buttons (double clicks on a dead letter's\n"+
			"replay or skip, Terminate and Reset of event workflows and sequencers); meanwhile pause endpoint A for a few\n"+
			"seconds, keep endpoint S (customer.updated) slow under max_in_flight 3, delete endpoint D (order.shipped)\n"+
			"mid-run (the first tenant's A, B, C, S and D), and void a few sequences the producer lost, then post each again;\n"+
			"each tenant also delivers order.created into NATS JetStream and invoice.issued into Redis Streams, real servers\n"+
			"killed (SIGKILL) and restarted in turn, each read back at the end: nothing missing, repeated or out of order;\n"+
			"wait for quiet and check, per (tenant, correlation, endpoint) lane, nothing of another tenant in it and every\n"+
			"delivery applied exactly once, in order, or dead-lettered or skipped, no\n"+
			"lane stranded, and B's breaker opened, closed and sent far fewer attempts while B was down than unbroken\n"+
			"retries would. Prints one summary line; exits 1 on any violation.\n"+
			"  hookflow chaos --short     1,000 events (about 2,000 deliveries) over 50 correlations, 90s of faults, window 15s (about 3 minutes on 2 cores)\n"+
			"  hookflow chaos             10,000 events over 200 correlations, recovery window 30s\n"+
			"  hookflow chaos --operator-model [--sequences 200] [--seed N] [--short: the fixed seeds of make test]\n"+
			"                             the model-based operator test: seeded sequences of operator actions (replay, skip,\n"+
			"                             raw Web UI signals, double clicks, Terminate, Reset to any workflow task) while the\n"+
			"                             receivers fail, heal or lose acks; two endpoints, each event routed to one or both, a\n"+
			"                             press naming the delivery or not; each on fresh correlations, checked per lane once quiet,\n"+
			"                             the scenarios dealt out to --tenants tenants, neighbouring seeds sharing IDs.\n"+
			"                             Sequence i has seed N+i; a failure prints its seed and actions (window 2s, repair after 2s)",
		[]string{"HOOKFLOW_DATA_DIR", "HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_DELIVERY_TIMEOUT", "HOOKFLOW_REPAIR_AFTER"},
		args, env.getenv,
		map[string]string{
			"HOOKFLOW_DATA_DIR":         filepath.Join(os.TempDir(), "hookflow-chaos"),
			"HOOKFLOW_RECOVERY_WINDOW":  long.RecoveryWindow.String(),
			"HOOKFLOW_DELIVERY_TIMEOUT": long.DeliveryTimeout.String(),
		},
		env.stdout, func(f *flag.FlagSet) {
			fs = f
			f.BoolVar(&short, "short", false, "the short preset: 1,000 events (about 2,000 deliveries), 50 correlations, 90s of faults, recovery window 15s")
			f.BoolVar(&calm, "calm", false, "inject no fault: the same run as a baseline")
			f.Uint64Var(&seed, "seed", long.Seed, "seed of the workload and the fault schedule")
			f.IntVar(&events, "events", long.Events, "events to post (1000 with --short)")
			f.IntVar(&corrs, "correlations", long.Correlations, "correlation IDs to spread them over (50 with --short)")
			f.IntVar(&wrks, "workers", long.Workers, "worker processes")
			f.IntVar(&tenants, "tenants", long.Tenants, "tenants to create and spread the correlations (or, with --operator-model, the scenarios) over, reusing each other's IDs")
			f.DurationVar(&phase, "duration", long.FaultPhase, "how long faults are injected; events are posted over its first 70% (90s with --short)")
			f.DurationVar(&quiet, "quiet-timeout", long.QuietTimeout, "at most how long to wait for every event to settle once posted (20m with --short); the wait also ends after 3 minutes without progress")
			f.BoolVar(&model, "operator-model", false, "run the model-based operator test instead: --sequences scenarios from --seed on")
			f.StringVar(&seedList, "seeds", "", "with --operator-model: a comma-separated list of seeds to run instead (a failure's seed, again)")
			f.IntVar(&sequences, "sequences", chaos.ModelLong().Sequences, "with --operator-model: how many scenarios (seeds --seed, --seed+1, …)")
			f.IntVar(&parallel, "parallel", chaos.ModelLong().Parallel, "with --operator-model: scenarios run at once, each on its own correlations")
			f.DurationVar(&settle, "settle", chaos.ModelLong().Settle, "with --operator-model: at most how long the closing operator waits for a scenario to be quiet")
		})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return &config.UsageError{Msg: fmt.Sprintf("chaos takes no arguments (got %q)", rest[0])}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(name, envName string) bool { return set[name] || (envName != "" && env.getenv(envName) != "") }
	if model {
		var seeds []uint64
		for _, f := range strings.FieldsFunc(seedList, func(r rune) bool { return r == ',' || r == ' ' }) {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return &config.UsageError{Msg: fmt.Sprintf("chaos --seeds: %q is not a seed", f)}
			}
			seeds = append(seeds, n)
		}
		return runOperatorModel(ctx, env, cfg, pick, short, seeds, seed, sequences, parallel, wrks, tenants, settle)
	}
	c := long
	if short {
		c = chaos.Short()
	}
	if pick("seed", "") {
		c.Seed = seed
	}
	if pick("events", "") {
		c.Events = events
	}
	if pick("correlations", "") {
		c.Correlations = corrs
	}
	if pick("workers", "") {
		c.Workers = wrks
	}
	if pick("tenants", "") {
		c.Tenants = tenants
	}
	if pick("duration", "") {
		c.FaultPhase = phase
	}
	if pick("quiet-timeout", "") {
		c.QuietTimeout = quiet
	}
	if pick("recovery-window", "HOOKFLOW_RECOVERY_WINDOW") {
		c.RecoveryWindow = cfg.RecoveryWindow
	}
	if pick("delivery-timeout", "HOOKFLOW_DELIVERY_TIMEOUT") {
		c.DeliveryTimeout = cfg.DeliveryTimeout
	}
	if pick("repair-after", "HOOKFLOW_REPAIR_AFTER") {
		c.RepairAfter = cfg.RepairAfter
	}
	switch {
	case c.Events < c.Correlations || c.Correlations < 2:
		return &config.UsageError{Msg: "chaos needs at least 2 correlations and at least one event per correlation"}
	case c.Workers < 1:
		return &config.UsageError{Msg: "chaos needs at least one worker"}
	case c.Tenants < 1 || c.Tenants > c.Correlations:
		return &config.UsageError{Msg: "chaos --tenants must be between 1 and --correlations"}
	case c.FaultPhase < 10*time.Second:
		return &config.UsageError{Msg: "chaos --duration must be at least 10s"}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the hookflow binary: %w", err)
	}
	c.Binary, c.DataDir, c.Stdout, c.Stderr, c.Calm = self, cfg.DataDir, env.stdout, env.stderr, calm
	res, err := chaos.Run(ctx, c)
	if errors.Is(err, chaos.ErrDataDirInUse) {
		return &config.UsageError{Msg: "HOOKFLOW_DATA_DIR " + err.Error()}
	}
	if err != nil {
		return err
	}
	if !res.Verdict.OK() {
		return errors.New("invariants violated (see the lines above)")
	}
	return nil
}

// runOperatorModel is hookflow chaos --operator-model: the model-based
// operator test on the stack as real processes. Its own short recovery
// window and repair delay apply unless set.
func runOperatorModel(ctx context.Context, env *cliEnv, cfg config.Config, pick func(flag, env string) bool,
	short bool, seeds []uint64, seed uint64, sequences, parallel, workers, tenants int, settle time.Duration) error {
	m := chaos.ModelLong()
	if short {
		m = chaos.ModelShort()
	}
	if !short || pick("seed", "") || pick("sequences", "") {
		m.Seeds, m.Seed, m.Sequences = nil, seed, sequences
	}
	if len(seeds) > 0 {
		m.Seeds = seeds
	}
	if pick("parallel", "") {
		m.Parallel = parallel
	}
	if pick("settle", "") {
		m.Settle = settle
	}
	if pick("workers", "") {
		m.Workers = workers
	}
	if pick("tenants", "") {
		m.Tenants = tenants
	}
	if pick("recovery-window", "HOOKFLOW_RECOVERY_WINDOW") {
		m.RecoveryWindow = cfg.RecoveryWindow
	}
	if pick("delivery-timeout", "HOOKFLOW_DELIVERY_TIMEOUT") {
		m.DeliveryTimeout = cfg.DeliveryTimeout
	}
	if pick("repair-after", "HOOKFLOW_REPAIR_AFTER") {
		m.RepairAfter = cfg.RepairAfter
	}
	switch {
	case len(m.Seeds) == 0 && m.Sequences < 1:
		return &config.UsageError{Msg: "chaos --sequences must be at least 1"}
	case m.Parallel < 1:
		return &config.UsageError{Msg: "chaos --parallel must be at least 1"}
	case m.Workers < 1:
		return &config.UsageError{Msg: "chaos needs at least one worker"}
	case m.Tenants < 1:
		return &config.UsageError{Msg: "chaos --tenants must be at least 1"}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the hookflow binary: %w", err)
	}
	m.Binary, m.DataDir, m.Stdout, m.Stderr = self, cfg.DataDir, env.stdout, env.stderr
	res, err := chaos.RunOperatorModel(ctx, m)
	if errors.Is(err, chaos.ErrDataDirInUse) {
		return &config.UsageError{Msg: "HOOKFLOW_DATA_DIR " + err.Error()}
	}
	if err != nil {
		return err
	}
	if !res.OK() {
		return errors.New("the operator model found violations (see the lines above)")
	}
	return nil
}
