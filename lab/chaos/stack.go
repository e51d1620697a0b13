package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/oapi-codegen/nullable"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/localpg"
)

// stack is the run's processes and the handles on them: Postgres, the
// Temporal server, the API, the workers and the reference receiver as
// supervised child processes, the fault proxy between the workers and the
// receiver, the endpoints that point at it, and the clients the other
// parts of the run reach them with. It starts them in order, restarts
// those that die on their own (counting them) and stops them all at the
// end; the faults kill and restart them through it.
type stack struct {
	cfg       Config
	dir, logs string // the data folder, and its logs folder
	logger    *slog.Logger
	progress  *progress

	pg       *pgHolder
	temporal *proc
	// disrupt is held shared by the operator model's closings and alone
	// by a move that disrupts the whole stack (a Temporal outage, every
	// worker killed): such a move never lands in another scenario's
	// closing, whose settle is too short for what it delays, and two of
	// them never overlap.
	disrupt sync.RWMutex
	// disrupted is when the last such move ended (written under disrupt
	// held alone): a try of an activity lost in it holds its lane until its
	// start-to-close timeout, which a closing waits out (settleUntil).
	disrupted time.Time
	api       *proc
	receivers []*proc // one per kind of endpoint (Subscriber.Receiver)
	workers   []*proc
	procs     []*proc // all the above but Postgres: supervised, stopped at the end
	// stopSupervisors ends the supervisors of procs, which restart them.
	stopSupervisors context.CancelFunc

	proxy    *Proxy
	proxySrv *http.Server
	// brokers are the broker destinations' nats-server and redis-server
	// (nil: a run without them, Config.Brokers).
	brokers *brokers

	// client is the run's client of hookflow's API, for the producer's
	// posts and the operator's buttons; tokenFile holds its bootstrap token.
	client    *hfclient.Client
	tokenFile string
	apiHTTP   *http.Client // shared by every client of the API
	// tenants are the clients of the tenants' own keys (createTenants).
	tenants map[string]*hfclient.Client
	// recv and rcv reach endpoint i's receiver: its API and its database,
	// shared by the tenants' endpoints of its kind (rcvPools, one per
	// receiver); recvAddrs are where each receiver listens now.
	recv      []receiverClient
	recvAddrs []*receiverAddr
	rcv       []*pgxpool.Pool
	rcvPools  []*pgxpool.Pool
	hf        *pgxpool.Pool // hookflow's database
	// tc is the operator's client of the Temporal server, for Terminate,
	// Reset and the queries of the checks.
	tc        client.Client
	endpoints endpoints

	mu         sync.Mutex
	unexpected map[string]int // exits nobody caused, by process name
}

// endpoints are the run's endpoints in hookflow, by index (Config.Subscribers),
// each pointing at its path on the fault proxy, which forwards to a receiver
// of its own; down is the index of the one that is down for a while, and
// flapping of the one that goes down and up again (-1: none). secrets are
// their signing secrets, which their receivers verify with: another endpoint
// created with one of them (the operator model's own) can point at the same
// path.
type endpoints struct {
	ids, secrets   []string
	down, flapping int
	// proxyBase is the fault proxy's address, before Path(i).
	proxyBase string
	// paused is disabled for a while, slow answers slowly, deleted is
	// deleted mid-run (-1: none).
	paused, slow, deleted int
}

// index returns the index of the endpoint with hookflow id id, or -1.
func (e endpoints) index(id string) int {
	return slices.Index(e.ids, id)
}

func newStack(cfg Config, dir, logs string, logger *slog.Logger, out *progress) *stack {
	return &stack{cfg: cfg, dir: dir, logs: logs, logger: logger, progress: out, unexpected: map[string]int{}}
}

// prepareDir makes the data folder: empty, or an earlier run's (wiped, after
// stopping a Postgres an earlier crashed run may have left behind), and
// returns it and its logs folder. As root Postgres runs as the postgres
// user, so the folder must be traversable.
func prepareDir(dataDir string) (dir, logs string, err error) {
	dir, err = filepath.Abs(dataDir)
	if err != nil {
		return "", "", fmt.Errorf("data folder: %w", err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", "", fmt.Errorf("data folder: %w", err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
			return "", "", fmt.Errorf("%s: %w", dir, ErrDataDirInUse)
		}
		KillStalePostgres(dir)
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return "", "", fmt.Errorf("wipe earlier chaos run: %w", err)
			}
		}
	}
	logs = filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return "", "", fmt.Errorf("data folder: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("data folder: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, marker), []byte("a hookflow chaos run; the next run wipes this folder\n"), 0o644); err != nil {
		return "", "", err
	}
	return dir, logs, nil
}

// writeToken writes the API's bootstrap token to dir/api-token, readable
// by this user alone, and returns its path: the progress says where the
// token is, never the token itself.
func writeToken(dir, token string) (string, error) {
	path := filepath.Join(dir, "api-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the API token: %w", err)
	}
	return path, nil
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

// start brings every service up, in order, and their supervisors with
// them.
func (s *stack) start(ctx context.Context) error {
	cfg := s.cfg
	// The supervisors and the receivers' followers outlive start's ctx
	// until stop.
	superCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopSupervisors = stop
	pgPort, err := localpg.FreePort()
	if err != nil {
		return err
	}
	s.pg = &pgHolder{cfg: localpg.Config{
		// Not Fast: that turns synchronous_commit off, and a crashed server
		// would then lose commits it acknowledged, which is no fault of hookflow.
		DataDir: filepath.Join(s.dir, "postgres"), Port: pgPort,
		LogFile: filepath.Join(s.logs, "postgres.log"),
	}, logger: s.logger}
	t0 := time.Now()
	if err := s.pg.start(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := s.pg.get().EnsureDatabase(ctx, "hookflow"); err != nil {
		return err
	}
	s.progress.printf("postgres up on 127.0.0.1:%d (%s)", pgPort, time.Since(t0).Round(100*time.Millisecond))

	temporalPort, err := localpg.FreeLowPort()
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := s.startTemporal(ctx, pgPort, temporalPort); err != nil {
		return err
	}
	s.progress.printf("temporal server up on 127.0.0.1:%d (%s)", temporalPort, time.Since(t0).Round(100*time.Millisecond))

	// The fault proxy, where every endpoint points, listens before the API
	// and the workers start: they allow exactly its address, although it is
	// on loopback; and the brokers' addresses likewise.
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fault proxy: %w", err)
	}
	allow := []string{proxyLn.Addr().String()}
	if cfg.Brokers {
		t0 = time.Now()
		if s.brokers, err = startBrokers(ctx, filepath.Join(s.dir, "brokers")); err != nil {
			return err
		}
		allow = append(allow, s.brokers.addrs()...)
		s.progress.printf("brokers up: nats-server on %s, redis-server on %s (%s)", s.brokers.nats.Addr(), s.brokers.redis.Addr(), time.Since(t0).Round(100*time.Millisecond))
	}
	token := randomHex(16)
	if s.tokenFile, err = writeToken(s.dir, token); err != nil {
		return err
	}
	hfURL := s.pg.get().AdminURL("hookflow")
	common := map[string]string{
		"HOOKFLOW_DATABASE_URL":             hfURL,
		"HOOKFLOW_TEMPORAL_ADDRESS":         net.JoinHostPort("127.0.0.1", strconv.Itoa(temporalPort)),
		"HOOKFLOW_RECOVERY_WINDOW":          cfg.RecoveryWindow.String(),
		"HOOKFLOW_DELIVERY_TIMEOUT":         cfg.DeliveryTimeout.String(),
		"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST": strings.Join(allow, ","),
		"HOOKFLOW_API_TOKEN":                token,
	}
	if cfg.EventMaxHistory > 0 {
		// The workers' too: their starter restarts a terminated event when
		// a release reaches it.
		common["HOOKFLOW_EVENT_MAX_HISTORY"] = strconv.Itoa(cfg.EventMaxHistory)
	}
	if err := runOnce(ctx, "migrate", cfg.Binary, []string{"migrate"}, childEnv(common), filepath.Join(s.logs, "migrate.log")); err != nil {
		return err
	}

	apiPort, err := localpg.FreePort()
	if err != nil {
		return err
	}
	apiEnv := with(common, map[string]string{"HOOKFLOW_API_ADDR": net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))})
	if cfg.RepairAfter > 0 {
		apiEnv["HOOKFLOW_REPAIR_AFTER"] = cfg.RepairAfter.String()
	}
	s.api = newProc("api", cfg.Binary, []string{"api"}, childEnv(apiEnv), filepath.Join(s.logs, "api.log"))
	if err := s.api.start(); err != nil {
		return err
	}
	s.procs = append(s.procs, s.api)
	apiBase := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	s.apiHTTP = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	s.client, err = hfclient.New(apiBase, token, hfclient.WithHTTPClient(s.apiHTTP))
	if err != nil {
		return err
	}
	healthz := func(ctx context.Context) error { _, err := s.client.HealthzWithResponse(ctx); return err }
	if err := waitHealthy(ctx, apiBase+"/healthz", healthz, time.Minute, s.api.running); err != nil {
		return fmt.Errorf("api: %w; log %s ends: %s", err, s.api.logPath, tail(s.api.logPath, 3))
	}

	if err := s.createTenants(ctx, apiBase); err != nil {
		return err
	}

	// The proxy serves now so the endpoints can point at it. Each kind of
	// endpoint (Subscriber.Receiver) has a receiver of its own (its own
	// database, its secret), since each applies its own subset of a
	// correlation in order; the tenants' endpoints of one kind are created
	// with its secret and share it, which keeps their lanes apart by the
	// envelope's endpoint_id. Each endpoint has a path of its own on the
	// proxy, so that the proxy knows whose delivery it forwards. The proxy
	// learns where a receiver listens once it has bound its port, and
	// again after each of its restarts (followReceiver).
	nrecv := 0
	var tenants []string
	for _, sub := range cfg.Subscribers {
		nrecv = max(nrecv, sub.Receiver+1)
		tenants = append(tenants, sub.tenant())
	}
	s.proxy = NewProxy(make([]string, len(cfg.Subscribers)), cfg.Seed, cfg.DeliveryTimeout+500*time.Millisecond, ProxyFaults{Latency: cfg.Latency, LostAck: cfg.LostAck})
	s.proxy.SetTenants(tenants)
	s.endpoints.down, s.endpoints.flapping = cfg.Down, cfg.Flapping
	s.proxy.SetDown(cfg.Down)
	s.proxy.SetFlapping(cfg.Flapping)
	sit := cfg.situations()
	s.endpoints.paused, s.endpoints.slow, s.endpoints.deleted = sit.Paused, sit.Slow, sit.Deleted
	s.proxy.SetSlow(sit.Slow, slowHold(cfg.DeliveryTimeout))
	s.proxySrv = &http.Server{Handler: s.proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.proxySrv.Serve(proxyLn) }()
	proxyBase := "http://" + proxyLn.Addr().String()
	s.endpoints.proxyBase = proxyBase

	recvSecrets := make([]string, nrecv)
	recvProcs := make([]*proc, nrecv)
	s.recvAddrs = make([]*receiverAddr, nrecv)
	for r := range s.recvAddrs {
		s.recvAddrs[r] = &receiverAddr{}
	}
	for i, sub := range cfg.Subscribers {
		req := hfclient.EndpointCreate{URL: proxyBase + Path(i), EventTypes: eventTypes(sub.EventTypes)}
		if i == cfg.Flapping {
			req.CircuitFailureThreshold, req.AutoReplay = nullable.NewNullableWithValue[int64](flapThreshold), nullable.NewNullableWithValue(true)
		}
		if i == sit.Slow {
			req.MaxInFlight = nullable.NewNullableWithValue[int64](slowInFlight)
		}
		if sub.Filter != nil {
			req.Filter = nullable.NewNullableWithValue(sub.Filter.JSON())
		}
		if secret := recvSecrets[sub.Receiver]; secret != "" {
			req.Secret = &secret
		}
		r, err := s.apiOf(i).EndpointCreateWithResponse(ctx, req)
		if err != nil {
			return fmt.Errorf("create endpoint %s: %w", sub.Name, err)
		}
		ep := r.JSON201
		s.endpoints.ids = append(s.endpoints.ids, ep.ID)
		s.endpoints.secrets = append(s.endpoints.secrets, ep.Secret)
		if recvSecrets[sub.Receiver] == "" {
			recvSecrets[sub.Receiver] = ep.Secret
			if recvProcs[sub.Receiver], err = s.startReceiver(ctx, sub, ep.Secret); err != nil {
				return err
			}
		}
		s.recv = append(s.recv, s.receiverClient(sub.Receiver))
	}
	if s.brokers != nil {
		if err := s.brokers.createDests(ctx, cfg.tenantList(), s.tenantAPI); err != nil {
			return err
		}
	}
	for r, rp := range recvProcs {
		go s.followReceiver(superCtx, r, rp)
	}
	for r, rp := range recvProcs {
		if err := waitHealthy(ctx, rp.name+"'s /healthz", s.receiverClient(r).healthz, time.Minute, rp.running); err != nil {
			return fmt.Errorf("%s: %w; log %s ends: %s", rp.name, err, rp.logPath, tail(rp.logPath, 3))
		}
	}

	for i := 0; i < cfg.Workers; i++ {
		w := newProc(fmt.Sprintf("worker-%d", i+1), cfg.Binary, []string{"worker"}, childEnv(common), filepath.Join(s.logs, fmt.Sprintf("worker-%d.log", i+1)))
		if err := w.start(); err != nil {
			return err
		}
		s.workers = append(s.workers, w)
		s.procs = append(s.procs, w)
	}
	for _, w := range s.workers {
		if err := w.waitLog(ctx, "worker started", time.Minute); err != nil {
			return err
		}
	}

	if s.hf, err = pgxpool.New(ctx, hfURL); err != nil {
		return fmt.Errorf("connect hookflow database: %w", err)
	}
	for r := range nrecv {
		pool, err := pgxpool.New(ctx, s.pg.get().AdminURL(receiverDatabase(r)))
		if err != nil {
			return fmt.Errorf("connect receiver database: %w", err)
		}
		s.rcvPools = append(s.rcvPools, pool)
	}
	for _, sub := range cfg.Subscribers {
		s.rcv = append(s.rcv, s.rcvPools[sub.Receiver])
	}
	if s.tc, err = dialTemporal(ctx, common["HOOKFLOW_TEMPORAL_ADDRESS"], s.logger); err != nil {
		return err
	}
	for _, p := range s.procs {
		go p.supervise(superCtx, s.onUnexpectedExit)
	}
	return nil
}

// startTemporal starts `hookflow temporal` without its Web UI, or with one
// on a free port when this build does not accept UI port 0.
func (s *stack) startTemporal(ctx context.Context, pgPort, port int) error {
	env := map[string]string{
		"HOOKFLOW_DEV_POSTGRES_PORT": strconv.Itoa(pgPort),
		"HOOKFLOW_DEV_TEMPORAL_PORT": strconv.Itoa(port),
		"HOOKFLOW_DEV_UI_PORT":       "0",
		"HOOKFLOW_DATA_DIR":          s.logs,
	}
	logPath := filepath.Join(s.logs, "temporal-server.log")
	var err error
	for try := 0; try < 4; try++ {
		p := newProc("temporal", s.cfg.Binary, []string{"temporal"}, childEnv(env), logPath)
		if err = p.start(); err != nil {
			return err
		}
		if err = p.waitLog(ctx, "temporal server running", 3*time.Minute); err == nil {
			s.temporal = p
			s.procs = append(s.procs, p)
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
			s.logger.Warn("this build refuses HOOKFLOW_DEV_UI_PORT=0; the temporal server gets a Web UI port", "ui_port", ui)
			continue
		}
		// Its internal ports are picked at random below 32768 and can
		// collide with another process's; a new start picks new ones.
		s.logger.Warn("temporal server failed to start; trying again", "error", err)
	}
	return fmt.Errorf("temporal: %w", err)
}

func (s *stack) onUnexpectedExit(name, how string) {
	s.mu.Lock()
	s.unexpected[name]++
	s.mu.Unlock()
	s.logger.Warn("process exited on its own; restarting", "process", name, "how", how)
	s.progress.printf("%s exited on its own (%s); restarting it", name, how)
}

// unexpectedExits returns how many processes exited on their own, and who:
// "worker-2:1,api:1", sorted.
func (s *stack) unexpectedExits() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var who []string
	n := 0
	for name, k := range s.unexpected {
		who = append(who, fmt.Sprintf("%s:%d", name, k))
		n += k
	}
	sort.Strings(who)
	return n, strings.Join(who, ",")
}

// stop stops everything the stack started, children first, Postgres last,
// however far start got.
func (s *stack) stop() {
	var wg sync.WaitGroup
	for _, p := range s.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
	if s.stopSupervisors != nil {
		s.stopSupervisors()
	}
	if s.tc != nil {
		s.tc.Close()
	}
	if s.proxySrv != nil {
		_ = s.proxySrv.Close()
	}
	if s.hf != nil {
		s.hf.Close()
	}
	for _, pool := range s.rcvPools {
		pool.Close()
	}
	s.brokers.stop()
	if s.pg != nil {
		time.Sleep(300 * time.Millisecond) // let the backends of closed connections exit and be reaped
		s.pg.stop()
	}
}

// cpuLine says how much CPU each part used over the run (Postgres: the
// postmaster and its reaped backends, per server incarnation), and per
// event of the workload.
func (s *stack) cpuLine(events int) string {
	var parts []string
	var total time.Duration
	add := func(name string, d time.Duration) {
		total += d
		parts = append(parts, fmt.Sprintf("%s=%.0fs", name, d.Seconds()))
	}
	var workers time.Duration
	for _, w := range s.workers {
		workers += w.cpuTime()
	}
	if s.temporal != nil {
		add("temporal", s.temporal.cpuTime())
	}
	add("postgres", s.pg.cpuTime())
	add("workers", workers)
	if s.api != nil {
		add("api", s.api.cpuTime())
	}
	var receivers time.Duration
	for _, r := range s.receivers {
		receivers += r.cpuTime()
	}
	add("receivers", receivers)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		add("chaos", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
	}
	return fmt.Sprintf("cpu seconds: %s, total %.0fs (%.0f ms per event)", strings.Join(parts, " "), total.Seconds(),
		float64(total.Milliseconds())/float64(max(1, events)))
}

// unverified counts, per receiver, the deliveries it refused to verify:
// the lines its log has of them, over all its incarnations.
func (s *stack) unverified() map[string]int {
	out := map[string]int{}
	for _, rp := range s.receivers {
		b, err := os.ReadFile(rp.logPath)
		if err != nil {
			continue
		}
		out[rp.name] = bytes.Count(b, []byte(`"msg":"webhook rejected"`))
	}
	return out
}

// logLinesAbout returns the last n lines of the API's and the workers' logs
// that mention id, in time order (each line begins with its JSON time),
// each prefixed with its process and cut to 400 bytes: the evidence of a
// lead, printed while the run's logs still exist.
func (s *stack) logLinesAbout(id string, n int) []string {
	type line struct{ proc, text string }
	var found []line
	for _, p := range append([]*proc{s.api}, s.workers...) {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, id) {
				found = append(found, line{p.name, l})
			}
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].text < found[j].text })
	var out []string
	for _, l := range found[max(0, len(found)-n):] {
		text := l.text
		if len(text) > 400 {
			text = text[:400] + "…"
		}
		out = append(out, l.proc+": "+text)
	}
	return out
}

// flapThreshold is the flapping endpoint's circuit_failure_threshold: an
// outage that begins while only a few of its lanes have an attempt out
// still opens its breaker within a second or two, long before its first
// probe is due.
const flapThreshold = 3

// slowInFlight is the slow endpoint's max_in_flight: few enough that its
// lanes (one per correlation) queue for a place most of the run.
const slowInFlight = 3

// slowHold is how long the proxy holds each request to the slow endpoint
// at least (SetSlow holds up to a quarter more): 60 % of the delivery
// timeout, so that most attempts still answer within it, each holding its
// place in flight that long.
func slowHold(timeout time.Duration) time.Duration { return timeout * 6 / 10 }

// startReceiver starts the receiver of sub's kind, verifying with secret,
// in a database of its own, on a port the kernel picks at each of its
// starts (followReceiver learns it). A port picked ahead and handed to
// the receiver could be handed out again before the receiver binds it:
// the kernel had two receivers share one in a run, the second never
// started, and the proxy sent its deliveries to the first, which refused
// their signatures.
func (s *stack) startReceiver(ctx context.Context, sub Subscriber, secret string) (*proc, error) {
	db := receiverDatabase(sub.Receiver)
	if err := s.pg.get().EnsureDatabase(ctx, db); err != nil {
		return nil, err
	}
	recvEnv := map[string]string{
		"HOOKFLOW_RECEIVER_ADDR":         "127.0.0.1:0",
		"HOOKFLOW_RECEIVER_SECRET":       secret,
		"HOOKFLOW_RECEIVER_DATABASE_URL": s.pg.get().AdminURL(db),
	}
	kind, _, _ := strings.Cut(sub.Name, "@")
	name := "receiver-" + strings.ToLower(kind)
	rp := newProc(name, s.cfg.Binary, []string{"receiver"}, childEnv(recvEnv), filepath.Join(s.logs, name+".log"))
	r := sub.Receiver
	rp.onExit = func() { s.pointReceiver(r, "") }
	if err := rp.start(); err != nil {
		return nil, err
	}
	s.receivers = append(s.receivers, rp)
	s.procs = append(s.procs, rp)
	return rp, nil
}

// receiverClient is the run's client of receiver r.
func (s *stack) receiverClient(r int) receiverClient {
	return receiverClient{addr: s.recvAddrs[r], http: &http.Client{Timeout: 15 * time.Second}}
}

// followReceiver keeps the proxy's endpoints of receiver r, and the run's
// client of it, pointed at where rp's current incarnation listens, which
// it says in its log once its listener is bound; an incarnation's exit
// unpoints them (rp.onExit) until the next one listens. It returns when
// ctx ends.
func (s *stack) followReceiver(ctx context.Context, r int, rp *proc) {
	for ctx.Err() == nil {
		seen := rp.startCount()
		addr, n, err := rp.waitLine(ctx, listeningAddr, 24*time.Hour)
		if err == nil {
			seen = n
			if rp.ifCurrent(n, func() { s.pointReceiver(r, addr) }) {
				s.logger.Info("receiver listening", "process", rp.name, "addr", addr, "start", n)
				if n > 1 {
					s.progress.printf("%s listens on %s after its restart", rp.name, addr)
				}
			}
		}
		for rp.startCount() <= seen {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// pointReceiver points the proxy's endpoints of receiver r, and the run's
// client of it, at addr (host:port), or at none ("").
func (s *stack) pointReceiver(r int, addr string) {
	s.recvAddrs[r].set(addr)
	url := ""
	if addr != "" {
		url = "http://" + addr + "/webhook"
	}
	for i, sub := range s.cfg.Subscribers {
		if sub.Receiver == r {
			s.proxy.SetUpstream(i, url)
		}
	}
}

// createTenants creates the run's tenants (Config.Tenants and the
// endpoints'), as a SaaS's backend would with the operator's token: each
// with PUT /v1/tenants/{id}, allowed the proxy's private address (a
// tenant's endpoints may not aim at an allowlisted one unless granted),
// and a key of its own, confined to it, with which every call of the run
// on the tenant's endpoints, events and dead letters is made. The default
// tenant needs neither: the operator's token acts on it.
func (s *stack) createTenants(ctx context.Context, apiBase string) error {
	s.tenants = map[string]*hfclient.Client{}
	want := s.cfg.tenantList()
	for _, sub := range s.cfg.Subscribers {
		if !slices.Contains(want, sub.tenant()) {
			want = append(want, sub.tenant())
		}
	}
	for _, t := range want {
		if t == contract.DefaultTenant {
			continue
		}
		if _, err := s.client.TenantPutWithResponse(ctx, t, hfclient.TenantPut{Name: "chaos " + t,
			Limits: hfclient.TenantLimits{AllowPrivateTargets: nullable.NewNullableWithValue(true)}}); err != nil {
			return fmt.Errorf("create tenant %s: %w", t, err)
		}
		r, err := s.client.APIKeyCreateWithResponse(ctx, hfclient.APIKeyCreate{Name: "chaos-" + t, TenantID: t,
			Scopes: []hfclient.Scope{hfclient.ScopeEventsWrite, hfclient.ScopeEventsRead, hfclient.ScopeEndpointsWrite, hfclient.ScopeDeadLettersWrite}})
		if err != nil {
			return fmt.Errorf("create tenant %s's key: %w", t, err)
		}
		if s.tenants[t], err = hfclient.New(apiBase, r.JSON201.Key, hfclient.WithHTTPClient(s.apiHTTP)); err != nil {
			return err
		}
	}
	return nil
}

// tenantAPI is the client of tenant's own key (the operator's for the default
// tenant).
func (s *stack) tenantAPI(tenant string) *hfclient.Client {
	if c, ok := s.tenants[tenant]; ok {
		return c
	}
	return s.client
}

// apiOf is the client of endpoint ep's tenant.
func (s *stack) apiOf(ep int) *hfclient.Client { return s.tenantAPI(s.cfg.Subscribers[ep].tenant()) }

// apiFor is the client of the tenant of the endpoint with hookflow id
// endpointID.
func (s *stack) apiFor(endpointID string) *hfclient.Client {
	if ep := s.endpoints.index(endpointID); ep >= 0 {
		return s.apiOf(ep)
	}
	if d, ok := s.brokers.dest(endpointID); ok {
		return s.tenantAPI(d.Tenant)
	}
	return s.client
}

// receiverDatabase is the database of receiver r (Subscriber.Receiver).
func receiverDatabase(r int) string { return fmt.Sprintf("hookflow_receiver_%d", r) }

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

// eventTypes is a subscriber's event types as an endpoint is created with
// them: left out (every type) when it has none.
func eventTypes(types []string) nullable.Nullable[[]string] {
	if types == nil {
		return nullable.Nullable[[]string]{}
	}
	return nullable.NewNullableWithValue(types)
}

// disrupting holds the stack for a move that disrupts all of it (disrupt)
// and returns what ends the hold, noting when.
func (s *stack) disrupting() (done func()) {
	s.disrupt.Lock()
	return func() {
		s.disrupted = time.Now()
		s.disrupt.Unlock()
	}
}
