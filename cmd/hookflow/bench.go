//go:build !deploy

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/lab/bench"
)

const benchSummary = `Measure hookflow against bare Temporal in one run, on one stack it starts and stops itself:
Postgres (under --data-dir, or a temporary folder), the Temporal server, the API, a worker, the
reference receiver (and three more for fan-out) and the two baselines' processes, each a child of the
bench so its CPU is read apart. Scenarios: baseline (one workflow per event, one HTTP activity),
baseline-fast (the same POST as a local activity on an eagerly started workflow: the floor),
hookflow-ordered (POST /v1/events to one endpoint over --correlations keys), hookflow-fanout (the same,
each event posted once without an endpoint and routed to three), their twins hookflow-ordered-tenants and
hookflow-fanout-tenants (the same workload with the correlations spread over --tenants tenants, each
with endpoints of its own; each run beside its twin in every round, and their ratio printed, as
spreading over tenants should cost nothing), hookflow-single-key, then idle latency for both
baselines and a single key. Per webhook delivered it reports history events and Temporal Cloud
actions (counted from every workflow's history by Cloud's published billing rules; docs/performance.md),
beside the bare baseline's, and the fan-out figures against their targets.
After them, --destinations (default all: webhook and every broker whose server runs here, NATS
JetStream and Redis Streams, each started by the bench) runs the ordered workload again,
--destination-events over --correlations lanes in --rounds interleaved rounds, once per destination
type on the same stack, and prints per type deliveries/s, p50/p99 from the 202 to delivered in
hookflow's ledger, CPU seconds per 1,000 deliveries of hookflow's processes and of the broker (the
receiver for webhooks), and each against webhook; then it reads every destination back (missing,
repeated, out of order) and fails the run when one broke its promise. --destinations none skips it.
Prints a table; --json writes every figure. Short run: hookflow bench --events 300.
--ledger-rows 0,1M,5M instead measures hookflow on top of that much synthetic history (written by
SQL into an emptied ledger before each size), with the API's cleaner running every 10s at the
default retentions: accept latency, the ordered scenario's rate, the idle single key, what the
cleaner pruned, hookflow's statements under EXPLAIN, and the bytes per event before and after pruning.
--rate-limit instead measures an endpoint's rate limit: two endpoints with 20 lanes each, one limited
to 5/s, and prints its rate over 60 s of its receiver's commits, the order violations in both
receivers' ledgers, and the unlimited endpoint's rate beside it against its rate alone, for a burst
(which takes the whole machine) and for a steady 4/s (which leaves it headroom: its rate and
post-to-commit latency alone and beside the limited one) (about 8 minutes).
--dead-receiver instead measures the circuit breaker and auto-replay: an endpoint with auto_replay
and --window as its recovery_window, --correlations lanes (default 500 here) of 3 events, whose receiver
(served by the bench) answers 503 from before the first post until --outage is over. It prints the
attempts during the outage against the retry policy's alone, the dead letters and how many hookflow
replayed itself, the time from the comeback to every lane drained, and what the receiver saw: each
event applied once, in its lane's order. It fails when an event is lost, sent again after it was
applied, or out of order, or a dead letter is left to an operator. An outage longer than the window
(--outage 10m --window 5m) has the heads dead-lettered, then auto-replayed.
--slow-receiver instead measures a slow receiver beside fast ones (each lane must hand over on its
own): the fan-out scenario's three endpoints take 150 events over 30 lanes, first all fast, then with
one of them answering every request 10 s late (through a proxy the bench serves), and it prints the two
fast endpoints' lanes' deliveries a second in both runs and their ratio, the slow lane's drain and the
most requests it held at once (under 2 minutes).
--flapping instead measures a flapping receiver (one that must be made to rest): an endpoint with
auto_replay and --flap-disable-after as its disable_after, 20 lanes of 3 events then one event every
2 s, whose receiver (served by the bench) answers 200 once every 6 s and 500 otherwise, for
--flap-duration.
It prints the receiver's requests, the endpoint's attempts, its operational events by type, its
dead-letter rows (and the attempts they hold), and whether and when disable_after tripped; it fails
when it never did (10 minutes by default, mostly waiting).`

// runBench is hookflow bench. "hookflow bench baseline-worker" and
// "hookflow bench baseline-fast-worker" are the baselines' processes, which
// the bench starts itself.
func runBench(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "baseline-worker":
			return runBaselineWorker(ctx, env, args[1:])
		case "baseline-fast-worker":
			return runBaselineFastWorker(ctx, env, args[1:])
		}
	}
	var cfg bench.Config
	var jsonPath, dataDir string
	var soak int
	var ledgerRows, destinations string
	var ledgerBytes int64
	var ledgerDays float64
	var rateLimit, deadReceiver, slowReceiver, flapping bool
	var outage, window, flapDuration, flapDisableAfter time.Duration
	var flags *flag.FlagSet
	_, rest, err := config.LoadWithFlags("bench", benchSummary, nil, args, env.getenv, nil, env.stdout, func(fs *flag.FlagSet) {
		flags = fs
		fs.IntVar(&cfg.Events, "events", bench.DefaultEvents, "measured events per throughput scenario")
		fs.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultConcurrency, "producers submitting at once")
		fs.IntVar(&cfg.Correlations, "correlations", bench.DefaultCorrelations, "correlation IDs of the ordered and fan-out scenarios; with --dead-receiver, its lanes (500 unless given)")
		fs.IntVar(&cfg.Tenants, "tenants", bench.DefaultTenants, "tenants the tenant-spread twins of the ordered and fan-out scenarios spread their correlations over (at most --correlations; 0 runs neither)")
		fs.IntVar(&cfg.Rounds, "rounds", bench.DefaultRounds, "interleaved rounds each scenario's events are split into")
		fs.IntVar(&cfg.IdleEvents, "idle-events", bench.DefaultIdleEvents, "events sent one at a time for idle latency, per system")
		fs.StringVar(&destinations, "destinations", bench.DestinationsAll, "destination types the ordered workload is then delivered into, compared with webhook, comma separated ("+strings.Join(bench.DestinationTypes(), ",")+"), all (those whose server runs here) or none")
		fs.IntVar(&cfg.DestinationEvents, "destination-events", 0, "with --destinations: measured events per destination type (default --events)")
		fs.BoolVar(&cfg.PostgresFast, "postgres-no-fsync", false, "run Postgres without fsync (throwaway data)")
		fs.StringVar(&jsonPath, "json", "", "also write the report as JSON to this file")
		fs.StringVar(&dataDir, "data-dir", "", "folder for Postgres and the logs (default: a temporary folder, removed afterwards)")
		fs.IntVar(&soak, "soak", 0, "instead: post this many events to one correlation in bursts, and report rate, worker RSS and the sequencer's runs per burst")
		fs.StringVar(&ledgerRows, "ledger-rows", "", "instead: measure hookflow on top of each of these sizes of synthetic history, comma separated (0,1M,5M)")
		fs.Int64Var(&ledgerBytes, "ledger-bytes-rows", -1, "with --ledger-rows: delivered events of the ledger whose bytes per event are read before and after pruning (default: the largest size, at most 1M; 0 skips it)")
		fs.BoolVar(&rateLimit, "rate-limit", false, "instead: measure a rate-limited endpoint (5/s, 20 lanes) beside an unlimited one: its rate over 60 s, order, and the other's rate against its rate alone")
		fs.BoolVar(&deadReceiver, "dead-receiver", false, "instead: measure an endpoint with auto_replay whose receiver is down for --outage: attempts during the outage, dead letters auto-replayed, time from its comeback to every lane drained, order and duplicates")
		fs.BoolVar(&slowReceiver, "slow-receiver", false, "instead: measure two fast endpoints' lanes beside one answering 10 s late (fan-out 3), against three fast ones: their deliveries/s and the ratio")
		fs.BoolVar(&flapping, "flapping", false, "instead: measure an endpoint whose receiver answers 200 once every 6 s and 500 otherwise: its attempts, operational events and dead letters, and whether disable_after trips")
		fs.DurationVar(&flapDuration, "flap-duration", bench.DefaultFlapDuration, "with --flapping: how long the receiver flaps")
		fs.DurationVar(&flapDisableAfter, "flap-disable-after", bench.DefaultFlapDisableAfter, "with --flapping: the endpoint's disable_after (at least 1m)")
		fs.DurationVar(&outage, "outage", bench.DefaultDeadOutage, "with --dead-receiver: how long the receiver is down, from before the first post")
		fs.DurationVar(&window, "window", bench.DefaultDeadWindow, "with --dead-receiver: the endpoint's recovery_window")
		fs.Float64Var(&ledgerDays, "ledger-days", bench.DefaultLedgerSpan.Hours()/24, "with --ledger-rows: days the synthetic history is spread over, up to an hour ago (the default is past every retention, so the cleaner has work at once; under 30 it has none)")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return &config.UsageError{Msg: fmt.Sprintf("bench takes no arguments (got %q)", rest[0])}
	}
	if cfg.Destinations, err = bench.ParseDestinations(destinations); err != nil {
		return &config.UsageError{Msg: "--destinations: " + err.Error()}
	}
	if cfg.DestinationEvents < 0 {
		return &config.UsageError{Msg: "--destination-events must not be negative"}
	}
	if cfg.Events <= 0 || cfg.Concurrency <= 0 || cfg.Correlations <= 0 || cfg.Rounds <= 0 || cfg.IdleEvents < 0 || cfg.Tenants < 0 {
		return &config.UsageError{Msg: "--events, --concurrency, --correlations and --rounds must be positive, --idle-events and --tenants not negative"}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the hookflow binary: %w", err)
	}
	cfg.Exe, cfg.DataDir, cfg.Progress = exe, dataDir, env.stderr
	if soak < 0 {
		return &config.UsageError{Msg: "--soak must not be negative"}
	}
	given := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var rep benchReport
	runs := 0
	for _, on := range []bool{rateLimit, deadReceiver, slowReceiver, flapping, soak > 0, ledgerRows != ""} {
		if on {
			runs++
		}
	}
	if runs > 1 {
		return &config.UsageError{Msg: "--rate-limit, --dead-receiver, --slow-receiver, --flapping, --soak and --ledger-rows are different runs: give one"}
	}
	// The tenant-spread scenarios are the throughput run's alone.
	if runs > 0 {
		if given["tenants"] {
			return &config.UsageError{Msg: "--tenants goes with the throughput run, not with --rate-limit, --dead-receiver, --slow-receiver, --flapping, --soak or --ledger-rows"}
		}
		if given["destinations"] || given["destination-events"] {
			return &config.UsageError{Msg: "--destinations and --destination-events go with the throughput run"}
		}
		cfg.Tenants, cfg.Destinations = 0, nil
	} else if cfg.Tenants > cfg.Correlations {
		return &config.UsageError{Msg: fmt.Sprintf("--tenants %d is more than --correlations %d: each tenant needs a correlation of its own", cfg.Tenants, cfg.Correlations)}
	}
	if (given["flap-duration"] || given["flap-disable-after"]) && !flapping {
		return &config.UsageError{Msg: "--flap-duration and --flap-disable-after go with --flapping"}
	}
	if (given["outage"] || given["window"]) && !deadReceiver {
		return &config.UsageError{Msg: "--outage and --window go with --dead-receiver"}
	}
	if deadReceiver {
		if outage <= 0 || window <= 0 {
			return &config.UsageError{Msg: "--outage and --window must be positive"}
		}
		// The ordered scenario's default is not the dead receiver's: an outage
		// is measured over 500 lanes, enough to load the breaker and the replay.
		c := bench.DeadReceiverCase{Correlations: bench.DefaultDeadCorrelations, Outage: outage, Window: window}
		if given["correlations"] {
			c.Correlations = cfg.Correlations
		}
		rep, err = bench.DeadReceiver(ctx, cfg, []bench.DeadReceiverCase{c}, app.NewLogger(env.stderr))
	} else if flapping {
		if flapDuration <= 0 || flapDisableAfter < time.Minute {
			return &config.UsageError{Msg: "--flap-duration must be positive and --flap-disable-after at least 1m"}
		}
		rep, err = bench.Flapping(ctx, cfg, bench.FlappingCase{Duration: flapDuration, DisableAfter: flapDisableAfter}, app.NewLogger(env.stderr))
	} else if slowReceiver {
		rep, err = bench.SlowReceiver(ctx, cfg, app.NewLogger(env.stderr))
	} else if rateLimit {
		rep, err = bench.RateLimit(ctx, cfg, app.NewLogger(env.stderr))
	} else if ledgerRows != "" {
		sizes, perr := bench.ParseLedgerRows(ledgerRows)
		if perr != nil {
			return &config.UsageError{Msg: "--ledger-rows: " + perr.Error()}
		}
		if ledgerDays <= 0 {
			return &config.UsageError{Msg: "--ledger-days must be positive"}
		}
		span := time.Duration(ledgerDays * float64(24*time.Hour))
		rep, err = bench.Ledger(ctx, cfg, bench.LedgerConfig{Sizes: sizes, BytesRows: ledgerBytes, Span: span}, app.NewLogger(env.stderr))
	} else if soak > 0 {
		cfg.Events = soak
		rep, err = bench.Soak(ctx, cfg, app.NewLogger(env.stderr))
	} else {
		rep, err = bench.Run(ctx, cfg, app.NewLogger(env.stderr))
	}
	if err != nil {
		return err
	}
	if jsonPath != "" {
		if err := rep.WriteJSON(jsonPath); err != nil {
			return err
		}
	}
	if err := rep.WriteTable(env.stdout); err != nil {
		return err
	}
	if v, ok := rep.(verdict); ok {
		return v.Err()
	}
	return nil
}

// benchReport is what a bench run or a soak prints and saves.
type benchReport interface {
	WriteJSON(path string) error
	WriteTable(w io.Writer) error
}

// verdict is a report that judges its run (the dead receiver's: an event
// lost, duplicated or out of order): the command fails when the run did,
// once the figures are out.
type verdict interface {
	Err() error
}

func runBaselineWorker(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "bench baseline-worker", "The bench's baseline worker (started by hookflow bench): one workflow per event, one signed HTTP POST to the receiver.", args,
		[]string{"HOOKFLOW_TEMPORAL_ADDRESS", "HOOKFLOW_TEMPORAL_NAMESPACE", "HOOKFLOW_TASK_QUEUE", "HOOKFLOW_RECEIVER_ADDR", "HOOKFLOW_RECEIVER_SECRET"}, nil)
	if err != nil {
		return err
	}
	secrets, err := parseSecrets(cfg.ReceiverSecrets)
	if err != nil {
		return err
	}
	logger := app.NewLogger(env.stderr)
	c, err := app.TemporalClient(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	return bench.RunBaselineWorker(ctx, c, bench.WorkerConfig{
		TaskQueue: cfg.TaskQueue, ReceiverURL: "http://" + cfg.ReceiverAddr + "/webhook", Secrets: secrets,
	}, logger)
}

// runBaselineFastWorker is the fast baseline's process: its worker, and the
// endpoint on HOOKFLOW_API_ADDR that starts each event's workflow eagerly
// with that worker's client.
func runBaselineFastWorker(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "bench baseline-fast-worker", "The bench's fast baseline (started by hookflow bench): POST /start on HOOKFLOW_API_ADDR starts an event's workflow eagerly on this process's own worker, which makes one signed HTTP POST to the receiver as a local activity.", args,
		[]string{"HOOKFLOW_TEMPORAL_ADDRESS", "HOOKFLOW_TEMPORAL_NAMESPACE", "HOOKFLOW_TASK_QUEUE", "HOOKFLOW_API_ADDR", "HOOKFLOW_RECEIVER_ADDR", "HOOKFLOW_RECEIVER_SECRET"}, nil)
	if err != nil {
		return err
	}
	secrets, err := parseSecrets(cfg.ReceiverSecrets)
	if err != nil {
		return err
	}
	return bench.RunFastBaseline(ctx, bench.FastConfig{
		TemporalAddress: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, TaskQueue: cfg.TaskQueue,
		ListenAddr: cfg.APIAddr, ReceiverURL: "http://" + cfg.ReceiverAddr + "/webhook", Secrets: secrets,
	}, app.NewLogger(env.stderr))
}
