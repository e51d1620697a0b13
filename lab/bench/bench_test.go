package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/lab/bench"
)

// TestBenchShortRun builds the hookflow binary and runs the short bench end
// to end (real Postgres, real Temporal server, real processes). It prints the
// figures and checks that every scenario delivered every event; it never
// asserts on speed, which depends on the machine and whatever else runs on it.
func TestBenchShortRun(t *testing.T) {
	bin := buildHookflow(t)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Without the tenant-spread twins, which would add two scenarios to
	// every round and a hundred tenants' set-up to make test's budget;
	// TestTenancySpreadsCorrelations covers their spreading, the full
	// bench their figures. Without the destinations comparison either,
	// which costs a minute more than make test's budget allows:
	// TestBenchShortRunDestinations runs it.
	cmd := exec.CommandContext(ctx, bin, "bench", "--events", "300", "--correlations", "50", "--tenants", "0", "--idle-events", "10", "--destinations", "none", "--json", jsonPath)
	// On timeout, interrupt: the bench then stops its stack (Postgres too).
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("hookflow bench --events 300 --correlations 50 --tenants 0:\n%s", stdout.String())
	require.NoError(t, err, "stderr:\n%s", stderr.String())

	table := stdout.String()
	for _, name := range bench.ScenarioNames() {
		require.Contains(t, table, name)
	}
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	got := map[string]bench.ScenarioResult{}
	for _, s := range rep.Scenarios {
		got[s.Name] = s
	}
	for _, name := range bench.ScenarioNames() {
		s, ok := got[name]
		require.True(t, ok, "scenario %s missing from the JSON", name)
		require.Positive(t, s.Events, name)
		require.Equal(t, s.Events, s.Delivered, "%s: every event delivered (to every endpoint)", name)
		fanOut := 1
		if name == bench.ScenarioFanOut {
			fanOut = 3
		}
		require.Equal(t, fanOut*s.Delivered, s.Deliveries, "%s: one webhook per event and endpoint, each receiver's ledger holding each event once", name)
		require.Positive(t, s.EventsPerSec, name)
		require.InDelta(t, float64(fanOut)*s.EventsPerSec, s.DeliveriesPerSec, 1e-9, name)
		if strings.HasPrefix(name, bench.ScenarioBaselineFast) {
			// Its worker may commit before the start call's answer reaches
			// the bench (eager start), so its accept→commit can be about 0.
			require.Positive(t, s.LatencyMS.Max, name)
		} else {
			require.Positive(t, s.LatencyMS.P50, name)
		}
		if strings.HasPrefix(name, "hookflow-") {
			require.NotNil(t, s.InOrder, name)
			require.True(t, *s.InOrder, "%s: every receiver applied every correlation in order", name)
			require.Positive(t, s.HistoryPerEvent, name)
			// What the receivers' ledgers cannot show: hookflow sent each
			// lane in order (the kit would have parked an early one) and
			// recorded every delivery delivered. A repeat after a 2xx may
			// be a legitimate retry (a timeout on a busy machine): logged.
			require.NotNil(t, s.Lanes, name)
			require.GreaterOrEqual(t, s.Lanes.Deliveries, int64(s.Deliveries), "%s: its rounds' deliveries, and the warm-up's", name)
			require.Zero(t, s.Lanes.NotDelivered, "%s: deliveries not delivered in hookflow's ledger", name)
			require.Zero(t, s.Lanes.OutOfOrder, "%s: deliveries sent before their lane's previous sequence was delivered", name)
			t.Logf("%s: %d deliveries in hookflow's ledger, %d delivered twice", name, s.Lanes.Deliveries, s.Lanes.DeliveredTwice)
		}
	}
	// Every throughput scenario's bill is counted from its histories, and
	// read against the bare baseline's of this run. No single-endpoint
	// scenario can take fewer than two per delivery: a start, and a
	// delivery (activity or marker). Fan-out shares its event's start, its
	// local activities' one action per workflow task and its sequencer's
	// work over its deliveries: no floor but zero.
	for _, name := range []string{bench.ScenarioBaseline, bench.ScenarioBaselineFast, bench.ScenarioOrdered, bench.ScenarioFanOut, bench.ScenarioSingleKey} {
		s := got[name]
		if name == bench.ScenarioFanOut {
			require.Positive(t, s.ActionsPerDelivery, name)
		} else {
			require.GreaterOrEqual(t, s.ActionsPerDelivery, 2.0, name)
		}
		require.Positive(t, s.ActionsVsBaseline, name)
		t.Logf("%s: %.2f actions per delivery (%.2f own + %.2f sequencer share), %.2f× the baseline's, %.2f× baseline-fast's",
			name, s.ActionsPerDelivery, s.ActionsWorkflow, s.ActionsSequencerShare, s.ActionsVsBaseline, s.ActionsVsBaselineFast)
	}
	require.Contains(t, table, "actions/delivery")
	require.Positive(t, rep.Ratios.OrderedVsBaseline)
	require.Positive(t, rep.Ratios.OrderedVsBaselineFast)
	require.Positive(t, rep.Ratios.SingleKeyVsBaselineFast)
	require.Len(t, rep.Ratios.OrderedPerRoundVsFast, rep.Settings.Rounds)
	// The fast baseline is only the floor if its starts really ran eagerly.
	require.NotNil(t, rep.EagerStarts)
	require.Positive(t, rep.EagerStarts.Accepted, "no fast baseline start ran eagerly")
	// Every sequencer run is counted, and each ordered correlation has one.
	require.Len(t, rep.Sequencers, 3)
	for _, s := range rep.Sequencers {
		require.GreaterOrEqual(t, s.Runs, s.Correlations, s.Scenario)
		require.Positive(t, s.MaxRunLength, s.Scenario)
		require.Positive(t, s.ActionsPerEvent, s.Scenario)
	}
	require.Len(t, rep.Targets, 6)
	for _, tg := range rep.Targets {
		require.NotEmpty(t, tg.Measured, tg.Goal)
	}
	require.Contains(t, table, "targets:")
	// The fan-out figures are printed, never asserted: the machine decides them.
	require.Len(t, rep.FanOutTargets, 4)
	for _, tg := range rep.FanOutTargets {
		require.NotEmpty(t, tg.Measured, tg.Figure)
		require.Contains(t, table, tg.Figure)
		t.Logf("fan-out: %s: %s; target %s", tg.Figure, tg.Measured, tg.Goal)
	}
	require.Positive(t, rep.Ratios.FanOutVsOrdered)
}

// TestBenchShortRunDestinations runs the bench small with the destinations
// comparison (real Postgres, Temporal server, NATS and Redis servers, and
// processes): the same ordered workload into a webhook, a NATS JetStream
// and a Redis Streams destination on one stack. It prints the figures and
// fails when a type did not deliver every event, or its destination,
// read back, misses, repeats or reorders one; it never asserts on speed.
// Its short form costs about a minute and a half over TestBenchShortRun's
// stack, more than make test's stack runs can take, so make test leaves it
// out (its name keeps it out of the race-enabled unit run as well): run it
// with go test -count=1 -run TestBenchShortRunDestinations ./lab/bench/.
func TestBenchShortRunDestinations(t *testing.T) {
	bin := buildHookflow(t)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	args := []string{"bench", "--events", "20", "--correlations", "5", "--tenants", "0", "--idle-events", "0", "--rounds", "2",
		"--destinations", "webhook,nats,redis", "--destination-events", "40", "--json", jsonPath}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = moduleRoot(t) // the NATS server is built from the module's requirement
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("hookflow %s:\n%s", strings.Join(args, " "), stdout.String())
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	require.Contains(t, stdout.String(), "destinations:")

	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	d := rep.Destinations
	require.NotNil(t, d)
	require.Empty(t, d.Skipped)
	require.Len(t, d.Types, 3)
	for i, typ := range []string{"webhook", "nats", "redis"} {
		r := d.Types[i]
		require.Equal(t, typ, r.Type)
		require.Equal(t, 40, r.Events, typ)
		require.Equal(t, r.Events, r.Deliveries, "%s: every event delivered", typ)
		require.Positive(t, r.DeliveriesPerSec, typ)
		require.Positive(t, r.LatencyMS.P50, typ)
		require.Positive(t, r.HookflowCPUPer1000, typ)
		require.Positive(t, r.DeliveriesPerSecVsWebhook, typ)
		require.Positive(t, r.CPUVsWebhook, typ)
		require.Len(t, r.PerRoundVsWebhook, 2, typ)
		c := r.Check
		require.True(t, c.OK, "%s: %+v", typ, c)
		require.Empty(t, c.Error, typ)
		require.Equal(t, 5, c.Lanes, typ)
		// The measured events and the warm-up's one per lane, held once
		// each and in order.
		require.Equal(t, 45, c.Delivered, typ)
		require.Equal(t, c.Delivered, c.Stored, typ)
		require.Zero(t, c.Missing+c.Repeated+c.OutOfOrder+c.ChainBreaks+c.BadSignature+c.Foreign+c.NotDelivered, "%s: %+v", typ, c)
		require.Contains(t, stdout.String(), typ+" check: PASS")
		t.Logf("%s: %.1f deliveries/s (%.2f× webhook), p50 %.0f ms, p99 %.0f ms, %.2f CPU s per 1,000 deliveries (%.2f hookflow + %.2f destination; %.2f× webhook)",
			typ, r.DeliveriesPerSec, r.DeliveriesPerSecVsWebhook, r.LatencyMS.P50, r.LatencyMS.P99, r.TotalCPUPer1000, r.HookflowCPUPer1000, r.DestinationCPUPer1000, r.CPUVsWebhook)
	}
	require.InDelta(t, 1, d.Types[0].DeliveriesPerSecVsWebhook, 1e-9)
	// Each broker's CPU is read (a few dozen writes may cost less than
	// /proc's 10 ms tick, so it is not asserted positive).
	require.Contains(t, d.Types[1].CPUPer1000, "broker-nats")
	require.Contains(t, d.Types[2].CPUPer1000, "broker-redis")
}

// TestBenchDeadReceiverShortRun runs the dead-receiver bench small, end to
// end (real Postgres, Temporal server and processes), two cases at once on
// one stack: an outage shorter than the recovery window, and one longer,
// whose heads are dead-lettered. It fails on any event lost, sent again or
// out of order, and on a dead letter hookflow did not replay itself; its
// times are printed, never asserted.
func TestBenchDeadReceiverShortRun(t *testing.T) {
	bin := buildHookflow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rep, err := bench.DeadReceiver(ctx, bench.Config{Exe: bin, Progress: t.Output()}, []bench.DeadReceiverCase{
		{Correlations: 20, Outage: 20 * time.Second, Window: 5 * time.Minute},
		{Correlations: 20, Outage: 20 * time.Second, Window: 8 * time.Second},
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Logf("hookflow bench --dead-receiver, short:\n%s", table.String())
	require.NoError(t, rep.Err())
	require.Len(t, rep.Cases, 2)
	within, longer := rep.Cases[0], rep.Cases[1]
	require.Less(t, within.OutageAttempts, int64(within.WithoutBreaker), "the breaker holds the heads to its probes")
	require.Positive(t, longer.DeadLetters, "an outage longer than the window dead-letters the heads")
	require.Equal(t, longer.DeadLetters, longer.AutoReplayed, "and hookflow replays them once the receiver is back")
}

// buildHookflow builds the hookflow binary the bench's processes run from.
func buildHookflow(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hookflow")
	build := exec.Command("go", "build", "-o", bin, "./cmd/hookflow")
	build.Dir = moduleRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	gomod := strings.TrimSpace(string(out))
	require.NotEmpty(t, gomod, "not inside the hookflow module")
	require.NotEqual(t, os.DevNull, gomod, "not inside the hookflow module")
	return filepath.Dir(gomod)
}
