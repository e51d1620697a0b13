//go:build !deploy

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hookflow/hookflow/internal/chaos"
	"github.com/hookflow/hookflow/internal/config"
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
		phase, quiet        time.Duration
	)
	cfg, rest, err := config.LoadWithFlags("chaos",
		"Run Postgres, the Temporal server, migrate, the API, worker processes and the reference receiver as real\n"+
			"processes; inject faults on a seeded schedule (worker SIGKILLs, a Postgres and a Temporal crash-restart,\n"+
			"held requests, lost acks, 5xx bursts, an endpoint down past the recovery window, then replayed) and press\n"+
			"the operator's buttons (double clicks on a dead letter's replay or skip, Terminate and Reset of event\n"+
			"workflows and sequencers); wait for quiet and check every event applied exactly once, in order, or\n"+
			"dead-lettered or skipped, and no correlation stranded. Prints one summary line; exits 1 on any violation.\n"+
			"  hookflow chaos --short     1,000 events over 50 correlations, 90s of faults, window 15s (4-5 minutes on 2 cores)\n"+
			"  hookflow chaos             10,000 events over 200 correlations, recovery window 30s",
		[]string{"HOOKFLOW_DATA_DIR", "HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_DELIVERY_TIMEOUT"},
		args, env.getenv,
		map[string]string{
			"HOOKFLOW_DATA_DIR":         filepath.Join(os.TempDir(), "hookflow-chaos"),
			"HOOKFLOW_RECOVERY_WINDOW":  long.RecoveryWindow.String(),
			"HOOKFLOW_DELIVERY_TIMEOUT": long.DeliveryTimeout.String(),
		},
		env.stdout, func(f *flag.FlagSet) {
			fs = f
			f.BoolVar(&short, "short", false, "the short preset: 1,000 events, 50 correlations, 90s of faults, recovery window 15s")
			f.BoolVar(&calm, "calm", false, "inject no fault: the same run as a baseline")
			f.Uint64Var(&seed, "seed", long.Seed, "seed of the workload and the fault schedule")
			f.IntVar(&events, "events", long.Events, "events to post (1000 with --short)")
			f.IntVar(&corrs, "correlations", long.Correlations, "correlation IDs to spread them over (50 with --short)")
			f.IntVar(&wrks, "workers", long.Workers, "worker processes")
			f.DurationVar(&phase, "duration", long.FaultPhase, "how long faults are injected; events are posted over its first 70% (90s with --short)")
			f.DurationVar(&quiet, "quiet-timeout", long.QuietTimeout, "at most how long to wait for every event to settle once posted (20m with --short); the wait also ends after 3 minutes without progress")
		})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return &config.UsageError{Msg: fmt.Sprintf("chaos takes no arguments (got %q)", rest[0])}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c := long
	if short {
		c = chaos.Short()
	}
	pick := func(name, envName string) bool { return set[name] || (envName != "" && env.getenv(envName) != "") }
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
	switch {
	case c.Events < c.Correlations || c.Correlations < 2:
		return &config.UsageError{Msg: "chaos needs at least 2 correlations and at least one event per correlation"}
	case c.Workers < 1:
		return &config.UsageError{Msg: "chaos needs at least one worker"}
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
