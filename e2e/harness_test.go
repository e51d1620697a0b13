// Package e2e holds hookflow's end-to-end tests: the real API on a real
// socket, real workers, the embedded Temporal server and Postgres that
// lab/testenv starts, and HTTP receivers on real sockets.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/apicheck"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/temporaltest"
	"github.com/hookflow/hookflow/schema"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(runWorkerProcess())
	}
	os.Exit(testenv.Main(m))
}

// bundle is one test's running hookflow: its own database, task queue and
// API on the package's shared Postgres and Temporal. That is what lets the
// tests run at once (t.Parallel): they share nothing but the servers, and
// name their correlations, events and tenants apart (id), since workflow
// IDs are the Temporal namespace's. Running at once, each may be slowed by
// the others as much as a loaded machine slows it, so none asserts a
// wall-clock window: it waits for outcomes with minutes to spare, holds
// its receivers until it lets them answer where the order of things is
// what it proves, and reads windows and rates from the ledger's recorded
// times.
type bundle struct {
	t      *testing.T
	cfg    config.Config
	store  *store.Store
	client client.Client
	apiURL string
	logger *slog.Logger
	// metricsURL is the API's metrics listener, when the test has one.
	metricsURL string
	prefix     string
	workers    []sdkworker.Worker
}

type options struct {
	window  time.Duration
	timeout time.Duration
	workers int
	// noWorkers starts no worker in the test process (the test runs its own).
	noWorkers bool
	// repairAfter is HOOKFLOW_REPAIR_AFTER (default 30 s).
	repairAfter time.Duration
	// retention, when set, is the payload and attempt retention of a cleaner
	// that runs every half second (keys are kept).
	retention time.Duration
	// logger receives the logs of the API, the workers and the Temporal SDK
	// (default testenv.Logger(t)).
	logger *slog.Logger
	// interceptors go on the Temporal client the API and the workers share.
	interceptors []interceptor.ClientInterceptor
	// eventMaxHistory is the history length past which event workflows
	// continue as new (default: the workflow's).
	eventMaxHistory int
	// handOverBatch is how long a delivered lane waits for its peers'
	// first attempts before its hand-over (default: the workflow's).
	handOverBatch time.Duration
	// maxEndpoints and maxSubscribers are HOOKFLOW_MAX_ENDPOINTS and
	// HOOKFLOW_MAX_SUBSCRIBERS (default: the API's).
	maxEndpoints, maxSubscribers int
	// readsPerSecond is HOOKFLOW_READS_RATE_LIMIT (default: high enough
	// that the tests' polling is never refused).
	readsPerSecond float64
	// eventsPerSecond is HOOKFLOW_EVENTS_RATE_LIMIT (default: the API's).
	eventsPerSecond float64
	// statementTimeout is HOOKFLOW_STATEMENT_TIMEOUT (default: none).
	statementTimeout time.Duration
	// trustedProxies is HOOKFLOW_TRUSTED_PROXIES (default: none).
	trustedProxies []netip.Prefix
	// allowlist, when set, is HOOKFLOW_PRIVATE_TARGET_ALLOWLIST, and
	// private targets are refused but for it (default: every target is
	// allowed, as in hookflow dev).
	allowlist []string
}

func setup(t *testing.T, opts options) *bundle {
	t.Helper()
	if opts.window == 0 {
		opts.window = 5 * time.Minute
	}
	if opts.timeout == 0 {
		opts.timeout = 5 * time.Second
	}
	if opts.workers == 0 && !opts.noWorkers {
		opts.workers = 1
	}
	tmp := temporaltest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := opts.logger
	if logger == nil {
		logger = testenv.Logger(t)
	}

	cfg := config.Config{
		DatabaseURL: testenv.NewDatabase(t), TemporalAddress: tmp.Address(), TemporalNamespace: temporaltest.Namespace,
		TaskQueue: testenv.TaskQueue(t), APIAddr: "127.0.0.1:0", APIToken: "test-token-" + randHex(16),
		RecoveryWindow: opts.window, DeliveryTimeout: opts.timeout, MaxBodyBytes: 64 << 10,
		RepairAfter: opts.repairAfter, StatementTimeout: opts.statementTimeout, EventMaxHistory: opts.eventMaxHistory, HandOverBatch: opts.handOverBatch, MaxEndpoints: opts.maxEndpoints, MaxSubscribers: opts.maxSubscribers,
		ReadsRateLimit: cmp.Or(opts.readsPerSecond, 1e6), EventsRateLimit: opts.eventsPerSecond, TrustedProxies: opts.trustedProxies, PrivateAllowlist: opts.allowlist,
		PayloadRetention: opts.retention, AttemptRetention: opts.retention, CleanerInterval: 500 * time.Millisecond,
	}
	cfg.AllowPrivate = opts.allowlist == nil
	pool, err := app.ConnectPostgres(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
	pool.Close()
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	c, err := app.TemporalClient(ctx, cfg, logger, app.WithInterceptors(opts.interceptors...))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	b := &bundle{t: t, cfg: cfg, store: st.Tenant(store.DefaultTenant), client: c, prefix: randHex(4), logger: logger}
	for i := 0; i < opts.workers; i++ {
		b.startWorker()
	}
	t.Cleanup(func() {
		for _, w := range b.workers {
			w.Stop()
		}
	})
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.ServeAPI(ctx, cfg, st, c, logger, app.OnReady(func(a app.Addrs) { ready <- a.API }))
	}()
	select {
	case addr := <-ready:
		b.apiURL = "http://" + addr
	case err := <-done:
		t.Fatalf("api did not start: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return b
}

func (b *bundle) startWorker() sdkworker.Worker {
	w, err := app.StartWorker(b.cfg, b.store, b.client, b.logger)
	require.NoError(b.t, err)
	b.workers = append(b.workers, w)
	return w
}

// id makes an identifier unique to this test (sequencers are namespace-wide).
func (b *bundle) id(s string) string { return b.prefix + "-" + s }

// wf is the workflow ID of the default tenant's event id: what an operator
// finds in the Web UI and presses Terminate, Reset or Signal on. An event's
// key has no "/", so an id with one is a workflow ID already (a
// sequencer's, contract.SequencerID), and is itself.
func wf(id string) string {
	if strings.Contains(id, "/") {
		return id
	}
	return contract.EventWorkflowID(store.DefaultTenant, id)
}

// checked is an HTTP client of the API that holds every answer it gets to
// openapi.json (apicheck): a status the operation does not document, or a
// body that is not its schema, fails the test.
func (b *bundle) checked() *http.Client {
	ch, err := answers()
	require.NoError(b.t, err)
	return &http.Client{Transport: ch.Transport(b.t, nil), Timeout: time.Minute}
}

// answers reads openapi.json for checked, once.
var answers = sync.OnceValues(func() (*apicheck.Checker, error) { return apicheck.New(api.OpenAPIDocument()) })

// call sends a JSON request to the API with the bootstrap token and decodes
// the JSON answer into out (when not nil); it returns the status code.
func (b *bundle) call(method, path string, body any, out any) int {
	b.t.Helper()
	return b.callAs(b.cfg.APIToken, method, path, body, out)
}

// callAs is call with another bearer token (an API key).
func (b *bundle) callAs(token, method, path string, body any, out any) int {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.apiURL+path, rd)
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.checked().Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(b.t, json.Unmarshal(raw, out), "body: %s", raw)
	}
	return resp.StatusCode
}

type endpoint struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// createKey makes an API key with scopes and returns it.
func (b *bundle) createKey(name string, scopes ...string) string {
	b.t.Helper()
	var k struct {
		Key string `json:"key"`
	}
	require.Equal(b.t, http.StatusCreated, b.call(http.MethodPost, "/v1/api-keys", map[string]any{"name": name, "scopes": scopes}, &k))
	return k.Key
}

func (b *bundle) createEndpoint(url string) endpoint {
	b.t.Helper()
	return b.createEndpointWith(map[string]any{"url": url})
}

// createEndpointWith registers an endpoint with the request body given (its
// url, event_types, delivery settings).
func (b *bundle) createEndpointWith(body map[string]any) endpoint {
	b.t.Helper()
	var ep endpoint
	code := b.call(http.MethodPost, "/v1/endpoints", body, &ep)
	require.Equal(b.t, http.StatusCreated, code)
	return ep
}

type eventState struct {
	ID    string         `json:"id"`
	State contract.State `json:"state"`
	// AcceptedAt precedes the start of every delivery window of the
	// event (a window starts when its lane is released).
	AcceptedAt time.Time `json:"accepted_at"`
	Deliveries []struct {
		EndpointID string          `json:"endpoint_id"`
		Attempts   []store.Attempt `json:"attempts"`
	} `json:"deliveries"`
}

// attempts are the attempts of an event sent to one endpoint.
func (e eventState) attempts() []store.Attempt {
	if len(e.Deliveries) == 0 {
		return nil
	}
	return e.Deliveries[0].Attempts
}

func (b *bundle) postEvent(id, correlation string, seq int64, endpointID string, data map[string]any) (int, eventState) {
	b.t.Helper()
	var st eventState
	code := b.call(http.MethodPost, "/v1/events", map[string]any{
		"id": id, "correlation_id": correlation, "sequence": seq, "endpoint_id": endpointID, "type": "order.updated", "data": data,
	}, &st)
	return code, st
}

func (b *bundle) eventState(id string) eventState {
	b.t.Helper()
	var st eventState
	require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, "/v1/events/"+id, nil, &st))
	return st
}

// minOutcomeWait is the least any test waits for an outcome (waitFor).
const minOutcomeWait = 3 * time.Minute

// waitFor polls cond until it holds or the timeout passes.
//
// However short a test asks for, it waits at least minOutcomeWait: a wait
// that ends early costs nothing, and one cut short on a loaded machine, with
// the others running beside it, would fail a test that is not wrong.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = max(timeout, minOutcomeWait)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// migratedPool is a pool on a database of its own (a producer's, a
// receiver's), with migrate applied.
func migratedPool(t *testing.T, migrate func(context.Context, *pgxpool.Pool) error) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrate(context.Background(), pool))
	return pool
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var _ = fmt.Sprintf
