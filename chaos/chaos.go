// Package chaos runs hookflow as real processes — Postgres, the Temporal
// server, the API, several workers and the reference receiver — under
// injected faults, then checks hookflow's promises against the receiver's
// ledger: every accepted event applied exactly once or dead-lettered with a
// row, in sequence order per correlation, nothing left in flight.
//
// Faults come from a seeded schedule: SIGKILLed workers, a Postgres crash and
// restart, a Temporal server crash and restart, and, in a proxy between the
// workers and the receiver, held requests past the HTTP timeout, lost
// acknowledgements (the receiver committed, the sender's connection is
// reset), 5xx bursts, and one endpoint down for longer than the recovery
// window, healed and replayed afterwards.
package chaos

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/devstack"
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
	// KillEvery is the mean gap between worker SIGKILLs; BurstEvery between 5xx bursts.
	KillEvery, BurstEvery time.Duration
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
		KillEvery: 10 * time.Second, BurstEvery: 15 * time.Second, Latency: 0.03, LostAck: 0.05,
		QuietTimeout: 20 * time.Minute, Posters: 8,
	}
}

// Long is the default run: 10,000 events over 200 correlations.
func Long() Config {
	return Config{
		Seed: 1, Events: 10000, Correlations: 200, DuplicateRate: 0.10, Workers: 3,
		FaultPhase: 10 * time.Minute, RecoveryWindow: 30 * time.Second, DeliveryTimeout: 2 * time.Second,
		KillEvery: 10 * time.Second, BurstEvery: 20 * time.Second, Latency: 0.03, LostAck: 0.05,
		QuietTimeout: time.Hour, Posters: 8,
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
	api1     *apiClient
	recv     *apiClient
	hf, rcv  *pgxpool.Pool

	wl       *Workload
	healthy  []string // endpoint ids
	downEp   string
	downHeal atomic.Bool

	outMu      sync.Mutex
	mu         sync.Mutex
	faults     map[string]int
	unexpected map[string]int
	accepted   map[string]bool
	rejected   []string
	replayed   map[string]int
	downDL     int
	posted     atomic.Int64
	postTries  atomic.Int64
	postErrs   atomic.Int64 // no answer within the producer's 10 s timeout, or a connection error
	post5xx    atomic.Int64
}

// Run starts the stack, runs the workload under the fault schedule, waits for
// quiet and checks the invariants. The error is for a run that could not be
// carried out (a service that would not start); broken invariants are in
// the Result's Verdict.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := validate(&cfg); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, began: time.Now(), faults: map[string]int{}, unexpected: map[string]int{},
		accepted: map[string]bool{}, replayed: map[string]int{}}
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
		time.Since(r.began).Round(100*time.Millisecond), r.api1.base, r.api1.token, cfg.Workers, r.recv.base, r.logs)

	if err := r.exercise(ctx); err != nil {
		return Result{}, err
	}
	v, err := r.check(ctx)
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

// prepareDir makes the data folder: empty, or an earlier run's (wiped, after
// stopping a Postgres an earlier crashed run may have left behind). As root
// Postgres runs as the postgres user, so the folder must be traversable.
func (r *run) prepareDir() error {
	dir, err := filepath.Abs(r.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("data folder: %w", err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
			return fmt.Errorf("%s: %w", dir, ErrDataDirInUse)
		}
		KillStalePostgres(dir)
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("wipe earlier chaos run: %w", err)
			}
		}
	}
	r.dir, r.logs = dir, filepath.Join(dir, "logs")
	if err := os.MkdirAll(r.logs, 0o755); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, marker), []byte("a hookflow chaos run; the next run wipes this folder\n"), 0o644)
}

// KillStalePostgres SIGKILLs a Postgres still running on dataDir/postgres
// (left behind by a chaos run that was itself killed).
func KillStalePostgres(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postgres", "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 1 {
		return
	}
	if p, err := os.FindProcess(pid); err == nil && p.Signal(syscallZero) == nil {
		_ = p.Kill()
		for i := 0; i < 50 && p.Signal(syscallZero) == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// startStack brings every service up, in order.
func (r *run) startStack(ctx, superCtx context.Context) error {
	cfg := r.cfg
	pgPort, err := devstack.FreePort()
	if err != nil {
		return err
	}
	r.pg = &pgHolder{cfg: devstack.PostgresConfig{
		// Not Fast: that turns synchronous_commit off, and a crashed server
		// would then lose commits it acknowledged, which is no fault of hookflow.
		DataDir: filepath.Join(r.dir, "postgres"), Port: pgPort,
		LogFile: filepath.Join(r.logs, "postgres.log"),
	}, logger: r.logger}
	t0 := time.Now()
	if err := r.pg.start(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	for _, db := range []string{"hookflow", "hookflow_receiver"} {
		if err := r.pg.get().EnsureDatabase(ctx, db); err != nil {
			return err
		}
	}
	r.progressf("postgres up on 127.0.0.1:%d (%s)", pgPort, time.Since(t0).Round(100*time.Millisecond))

	temporalPort, err := devstack.FreeLowPort()
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := r.startTemporal(ctx, pgPort, temporalPort); err != nil {
		return err
	}
	r.progressf("temporal server up on 127.0.0.1:%d (%s)", temporalPort, time.Since(t0).Round(100*time.Millisecond))

	hfURL := r.pg.get().AdminURL("hookflow")
	common := map[string]string{
		"HOOKFLOW_DATABASE_URL":          hfURL,
		"HOOKFLOW_TEMPORAL_ADDRESS":      net.JoinHostPort("127.0.0.1", strconv.Itoa(temporalPort)),
		"HOOKFLOW_RECOVERY_WINDOW":       cfg.RecoveryWindow.String(),
		"HOOKFLOW_DELIVERY_TIMEOUT":      cfg.DeliveryTimeout.String(),
		"HOOKFLOW_ALLOW_PRIVATE_TARGETS": "true",
	}
	if err := runOnce(ctx, "migrate", cfg.Binary, []string{"migrate"}, childEnv(common), filepath.Join(r.logs, "migrate.log")); err != nil {
		return err
	}

	apiPort, err := devstack.FreePort()
	if err != nil {
		return err
	}
	token := randomHex(16)
	apiEnv := with(common, map[string]string{"HOOKFLOW_API_ADDR": net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)), "HOOKFLOW_API_TOKEN": token})
	r.api = newProc("api", cfg.Binary, []string{"api"}, childEnv(apiEnv), filepath.Join(r.logs, "api.log"))
	if err := r.api.start(); err != nil {
		return err
	}
	r.procs = append(r.procs, r.api)
	r.api1 = newAPIClient(fmt.Sprintf("http://127.0.0.1:%d", apiPort), token)
	if err := r.api1.waitHealthy(ctx, "/healthz", time.Minute, r.api.running); err != nil {
		return fmt.Errorf("api: %w; log %s ends: %s", err, r.api.logPath, tail(r.api.logPath, 3))
	}

	// The proxy listens first so the endpoints can point at it; it learns
	// the receiver's address now and reaches it once deliveries start.
	recvPort, err := devstack.FreePort()
	if err != nil {
		return err
	}
	recvBase := fmt.Sprintf("http://127.0.0.1:%d", recvPort)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fault proxy: %w", err)
	}
	r.proxy = NewProxy(recvBase+"/webhook", cfg.Seed, cfg.DeliveryTimeout+500*time.Millisecond, ProxyFaults{Latency: cfg.Latency, LostAck: cfg.LostAck})
	r.proxy.SetDown(true)
	r.proxySrv = &http.Server{Handler: r.proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.proxySrv.Serve(ln) }()
	proxyBase := "http://" + ln.Addr().String()

	var secrets []string
	for i := 0; i < 3; i++ {
		ep, err := r.api1.createEndpoint(ctx, fmt.Sprintf("%s/ok/%d/webhook", proxyBase, i))
		if err != nil {
			return err
		}
		r.healthy = append(r.healthy, ep.ID)
		secrets = append(secrets, ep.Secret)
	}
	down, err := r.api1.createEndpoint(ctx, proxyBase+"/down/webhook")
	if err != nil {
		return err
	}
	r.downEp = down.ID
	secrets = append(secrets, down.Secret)

	recvEnv := map[string]string{
		"HOOKFLOW_RECEIVER_ADDR":         net.JoinHostPort("127.0.0.1", strconv.Itoa(recvPort)),
		"HOOKFLOW_RECEIVER_SECRET":       strings.Join(secrets, " "),
		"HOOKFLOW_RECEIVER_DATABASE_URL": r.pg.get().AdminURL("hookflow_receiver"),
	}
	r.receiver = newProc("receiver", cfg.Binary, []string{"receiver"}, childEnv(recvEnv), filepath.Join(r.logs, "receiver.log"))
	if err := r.receiver.start(); err != nil {
		return err
	}
	r.procs = append(r.procs, r.receiver)
	r.recv = newAPIClient(recvBase, "")
	if err := r.recv.waitHealthy(ctx, "/healthz", time.Minute, r.receiver.running); err != nil {
		return fmt.Errorf("receiver: %w; log %s ends: %s", err, r.receiver.logPath, tail(r.receiver.logPath, 3))
	}

	for i := 0; i < cfg.Workers; i++ {
		w := newProc(fmt.Sprintf("worker-%d", i+1), cfg.Binary, []string{"worker"}, childEnv(common), filepath.Join(r.logs, fmt.Sprintf("worker-%d.log", i+1)))
		if err := w.start(); err != nil {
			return err
		}
		r.workers = append(r.workers, w)
		r.procs = append(r.procs, w)
	}
	for _, w := range r.workers {
		if err := w.waitLog(ctx, "worker started", time.Minute); err != nil {
			return err
		}
	}

	if r.hf, err = pgxpool.New(ctx, hfURL); err != nil {
		return fmt.Errorf("connect hookflow database: %w", err)
	}
	if r.rcv, err = pgxpool.New(ctx, r.pg.get().AdminURL("hookflow_receiver")); err != nil {
		return fmt.Errorf("connect receiver database: %w", err)
	}
	for _, p := range r.procs {
		go p.supervise(superCtx, r.onUnexpectedExit)
	}
	return nil
}

// startTemporal starts `hookflow temporal` without its Web UI, or with one
// on a free port when this build does not accept UI port 0.
func (r *run) startTemporal(ctx context.Context, pgPort, port int) error {
	env := map[string]string{
		"HOOKFLOW_DEV_POSTGRES_PORT": strconv.Itoa(pgPort),
		"HOOKFLOW_DEV_TEMPORAL_PORT": strconv.Itoa(port),
		"HOOKFLOW_DEV_UI_PORT":       "0",
		"HOOKFLOW_DATA_DIR":          r.logs,
	}
	logPath := filepath.Join(r.logs, "temporal-server.log")
	var err error
	for try := 0; try < 4; try++ {
		p := newProc("temporal", r.cfg.Binary, []string{"temporal"}, childEnv(env), logPath)
		if err = p.start(); err != nil {
			return err
		}
		if err = p.waitLog(ctx, "temporal server running", 3*time.Minute); err == nil {
			r.temporal = p
			r.procs = append(r.procs, p)
			return nil
		}
		p.stop(5 * time.Second)
		if ctx.Err() != nil {
			break
		}
		if strings.Contains(err.Error(), "HOOKFLOW_DEV_UI_PORT") {
			ui, perr := devstack.FreeLowPort()
			if perr != nil {
				return perr
			}
			env["HOOKFLOW_DEV_UI_PORT"] = strconv.Itoa(ui)
			r.logger.Warn("this build refuses HOOKFLOW_DEV_UI_PORT=0; the temporal server gets a Web UI port", "ui_port", ui)
			continue
		}
		// Its internal ports are picked at random below 32768 and can
		// collide with another process's; a new start picks new ones.
		r.logger.Warn("temporal server failed to start; trying again", "error", err)
	}
	return fmt.Errorf("temporal: %w", err)
}

func (r *run) onUnexpectedExit(name, how string) {
	r.mu.Lock()
	r.unexpected[name]++
	r.mu.Unlock()
	r.logger.Warn("process exited on its own; restarting", "process", name, "how", how)
	r.progressf("%s exited on its own (%s); restarting it", name, how)
}

// exercise posts the workload under the fault schedule, then stops the
// faults and waits for quiet.
func (r *run) exercise(ctx context.Context) error {
	cfg := r.cfg
	r.phase0 = time.Now()
	phaseEnd := r.phase0.Add(cfg.FaultPhase)
	plan := Plan(PlanConfig{Seed: cfg.Seed, Phase: cfg.FaultPhase, Workers: cfg.Workers, KillEvery: cfg.KillEvery, BurstEvery: cfg.BurstEvery})
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
	r.progressf("fault phase over: no more kills, restarts or bursts; waiting for the last posts")
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

// postAll posts the workload in its shuffled order, paced over spread, from
// several goroutines, each post retried (as a producer would) until the API
// answers or the deadline passes.
func (r *run) postAll(ctx context.Context, spread time.Duration, deadline time.Time) {
	posts := r.wl.Posts
	interval := spread / time.Duration(len(posts))
	items := make(chan int)
	var wg sync.WaitGroup
	for i := 0; i < r.cfg.Posters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range items {
				r.postOne(ctx, r.wl.Events[posts[k]], deadline)
				r.posted.Add(1)
			}
		}()
	}
	start := time.Now()
	for k := range posts {
		if d := time.Until(start.Add(time.Duration(k) * interval)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		items <- k
	}
	close(items)
	wg.Wait()
}

func (r *run) postOne(ctx context.Context, ev Event, deadline time.Time) {
	ep := r.downEp
	if !ev.Down {
		ep = r.healthy[ev.Endpoint]
	}
	body := eventPost{ID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ep,
		Type: "chaos.amount", Data: map[string]any{"amount": ev.Amount}}
	backoff := 200 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		code, resp, err := r.api1.postEvent(pctx, body)
		cancel()
		r.postTries.Add(1)
		if err != nil {
			r.postErrs.Add(1)
			r.logger.Warn("post unanswered", "event_id", ev.ID, "error", err)
		} else if code >= 500 {
			r.post5xx.Add(1)
		}
		switch {
		case err == nil && (code == http.StatusOK || code == http.StatusAccepted):
			r.mu.Lock()
			r.accepted[ev.ID] = true
			r.mu.Unlock()
			return
		case err == nil && code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
			r.mu.Lock()
			r.rejected = append(r.rejected, fmt.Sprintf("%s: %d %s", ev.ID, code, strings.TrimSpace(string(resp))))
			r.mu.Unlock()
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			r.logger.Error("post gave up", "event_id", ev.ID, "code", code, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

// runFaults carries out the timed schedule.
func (r *run) runFaults(ctx context.Context, plan []Action) {
	for _, a := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(r.phase0.Add(a.At))):
		}
		t0 := time.Now()
		switch a.Kind {
		case KindKillWorker:
			r.workers[a.Worker].kill()
		case KindRestartPostgres:
			how, err := r.pg.restart(ctx)
			if err != nil {
				r.progressf("postgres restart failed: %v", err)
				r.logger.Error("postgres restart", "error", err)
				continue
			}
			r.progressf("postgres restarted (%s, back in %s)", how, time.Since(t0).Round(100*time.Millisecond))
		case KindRestartTemporal:
			starts := r.temporal.startCount()
			r.temporal.kill()
			go func() {
				// The supervisor starts it again on the same ports; say when it is back.
				if err := r.temporal.waitNextStart(ctx, starts, "temporal server running", 3*time.Minute); err == nil {
					r.progressf("temporal server SIGKILLed and back in %s", time.Since(t0).Round(100*time.Millisecond))
				}
			}()
		case KindBurst:
			r.proxy.SetBurst(true, a.RetryAfter)
			time.AfterFunc(a.For, func() { r.proxy.SetBurst(false, false) })
		}
		r.mu.Lock()
		r.faults[a.Kind]++
		r.mu.Unlock()
		r.logger.Info("fault injected", "fault", a.String(), "at", time.Since(r.phase0).Round(100*time.Millisecond).String())
	}
}

// healDown keeps the down endpoint down until every down correlation's head
// has dead-lettered (so at least one recovery window), or until deadline.
func (r *run) healDown(ctx context.Context, deadline time.Time) {
	earliest := r.phase0.Add(r.cfg.RecoveryWindow + 5*time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if time.Now().Before(earliest) {
			continue
		}
		dls, err := r.api1.deadLetters(ctx, r.downEp)
		if err != nil {
			continue
		}
		heads := map[string]bool{}
		for _, d := range dls {
			if d.Sequence == 1 {
				heads[d.CorrelationID] = true
			}
		}
		if len(heads) >= len(r.wl.Down) {
			break
		}
	}
	if ctx.Err() == nil {
		r.heal(ctx)
	}
}

// heal ends the down endpoint's outage and replays its dead letters, as an
// operator would once the receiver is fixed.
func (r *run) heal(ctx context.Context) {
	if r.downHeal.Swap(true) {
		return
	}
	r.proxy.SetDown(false)
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		dls, _ := r.api1.deadLetters(ctx, r.downEp)
		ids, err := r.api1.replay(ctx, r.downEp)
		if err == nil {
			r.noteReplayed(ids)
			r.progressf("down endpoint healed after %s: %d dead letters, %d replayed", time.Since(r.phase0).Round(time.Second), len(dls), len(ids))
			return
		}
		r.logger.Warn("replay of the down endpoint failed; trying again", "error", err)
		time.Sleep(2 * time.Second)
	}
}

func (r *run) noteReplayed(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.replayed[id]++
	}
}

// operator replays the open dead letters of the healthy endpoints (and of
// the down one once healed) every so often, as an on-call operator would.
func (r *run) operator(ctx context.Context, every time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		r.replayAll(ctx)
	}
}

func (r *run) replayAll(ctx context.Context) {
	eps := append([]string(nil), r.healthy...)
	if r.downHeal.Load() {
		eps = append(eps, r.downEp)
	}
	for _, ep := range eps {
		ids, err := r.api1.replay(ctx, ep)
		if err != nil {
			r.logger.Warn("operator replay failed", "endpoint_id", ep, "error", err)
			continue
		}
		if len(ids) > 0 {
			r.noteReplayed(ids)
			r.logger.Info("operator replayed dead letters", "endpoint_id", ep, "count", len(ids))
		}
	}
}

// counts reads hookflow's events by state and its open dead letters.
func (r *run) counts(ctx context.Context) (map[string]int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.hf.Query(ctx, "SELECT state, count(*) FROM events GROUP BY state")
	if err != nil {
		return nil, 0, err
	}
	states := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, 0, err
		}
		states[s] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var open int
	if err := r.hf.QueryRow(ctx, "SELECT count(*) FROM dead_letters WHERE status = 'open'").Scan(&open); err != nil {
		return nil, 0, err
	}
	return states, open, nil
}

func pending(states map[string]int) int {
	return states["queued"] + states["waiting"] + states["delivering"]
}

func (r *run) progressLoop(ctx context.Context) {
	last, lastAt := -1, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		last, lastAt = r.progressLine(ctx, last, lastAt)
	}
}

// progressLine prints one line; last and lastAt are the delivered count at
// the previous line, for the rate.
func (r *run) progressLine(ctx context.Context, last int, lastAt time.Time) (int, time.Time) {
	r.mu.Lock()
	accepted := len(r.accepted)
	r.mu.Unlock()
	line := fmt.Sprintf("posted %d/%d (accepted %d/%d)", r.posted.Load(), len(r.wl.Posts), accepted, len(r.wl.Events))
	states, open, err := r.counts(ctx)
	if err != nil {
		line += " | hookflow db unavailable"
	} else {
		d := states[stateDelivered]
		rate := ""
		if last >= 0 {
			rate = fmt.Sprintf(" (%.1f/s)", float64(d-last)/time.Since(lastAt).Seconds())
		}
		line += fmt.Sprintf(" | delivered %d%s in-flight %d dead-lettered %d (open %d)", d, rate, pending(states), states[stateDeadLettered], open)
		last, lastAt = d, time.Now()
	}
	total, _ := r.faultTotals()
	r.progressf("%s | faults %d", line, total)
	return last, lastAt
}

// waitQuiet waits until no event is in a non-final state and no dead letter
// is open, replaying what dead-letters meanwhile, or until QuietTimeout.
func (r *run) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.QuietTimeout)
	// A slow machine is no violation, a stall is: give up once nothing has
	// moved for this long (longer than a Temporal recovery and a window).
	stall := max(3*time.Minute, 4*r.cfg.RecoveryWindow)
	lastReplay, lastMove, lastSeen := time.Time{}, time.Now(), ""
	r.progressf("waiting for quiet (at most %s, or %s without progress)", r.cfg.QuietTimeout, stall)
	for {
		states, open, err := r.counts(ctx)
		if err == nil && pending(states) == 0 && open == 0 {
			r.progressf("quiet after %s: %d delivered, %d skipped", time.Since(r.began).Round(time.Second), states[stateDelivered], states[stateSkipped])
			break
		}
		if err == nil {
			if seen := fmt.Sprint(states, open); seen != lastSeen {
				lastSeen, lastMove = seen, time.Now()
			}
		}
		if err == nil && open > 0 && time.Since(lastReplay) > 5*time.Second {
			r.replayAll(ctx)
			lastReplay = time.Now()
		}
		if time.Now().After(deadline) {
			r.progressf("no quiet within %s; checking what there is", r.cfg.QuietTimeout)
			break
		}
		if time.Since(lastMove) > stall {
			r.progressf("nothing moved for %s; checking what there is", stall)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	// Requests the proxy still holds may yet reach the receiver.
	r.proxy.Wait(r.cfg.DeliveryTimeout + 15*time.Second)
	return nil
}

// check gathers hookflow's ledger, the receiver's ledger and its API
// answers, and runs Check.
func (r *run) check(ctx context.Context) (Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	o := Observed{States: map[string]string{}, DeadLetters: map[string]string{}, Receiver: map[string]receiverCorrelation{}}
	r.mu.Lock()
	o.Accepted = make(map[string]bool, len(r.accepted))
	for k := range r.accepted {
		o.Accepted[k] = true
	}
	o.Rejected = append(o.Rejected, r.rejected...)
	r.mu.Unlock()

	rows, err := r.hf.Query(ctx, "SELECT id, state FROM events")
	if err != nil {
		return Verdict{}, fmt.Errorf("read hookflow events: %w", err)
	}
	kv, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ K, V string }])
	if err != nil {
		return Verdict{}, fmt.Errorf("read hookflow events: %w", err)
	}
	for _, x := range kv {
		o.States[x.K] = x.V
	}
	rows, err = r.hf.Query(ctx, "SELECT event_id, status FROM dead_letters")
	if err != nil {
		return Verdict{}, fmt.Errorf("read dead letters: %w", err)
	}
	if kv, err = pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ K, V string }]); err != nil {
		return Verdict{}, fmt.Errorf("read dead letters: %w", err)
	}
	for _, x := range kv {
		o.DeadLetters[x.K] = x.V
	}

	readLedger := func(q string) ([]LedgerEntry, error) {
		rows, err := r.rcv.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerEntry])
	}
	// entry_no is the order of application.
	if o.Ledger, err = readLedger("SELECT event_id, correlation_id, sequence FROM ledger_entries ORDER BY entry_no"); err != nil {
		return Verdict{}, fmt.Errorf("read receiver ledger: %w", err)
	}
	if o.Processed, err = readLedger("SELECT event_id, correlation_id, sequence FROM processed_events"); err != nil {
		return Verdict{}, fmt.Errorf("read receiver processed_events: %w", err)
	}
	var downDL int
	if err := r.hf.QueryRow(ctx, "SELECT count(*) FROM dead_letters WHERE endpoint_id = $1", r.downEp).Scan(&downDL); err != nil {
		return Verdict{}, fmt.Errorf("read dead letters: %w", err)
	}
	r.mu.Lock()
	r.downDL = downDL
	r.mu.Unlock()
	if downDL == 0 && !r.cfg.Calm {
		r.progressf("warning: no event of the down endpoint dead-lettered; that fault did not happen in this run")
	}
	if err := r.rcv.QueryRow(ctx, "SELECT count(*) FROM parked_events").Scan(&o.Parked); err != nil {
		return Verdict{}, fmt.Errorf("read receiver parked_events: %w", err)
	}
	for _, corr := range r.wl.Correlations {
		rc, code, err := r.recv.receiverCorrelation(ctx, corr)
		if err != nil {
			return Verdict{}, err
		}
		if code == http.StatusOK {
			o.Receiver[corr] = rc
		}
	}
	o.AppliedAnswers = r.proxy.AppliedAnswers()
	return Check(r.wl, o), nil
}

// faultTotals returns the number of faults injected and their breakdown.
func (r *run) faultTotals() (int, string) {
	ps := r.proxy.Stats()
	r.mu.Lock()
	defer r.mu.Unlock()
	total := r.faults[KindKillWorker] + r.faults[KindRestartPostgres] + r.faults[KindRestartTemporal] +
		int(ps.Burst503+ps.Latency+ps.LostAcks+ps.DownAnswers)
	var unexpected []string
	exits := 0
	for name, n := range r.unexpected {
		unexpected = append(unexpected, fmt.Sprintf("%s:%d", name, n))
		exits += n
	}
	sort.Strings(unexpected)
	b := fmt.Sprintf("faults: worker_kills=%d postgres_restarts=%d temporal_restarts=%d 5xx_bursts=%d (503s=%d) held_past_timeout=%d lost_acks=%d down_endpoint_answers=%d | unexpected_exits=%d %s",
		r.faults[KindKillWorker], r.faults[KindRestartPostgres], r.faults[KindRestartTemporal], r.faults[KindBurst], ps.Burst503,
		ps.Latency, ps.LostAcks, ps.DownAnswers, exits, strings.Join(unexpected, ","))
	return total, strings.TrimSpace(b)
}

func (r *run) result(v Verdict) Result {
	total, breakdown := r.faultTotals()
	ps := r.proxy.Stats()
	r.mu.Lock()
	replays := 0
	for _, n := range r.replayed {
		replays += n
	}
	breakdown += fmt.Sprintf(" | dead letters on the down endpoint=%d, replays=%d | posts=%d (duplicates %d; tries %d, unanswered %d, 5xx %d) | deliveries through the proxy=%d, parked answers=%d",
		r.downDL, replays, len(r.wl.Posts), r.wl.Duplicates, r.postTries.Load(), r.postErrs.Load(), r.post5xx.Load(), ps.Requests, ps.Parked)
	r.mu.Unlock()
	wall := time.Since(r.began).Round(time.Second)
	summary := fmt.Sprintf("events=%d applied=%d dead_lettered=%d lost=%d duplicates=%d order_violations=%d faults=%d stuck=%d mismatches=%d not_accepted=%d seed=%d wall=%s",
		v.Events, v.Applied, v.DeadLettered, v.Lost, v.Duplicates, v.OrderViolations, total, v.Stuck, v.Mismatches, v.NotAccepted, r.cfg.Seed, wall)
	return Result{Verdict: v, Faults: breakdown, Summary: summary, Wall: wall}
}

// teardown stops everything the run started, children first, Postgres last.
func (r *run) teardown(stopSupervisors context.CancelFunc) {
	var wg sync.WaitGroup
	for _, p := range r.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
	stopSupervisors()
	if r.proxySrv != nil {
		_ = r.proxySrv.Close()
	}
	if r.hf != nil {
		r.hf.Close()
	}
	if r.rcv != nil {
		r.rcv.Close()
	}
	if r.pg != nil {
		time.Sleep(300 * time.Millisecond) // let the backends of closed connections exit and be reaped
		r.pg.stop()
	}
}

// cpuLine says how much CPU each part used over the run (Postgres: the
// postmaster and its reaped backends, per server incarnation), and per
// delivered event.
func (r *run) cpuLine() string {
	var parts []string
	var total time.Duration
	add := func(name string, d time.Duration) {
		total += d
		parts = append(parts, fmt.Sprintf("%s=%.0fs", name, d.Seconds()))
	}
	var workers time.Duration
	for _, w := range r.workers {
		workers += w.cpuTime()
	}
	if r.temporal != nil {
		add("temporal", r.temporal.cpuTime())
	}
	add("postgres", r.pg.cpuTime())
	add("workers", workers)
	if r.api != nil {
		add("api", r.api.cpuTime())
	}
	if r.receiver != nil {
		add("receiver", r.receiver.cpuTime())
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		add("chaos", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
	}
	return fmt.Sprintf("cpu seconds: %s, total %.0fs (%.0f ms per event)", strings.Join(parts, " "), total.Seconds(),
		float64(total.Milliseconds())/float64(max(1, len(r.wl.Events))))
}

func (r *run) progressf(format string, args ...any) {
	el := time.Since(r.began).Round(time.Second)
	line := fmt.Sprintf("chaos %s: %s\n", el, fmt.Sprintf(format, args...))
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, _ = io.WriteString(r.cfg.Stderr, line)
}

func with(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
