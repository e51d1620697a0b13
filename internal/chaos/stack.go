package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	hfclient "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/localpg"
)

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
	pgPort, err := localpg.FreePort()
	if err != nil {
		return err
	}
	r.pg = &pgHolder{cfg: localpg.Config{
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

	temporalPort, err := localpg.FreeLowPort()
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := r.startTemporal(ctx, pgPort, temporalPort); err != nil {
		return err
	}
	r.progressf("temporal server up on 127.0.0.1:%d (%s)", temporalPort, time.Since(t0).Round(100*time.Millisecond))

	// The fault proxy, where every endpoint points, listens before the API
	// and the workers start: they allow exactly its address, although it is
	// on loopback.
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fault proxy: %w", err)
	}
	token := randomHex(16)
	r.token = token
	hfURL := r.pg.get().AdminURL("hookflow")
	common := map[string]string{
		"HOOKFLOW_DATABASE_URL":             hfURL,
		"HOOKFLOW_TEMPORAL_ADDRESS":         net.JoinHostPort("127.0.0.1", strconv.Itoa(temporalPort)),
		"HOOKFLOW_RECOVERY_WINDOW":          cfg.RecoveryWindow.String(),
		"HOOKFLOW_DELIVERY_TIMEOUT":         cfg.DeliveryTimeout.String(),
		"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST": proxyLn.Addr().String(),
		"HOOKFLOW_API_TOKEN":                token,
	}
	if err := runOnce(ctx, "migrate", cfg.Binary, []string{"migrate"}, childEnv(common), filepath.Join(r.logs, "migrate.log")); err != nil {
		return err
	}

	apiPort, err := localpg.FreePort()
	if err != nil {
		return err
	}
	apiEnv := with(common, map[string]string{"HOOKFLOW_API_ADDR": net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))})
	r.api = newProc("api", cfg.Binary, []string{"api"}, childEnv(apiEnv), filepath.Join(r.logs, "api.log"))
	if err := r.api.start(); err != nil {
		return err
	}
	r.procs = append(r.procs, r.api)
	apiBase := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	r.api1, err = hfclient.New(apiBase, token, hfclient.WithHTTPClient(&http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32},
	}))
	if err != nil {
		return err
	}
	healthz := func(ctx context.Context) error { _, err := r.api1.Healthz(ctx); return err }
	if err := waitHealthy(ctx, apiBase+"/healthz", healthz, time.Minute, r.api.running); err != nil {
		return fmt.Errorf("api: %w; log %s ends: %s", err, r.api.logPath, tail(r.api.logPath, 3))
	}

	// The proxy serves now so the endpoints can point at it; it learns the
	// receiver's address now and reaches it once deliveries start.
	recvPort, err := localpg.FreePort()
	if err != nil {
		return err
	}
	recvBase := fmt.Sprintf("http://127.0.0.1:%d", recvPort)
	r.proxy = NewProxy(recvBase+"/webhook", cfg.Seed, cfg.DeliveryTimeout+500*time.Millisecond, ProxyFaults{Latency: cfg.Latency, LostAck: cfg.LostAck})
	r.proxy.SetDown(true)
	r.proxySrv = &http.Server{Handler: r.proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.proxySrv.Serve(proxyLn) }()
	proxyBase := "http://" + proxyLn.Addr().String()

	var secrets []string
	for i := 0; i < 3; i++ {
		ep, err := r.api1.EndpointCreate(ctx, hfclient.EndpointCreateRequest{URL: fmt.Sprintf("%s/ok/%d/webhook", proxyBase, i)})
		if err != nil {
			return fmt.Errorf("create endpoint: %w", err)
		}
		r.healthy = append(r.healthy, ep.ID)
		secrets = append(secrets, ep.Secret)
	}
	down, err := r.api1.EndpointCreate(ctx, hfclient.EndpointCreateRequest{URL: proxyBase + "/down/webhook"})
	if err != nil {
		return fmt.Errorf("create endpoint: %w", err)
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
	r.recv = receiverClient{base: recvBase, http: &http.Client{Timeout: 15 * time.Second}}
	if err := waitHealthy(ctx, recvBase+"/healthz", r.recv.healthz, time.Minute, r.receiver.running); err != nil {
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
	if r.tc, err = dialTemporal(ctx, common["HOOKFLOW_TEMPORAL_ADDRESS"], r.logger); err != nil {
		return err
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
			ui, perr := localpg.FreeLowPort()
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

// teardown stops everything the run started, children first, Postgres last.
func (r *run) teardown(stopSupervisors context.CancelFunc) {
	var wg sync.WaitGroup
	for _, p := range r.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
	stopSupervisors()
	if r.tc != nil {
		r.tc.Close()
	}
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

// dialTemporal connects the operator's client (the namespace hookflow
// uses by default). The SDK's own chatter goes to the run's log from Warn
// up; it retries through the Temporal restart by itself.
func dialTemporal(ctx context.Context, address string, logger *slog.Logger) (client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{
		HostPort: address, Namespace: temporalNamespace,
		Logger: sdklog.NewStructuredLogger(slog.New(levelFloor{logger.Handler(), slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to the temporal server: %w", err)
	}
	return c, nil
}

// temporalNamespace is the namespace the stack's processes use (hookflow's
// default).
const temporalNamespace = "default"

// levelFloor drops the records below min.
type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(attrs), h.min}
}

func (h levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(name), h.min}
}
