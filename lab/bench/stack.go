package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/schema"
)

// Process names as the report shows them.
const (
	procTemporal = "temporal"
	procAPI      = "api"
	procWorker   = "worker"
	procReceiver = "receiver"
	// procFanReceiver prefixes the fan-out scenario's receivers' names
	// ("receiver-fan1", …): the report adds them to procReceiver.
	procFanReceiver = procReceiver + "-fan"
	procBaseline    = "baseline-worker"
	// procBaselineFast starts its own workflows (eager start), so its CPU is
	// the fast baseline's starter and worker together, as hookflow's api+worker.
	procBaselineFast = "baseline-fast"
	procPostgres     = "postgres"
	procBench        = "bench"
)

// Task queues of the systems under test. They share one Temporal server and
// one namespace, never a queue.
const (
	hookflowTaskQueue     = "hookflow"
	baselineTaskQueue     = "bench-baseline"
	baselineFastTaskQueue = "bench-baseline-fast"
	namespace             = "default"
	apiToken              = "bench-token-not-a-secret-0123456789"
)

// Event types. The reference receiver's endpoint subscribes to benchEventType
// only (the scenarios that address it name it anyway); the fan-out
// endpoints subscribe to every type, so an event of fanOutEventType posted
// without an endpoint goes to them and to nothing else.
const (
	benchEventType  = "bench.event"
	fanOutEventType = "bench.fanout"
	// fanOutEndpoints is how many endpoints the fan-out scenario's events
	// go to: each its own endpoint row, receiver process and database.
	fanOutEndpoints = 3
)

// child is one process of the stack, started from the hookflow binary.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startChild runs exe with args and exactly the given HOOKFLOW_* settings
// (the caller's own HOOKFLOW_* variables are dropped so they cannot leak in),
// its output going to logPath.
func startChild(name, exe string, args []string, settings map[string]string, logPath string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(exe, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKFLOW_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: Ctrl-C reaches the bench only, which stops the
	// stack in order. Pdeathsig: a bench killed hard takes its children along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.done) }()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits for the process to drain, then kills it.
func (c *child) stop() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// stack is everything one bench run measures against.
type stack struct {
	dir      string
	ownDir   bool
	pg       *localpg.Cluster
	pgPID    int
	children []*child // in start order
	byName   map[string]*child

	temporal    client.Client
	temporalAdr string
	apiURL      string
	receiverURL string
	// fastURL is the fast baseline's endpoint that starts a workflow.
	fastURL    string
	endpointID string
	secret     string
	receiverDB *pgxpool.Pool
	// fanOut are the fan-out scenario's endpoints.
	fanOut []*fanEndpoint
	// hookflowDB reads hookflow's ledger after the rounds (the order
	// check); never while a round is measured.
	hookflowDB *pgxpool.Pool
	logger     *slog.Logger
	// brokers are the destinations comparison's brokers, by process name:
	// not children of the stack (each is started and stopped by its own
	// test environment), but measured as they are.
	brokers map[string]func() int
}

// fanEndpoint is one endpoint of the fan-out scenario: a reference receiver
// of its own (the receiver keeps one ledger per correlation, so three
// endpoints receiving the same event need three ledgers), registered as its
// own endpoint row subscribed to every event type.
type fanEndpoint struct {
	name       string // the receiver's process name
	addr       string
	database   string
	endpointID string
	secret     string
	db         *pgxpool.Pool
}

// startStack brings up Postgres, the Temporal server, the API, a hookflow
// worker, the reference receiver, the baseline worker and the fast
// baseline's process, each (but Postgres) as a child process of the bench so
// its CPU can be read apart.
func startStack(ctx context.Context, cfg Config, p *progress, logger *slog.Logger) (_ *stack, err error) {
	s := &stack{byName: map[string]*child{}, logger: logger}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	if cfg.DataDir == "" {
		s.dir, err = os.MkdirTemp("", "hookflow-bench-")
		if err != nil {
			return s, fmt.Errorf("create temp folder: %w", err)
		}
		s.ownDir = true
	} else {
		s.dir, err = filepath.Abs(cfg.DataDir)
		if err != nil {
			return s, fmt.Errorf("resolve --data-dir: %w", err)
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return s, fmt.Errorf("create --data-dir: %w", err)
		}
	}
	// As root, Postgres runs as the postgres user and must reach its folder.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return s, fmt.Errorf("chmod data folder: %w", err)
	}

	pgPort, err := localpg.FreePort()
	if err != nil {
		return s, err
	}
	p.logf("starting postgres on 127.0.0.1:%d (data in %s, fsync %s)", pgPort, s.dir, onOff(!cfg.PostgresFast))
	s.pg, err = localpg.Start(ctx, localpg.Config{
		DataDir: filepath.Join(s.dir, "postgres"), Port: pgPort, Fast: cfg.PostgresFast,
		LogFile: filepath.Join(s.dir, "postgres.log"),
	}, logger)
	if err != nil {
		return s, fmt.Errorf("postgres: %w", err)
	}
	if s.pgPID, err = postmasterPID(filepath.Join(s.dir, "postgres")); err != nil {
		return s, err
	}
	for i := 1; i <= fanOutEndpoints; i++ {
		addr, err := freeAddr()
		if err != nil {
			return s, err
		}
		s.fanOut = append(s.fanOut, &fanEndpoint{name: fmt.Sprintf("%s%d", procFanReceiver, i), addr: addr,
			database: fmt.Sprintf("hookflow_receiver_fan%d", i)})
	}
	dbs := []string{"hookflow", "hookflow_receiver"}
	for _, f := range s.fanOut {
		dbs = append(dbs, f.database)
	}
	for _, db := range dbs {
		if err := s.pg.EnsureDatabase(ctx, db); err != nil {
			return s, err
		}
	}
	pool, err := app.ConnectPostgres(ctx, s.pg.AdminURL("hookflow"))
	if err != nil {
		return s, err
	}
	_, err = schema.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return s, fmt.Errorf("migrate: %w", err)
	}

	tPort, err := localpg.FreeLowPort()
	if err != nil {
		return s, err
	}
	// The UI costs nothing while nobody opens it; HOOKFLOW_DEV_UI_PORT
	// accepts only real ports.
	uiPort, err := localpg.FreePort()
	if err != nil {
		return s, err
	}
	s.temporalAdr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tPort))
	p.logf("starting temporal server on %s (first start sets up its schema: up to a minute)", s.temporalAdr)
	tc, err := s.spawn(cfg.Exe, procTemporal, []string{"temporal"}, map[string]string{
		"HOOKFLOW_DEV_POSTGRES_PORT": strconv.Itoa(pgPort), "HOOKFLOW_DEV_TEMPORAL_PORT": strconv.Itoa(tPort),
		"HOOKFLOW_DEV_UI_PORT": strconv.Itoa(uiPort), "HOOKFLOW_DATA_DIR": s.dir, "HOOKFLOW_TEMPORAL_NAMESPACE": namespace,
	})
	if err != nil {
		return s, err
	}
	if s.temporal, err = waitTemporal(ctx, s.temporalAdr, tc, logger); err != nil {
		return s, err
	}

	apiAddr, err := freeAddr()
	if err != nil {
		return s, err
	}
	recvAddr, err := freeAddr()
	if err != nil {
		return s, err
	}
	s.apiURL = "http://" + apiAddr
	s.receiverURL = "http://" + recvAddr + "/webhook"
	common := map[string]string{
		"HOOKFLOW_DATABASE_URL": s.pg.AdminURL("hookflow"), "HOOKFLOW_TEMPORAL_ADDRESS": s.temporalAdr,
		"HOOKFLOW_TEMPORAL_NAMESPACE": namespace, "HOOKFLOW_TASK_QUEUE": hookflowTaskQueue,
		"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST": strings.Join(slices.Concat([]string{recvAddr}, s.fanAddrs(), cfg.ownReceivers), ","), "HOOKFLOW_API_TOKEN": apiToken,
	}
	p.logf("starting api on %s and a hookflow worker", apiAddr)
	apiOnly := map[string]string{"HOOKFLOW_API_ADDR": apiAddr}
	if cfg.CleanerInterval > 0 {
		apiOnly["HOOKFLOW_CLEANER_INTERVAL"] = cfg.CleanerInterval.String()
	}
	ac, err := s.spawn(cfg.Exe, procAPI, []string{"api"}, with(common, apiOnly))
	if err != nil {
		return s, err
	}
	wc, err := s.spawn(cfg.Exe, procWorker, []string{"worker"}, common)
	if err != nil {
		return s, err
	}
	if err := waitHTTP(ctx, s.apiURL+"/readyz", ac); err != nil {
		return s, err
	}
	if err := waitPollers(ctx, s.temporal, hookflowTaskQueue, wc); err != nil {
		return s, err
	}
	if s.endpointID, s.secret, err = createEndpoint(ctx, s.apiURL, "", s.receiverURL, "", []string{benchEventType}); err != nil {
		return s, err
	}
	for _, f := range s.fanOut {
		if f.endpointID, f.secret, err = createEndpoint(ctx, s.apiURL, "", "http://"+f.addr+"/webhook", "", nil); err != nil {
			return s, err
		}
	}

	fastAddr, err := freeAddr()
	if err != nil {
		return s, err
	}
	s.fastURL = "http://" + fastAddr
	p.logf("starting reference receiver on %s, the baseline worker and the fast baseline on %s", recvAddr, fastAddr)
	rc, err := s.spawn(cfg.Exe, procReceiver, []string{"receiver"}, map[string]string{
		"HOOKFLOW_RECEIVER_ADDR": recvAddr, "HOOKFLOW_RECEIVER_SECRET": s.secret,
		"HOOKFLOW_RECEIVER_DATABASE_URL": s.pg.AdminURL("hookflow_receiver"),
	})
	if err != nil {
		return s, err
	}
	bc, err := s.spawn(cfg.Exe, procBaseline, []string{"bench", "baseline-worker"}, map[string]string{
		"HOOKFLOW_TEMPORAL_ADDRESS": s.temporalAdr, "HOOKFLOW_TEMPORAL_NAMESPACE": namespace,
		"HOOKFLOW_TASK_QUEUE": baselineTaskQueue, "HOOKFLOW_RECEIVER_ADDR": recvAddr, "HOOKFLOW_RECEIVER_SECRET": s.secret,
	})
	if err != nil {
		return s, err
	}
	if err := waitHTTP(ctx, "http://"+recvAddr+"/healthz", rc); err != nil {
		return s, err
	}
	for _, f := range s.fanOut {
		fc, err := s.spawn(cfg.Exe, f.name, []string{"receiver"}, map[string]string{
			"HOOKFLOW_RECEIVER_ADDR": f.addr, "HOOKFLOW_RECEIVER_SECRET": f.secret,
			"HOOKFLOW_RECEIVER_DATABASE_URL": s.pg.AdminURL(f.database),
		})
		if err != nil {
			return s, err
		}
		if err := waitHTTP(ctx, "http://"+f.addr+"/healthz", fc); err != nil {
			return s, err
		}
		if f.db, err = app.ConnectPostgres(ctx, s.pg.AdminURL(f.database)); err != nil {
			return s, err
		}
	}
	fc, err := s.spawn(cfg.Exe, procBaselineFast, []string{"bench", "baseline-fast-worker"}, map[string]string{
		"HOOKFLOW_TEMPORAL_ADDRESS": s.temporalAdr, "HOOKFLOW_TEMPORAL_NAMESPACE": namespace,
		"HOOKFLOW_TASK_QUEUE": baselineFastTaskQueue, "HOOKFLOW_API_ADDR": fastAddr,
		"HOOKFLOW_RECEIVER_ADDR": recvAddr, "HOOKFLOW_RECEIVER_SECRET": s.secret,
	})
	if err != nil {
		return s, err
	}
	if err := waitPollers(ctx, s.temporal, baselineTaskQueue, bc); err != nil {
		return s, err
	}
	if err := waitHTTP(ctx, s.fastURL+fastHealthPath, fc); err != nil {
		return s, err
	}
	if err := waitPollers(ctx, s.temporal, baselineFastTaskQueue, fc); err != nil {
		return s, err
	}
	if s.receiverDB, err = app.ConnectPostgres(ctx, s.pg.AdminURL("hookflow_receiver")); err != nil {
		return s, err
	}
	if s.hookflowDB, err = app.ConnectPostgres(ctx, s.pg.AdminURL("hookflow")); err != nil {
		return s, err
	}
	return s, nil
}

// fanDBs are the fan-out receivers' databases, those connected.
func (s *stack) fanDBs() []*pgxpool.Pool {
	var out []*pgxpool.Pool
	for _, f := range s.fanOut {
		if f.db != nil {
			out = append(out, f.db)
		}
	}
	return out
}

// fanAddrs are the fan-out receivers' addresses.
func (s *stack) fanAddrs() []string {
	out := make([]string, 0, len(s.fanOut))
	for _, f := range s.fanOut {
		out = append(out, f.addr)
	}
	return out
}

func (s *stack) spawn(exe, name string, args []string, settings map[string]string) (*child, error) {
	c, err := startChild(name, exe, args, settings, filepath.Join(s.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	s.children = append(s.children, c)
	s.byName[name] = c
	return c, nil
}

// stop ends every child in reverse start order, then Postgres, and removes
// a temporary folder.
func (s *stack) stop() {
	for _, db := range append([]*pgxpool.Pool{s.receiverDB, s.hookflowDB}, s.fanDBs()...) {
		if db != nil {
			db.Close()
		}
	}
	if s.temporal != nil {
		s.temporal.Close()
	}
	for i := len(s.children) - 1; i >= 0; i-- {
		s.children[i].stop()
	}
	if s.pg != nil {
		s.pg.Stop()
	}
	if s.ownDir && s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// cpu reads the CPU seconds of every measured process, the bench included.
func (s *stack) cpu() cpuSnapshot {
	snap := cpuSnapshot{}
	for _, c := range s.children {
		if st, err := readStat(c.pid()); err == nil {
			snap[c.name] = st.cpu
		}
	}
	snap[procPostgres] = treeCPU(s.pgPID)
	for name, pid := range s.brokers {
		if st, err := readStat(pid()); err == nil {
			snap[name] = st.cpu
		}
	}
	if st, err := readStat(os.Getpid()); err == nil {
		snap[procBench] = st.cpu
	}
	return snap
}

// checkAlive reports a child that died under load.
func (s *stack) checkAlive() error {
	for _, c := range s.children {
		if c.exited() {
			return fmt.Errorf("%s exited unexpectedly; see %s", c.name, c.log)
		}
	}
	return nil
}

func with(base, more map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(more))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func freeAddr() (string, error) {
	p, err := localpg.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// waitTemporal dials the server until its namespace serves reads.
func waitTemporal(ctx context.Context, addr string, c *child, logger *slog.Logger) (client.Client, error) {
	deadline := time.Now().Add(5 * time.Minute)
	cfg := config.Config{TemporalAddress: addr, TemporalNamespace: namespace}
	for {
		if c.exited() {
			return nil, fmt.Errorf("temporal server exited during start-up; see %s", c.log)
		}
		tc, err := app.TemporalClient(ctx, cfg, logger)
		if err == nil {
			_, err = tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1})
			if err == nil {
				return tc, nil
			}
			tc.Close()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("temporal server not ready within 5 minutes: %w (see %s)", err, c.log)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string, c *child) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if c.exited() {
			return fmt.Errorf("%s exited during start-up; see %s", c.name, c.log)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s: %w (see %s)", c.name, url, err, c.log)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitPollers waits until a worker polls the task queue for workflow tasks.
func waitPollers(ctx context.Context, tc client.Client, queue string, c *child) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if c.exited() {
			return fmt.Errorf("%s exited during start-up; see %s", c.name, c.log)
		}
		resp, err := tc.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil && len(resp.GetPollers()) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no worker polls task queue %s (see %s)", queue, c.log)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// createEndpoint registers a receiver through the API as the tenant's
// ("": the default tenant's), subscribed to eventTypes (nil: every type),
// signing with secret ("": one hookflow makes; a receiver process verifies
// one secret, so every tenant's endpoint at it brings that one), and returns
// the endpoint's id and signing secret.
func createEndpoint(ctx context.Context, apiURL, tenant, receiverURL, secret string, eventTypes []string) (string, string, error) {
	in := map[string]any{"url": receiverURL}
	if secret != "" {
		in["secret"] = secret
	}
	if tenant != "" {
		in["tenant_id"] = tenant
	}
	return postEndpoint(ctx, apiURL, in, eventTypes)
}

// postEndpoint creates the endpoint in (subscribed to eventTypes, or to
// every type when nil) and returns its ID and signing secret.
func postEndpoint(ctx context.Context, apiURL string, in map[string]any, eventTypes []string) (string, string, error) {
	if eventTypes != nil {
		in["event_types"] = eventTypes
	}
	body, _ := json.Marshal(in)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, apiURL+"/v1/endpoints", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("create endpoint: %w", err)
	}
	defer resp.Body.Close()
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return "", "", fmt.Errorf("create endpoint: status %d: %s", resp.StatusCode, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(&ep); err != nil || ep.ID == "" || ep.Secret == "" {
		return "", "", errors.Join(errors.New("create endpoint: bad answer"), err)
	}
	return ep.ID, ep.Secret, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
