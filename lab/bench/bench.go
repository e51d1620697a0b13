// Package bench measures hookflow against the bare Temporal way of sending a
// webhook, and against the cheapest bare Temporal delivery (a local activity
// on an eagerly started workflow), on one stack and in one run: the same
// Postgres, the same Temporal server, the same receiver. Every service is a child process of the bench,
// so the CPU each one spends is read apart from /proc. Scenarios run in
// rounds, interleaved, so that noise from anything else on the machine hits
// hookflow and the baseline alike; the ratios are what to trust.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Config is one bench run.
type Config struct {
	// Exe is the hookflow binary the stack's processes run from. Required.
	Exe string
	// DataDir holds Postgres and the logs; empty means a temporary folder
	// removed at the end.
	DataDir string
	// Events is the number of measured events per throughput scenario.
	Events int
	// Concurrency is how many producers submit at once.
	Concurrency int
	// Correlations is the number of correlation IDs of the ordered and the
	// fan-out scenarios, and of their tenant-spread twins.
	Correlations int
	// Tenants is how many tenants the tenant-spread twins of the ordered and
	// the fan-out scenarios spread their correlations over; zero runs
	// neither. At most Correlations: each tenant needs a correlation of its
	// own, or the twins would not run the one-tenant scenarios' workload.
	Tenants int
	// Rounds splits each scenario's events into interleaved rounds.
	Rounds int
	// IdleEvents are sent one at a time on a quiet system to measure latency.
	IdleEvents int
	// PostgresFast turns off fsync (throwaway data). Off by default, as in
	// hookflow dev.
	PostgresFast bool
	// CleanerInterval is the API's HOOKFLOW_CLEANER_INTERVAL; zero leaves
	// hookflow's default. The ledger bench shortens it so that the cleaner's
	// runs fall inside each measurement.
	CleanerInterval time.Duration
	// Destinations are the destination types the throughput run delivers
	// the same ordered workload into, after its scenarios, on the same
	// stack (webhook always among them, as what the others are read
	// against); DestinationsAll is every type whose server runs here.
	// Empty: no comparison.
	Destinations []string
	// DestinationEvents is the comparison's measured events per type,
	// over Correlations lanes in Rounds rounds; zero means Events.
	DestinationEvents int
	// Progress receives progress lines (stderr). Nil discards them.
	Progress io.Writer
	// ownReceivers are the addresses of receivers the bench serves from its
	// own process (the dead receiver's), which the workers must be allowed
	// to deliver to as they are the stack's receivers.
	ownReceivers []string
}

// Defaults of Config.
const (
	DefaultEvents      = 2000
	DefaultConcurrency = 16
	// DefaultCorrelations is DefaultTenants, so that the default run's
	// tenant-spread scenarios give every tenant a correlation while running
	// the one-tenant scenarios' lanes.
	DefaultCorrelations = 100
	// DefaultTenants: the one-tenant figures must hold with events spread
	// over 100 tenants, as one hookflow serves a SaaS and its customers.
	DefaultTenants    = 100
	DefaultRounds     = 4
	DefaultIdleEvents = 30
)

// Scenario names, as the table and the JSON show them.
const (
	ScenarioBaseline     = "baseline"
	ScenarioBaselineFast = "baseline-fast"
	ScenarioOrdered      = "hookflow-ordered"
	// ScenarioFanOut is the ordered scenario's shape with every event posted
	// once, without an endpoint, and routed to fanOutEndpoints endpoints.
	ScenarioFanOut    = "hookflow-fanout"
	ScenarioSingleKey = "hookflow-single-key"
	// ScenarioOrderedTenants and ScenarioFanOutTenants are the ordered and
	// the fan-out scenarios with their correlations spread over
	// Config.Tenants tenants, each with endpoints of its own at the same
	// receivers: run beside the one-tenant scenarios, round by round, so
	// that their ratio shows what tenancy costs.
	ScenarioOrderedTenants   = "hookflow-ordered-tenants"
	ScenarioFanOutTenants    = "hookflow-fanout-tenants"
	ScenarioBaselineIdle     = "baseline-idle"
	ScenarioBaselineFastIdle = "baseline-fast-idle"
	ScenarioSingleKeyIdle    = "single-key-idle"
)

// ScenarioNames lists every scenario a run reports, in table order, but
// the tenant-spread ones (TenantScenarioNames), which run only with
// Config.Tenants.
func ScenarioNames() []string {
	return []string{ScenarioBaseline, ScenarioBaselineFast, ScenarioOrdered, ScenarioFanOut, ScenarioSingleKey,
		ScenarioBaselineIdle, ScenarioBaselineFastIdle, ScenarioSingleKeyIdle}
}

// TenantScenarioNames lists the scenarios a run with Config.Tenants adds.
func TenantScenarioNames() []string {
	return []string{ScenarioOrderedTenants, ScenarioFanOutTenants}
}

func (c *Config) defaults() error {
	if c.Exe == "" {
		return errors.New("bench: the hookflow binary is required")
	}
	if c.Events <= 0 {
		c.Events = DefaultEvents
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Correlations <= 0 {
		c.Correlations = DefaultCorrelations
	}
	if c.Tenants < 0 || c.Tenants > c.Correlations {
		return fmt.Errorf("bench: %d tenants over %d correlations: each tenant needs a correlation of its own", c.Tenants, c.Correlations)
	}
	if c.Rounds <= 0 {
		c.Rounds = DefaultRounds
	}
	if c.Rounds > c.Events {
		c.Rounds = c.Events
	}
	if c.IdleEvents < 0 {
		c.IdleEvents = 0
	}
	if c.DestinationEvents <= 0 {
		c.DestinationEvents = c.Events
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

// progress prints timestamped lines to the progress writer.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	began time.Time
}

func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.began).Seconds(), fmt.Sprintf(format, args...))
}

// Run starts the stack, runs every scenario and returns the report. The
// stack is stopped (and a temporary folder removed) before it returns.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	// The brokers start first: the workers must be allowed to reach them.
	dests, err := startDestinations(ctx, &cfg)
	defer dests.close()
	if err != nil {
		return nil, err
	}
	var rep *Report
	err = onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &Report{StartedAt: r.p.began.UTC(), Settings: settingsOf(r.cfg), Machine: m}
		if dests != nil {
			r.s.brokers = dests.pids()
		}
		if err := r.run(ctx); err != nil {
			return err
		}
		if dests != nil {
			d, err := r.compareDestinations(ctx, dests)
			if err != nil {
				return err
			}
			rep.Destinations = d
		}
		r.fill(ctx, rep)
		rep.Machine.LoadAvgEnd = loadAvg()
		rep.Seconds = time.Since(r.p.began).Seconds()
		return nil
	})
	return rep, err
}

// onStack starts a stack for cfg (defaults filled in), runs fn with its
// runner and the machine's description, and stops the stack.
func onStack(ctx context.Context, cfg Config, logger *slog.Logger, fn func(r *runner, m Machine) error) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	p := &progress{w: cfg.Progress, began: time.Now()}
	m := machine()
	s, err := startStack(ctx, cfg, p, logger)
	if err != nil {
		return err
	}
	defer func() {
		p.logf("stopping the stack")
		s.stop()
	}()
	m.Postgres = postgresVersion(ctx, s)
	p.logf("stack up; logs in %s", s.dir)
	return fn(newRunner(cfg, s, p), m)
}

func settingsOf(cfg Config) Settings {
	return Settings{
		Events: cfg.Events, Concurrency: cfg.Concurrency, Correlations: cfg.Correlations, Tenants: cfg.Tenants, Rounds: cfg.Rounds,
		IdleEvents: cfg.IdleEvents, PostgresFsync: !cfg.PostgresFast,
	}
}

func newTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "b" + hex.EncodeToString(b)
}

// machine describes where the bench ran.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb float64
				fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
				m.MemoryGiB = kb / (1024 * 1024)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func postgresVersion(ctx context.Context, s *stack) string {
	var v string
	if err := s.receiverDB.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&v); err != nil {
		return ""
	}
	return v
}
