package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	"github.com/hookflow/hookflow/internal/transport/webhook"
	"github.com/hookflow/hookflow/lab/apicheck"
	"github.com/hookflow/hookflow/lab/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// testMaxBody is the body limit the bundle's API runs with; small, so the
// oversize cases stay cheap.
const testMaxBody = 4096

// recordingStarter counts Start calls and records the dead letters'
// signals; the API's own tests need no Temporal. When fail is set, Start
// fails as an unreachable Temporal would. It keeps the trace context of the
// last call: the workflow start carries it on.
type recordingStarter struct {
	calls atomic.Int64
	fail  atomic.Bool
	// swept, when set, makes Start fail after the event is marked started
	// in ledger, as a start does whose mark timed out while the starter's
	// sweep started the same event.
	swept     atomic.Bool
	ledger    *store.Store
	lastTrace atomic.Pointer[trace.SpanContext]

	mu      sync.Mutex
	signals []string
	// onSignal, when set, runs after each signal is recorded (in the
	// request's goroutine).
	onSignal func()
}

func (s *recordingStarter) SignalDeadLetter(_ context.Context, d store.DeadLetter, signal string, _ any) (bool, error) {
	s.mu.Lock()
	s.signals = append(s.signals, d.EventID+"/"+signal)
	s.mu.Unlock()
	if s.onSignal != nil {
		s.onSignal()
	}
	return false, nil
}

func (s *recordingStarter) Resync(context.Context, string, string) error { return nil }

func (s *recordingStarter) SkipDeletedDeadLetters(context.Context, string, string, string) (int, error) {
	return 0, nil
}

func (s *recordingStarter) signalled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.signals...)
}

func (s *recordingStarter) Start(ctx context.Context, ev store.Event) error {
	s.calls.Add(1)
	sc := trace.SpanContextFromContext(ctx)
	s.lastTrace.Store(&sc)
	if s.swept.Load() {
		if err := s.ledger.EventMarkStarted(ctx, ev.ID, ""); err != nil {
			return err
		}
		return errors.New("mark event started: timed out behind the sweep")
	}
	if s.fail.Load() {
		return errors.New("temporal unreachable")
	}
	return nil
}

// fakeTemporal answers health checks; no sequencer answers a query, so the
// API answers correlations from the ledger.
type fakeTemporal struct{}

func (fakeTemporal) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

func (fakeTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, serviceerror.NewNotFound("no such workflow")
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of request
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// bundle is a migrated database, the real API on a real socket, and the
// fakes standing in for Temporal.
type bundle struct {
	pool    *pgxpool.Pool
	store   *store.Store
	starter *recordingStarter
	server  *api.Server
	logs    *syncBuffer
	url     string
	token   string
	// endpointID is an endpoint registered through the API at setup.
	endpointID string
	// targets is the deployment's private-target policy the API's
	// transports judge endpoint URLs by.
	targets egress.Policy
}

// transportsFor are the transports as the worker's wiring makes them,
// under the targets policy, and a broker stand-in (fakeBroker) under the
// type "nats": the API's handling of a broker destination is the same
// whichever broker it is, and the brokers' own tests reach real ones.
func transportsFor(t *testing.T, targets egress.Policy) *transport.Registry {
	t.Helper()
	r, err := transport.NewRegistry(map[string]transport.Transport{webhook.Type: webhook.New(targets), "nats": fakeBroker{targets: targets}})
	require.NoError(t, err)
	return r
}

// testToken is a bootstrap token of the length the API demands (32
// characters or more).
func testToken() string { return "test-token-" + rand.Text() }

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the API's settings adjusted by cfg.
func setupWith(t *testing.T, cfg func(*api.RouterConfig)) *bundle {
	t.Helper()
	return setupTargets(t, egress.Policy{}, cfg)
}

// setupTargets is setupWith under the targets policy.
func setupTargets(t *testing.T, targets egress.Policy, cfg func(*api.RouterConfig)) *bundle {
	t.Helper()
	pool := testenv.MigratedPool(t)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)

	b := &bundle{
		pool: pool, store: st, starter: &recordingStarter{ledger: st},
		logs: &syncBuffer{}, token: testToken(), targets: targets,
	}
	b.server = b.newServer(t, cfg)
	ch, err := answers()
	require.NoError(t, err)
	hs := httptest.NewServer(ch.Handler(t, b.server.Handler()))
	t.Cleanup(hs.Close)
	b.url = hs.URL

	resp, body := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/hook"}`, b.bearer())
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	var ep struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ep))
	b.endpointID = ep.ID
	return b
}

// newServer builds an API on the bundle's database, fakes and logs, as
// another API process would be.
func (b *bundle) newServer(t *testing.T, cfg func(*api.RouterConfig)) *api.Server {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rc := api.RouterConfig{Token: b.token, MaxBodyBytes: testMaxBody}
	if cfg != nil {
		cfg(&rc)
	}
	srv, err := api.New(rc, api.RouterDeps{
		Store: b.store, Pool: b.pool, Starter: b.starter, Temporal: fakeTemporal{}, Logger: logger,
		Transports: transportsFor(t, b.targets),
	})
	require.NoError(t, err)
	return srv
}

func (b *bundle) bearer() http.Header {
	return http.Header{"Authorization": {"Bearer " + b.token}}
}

// do sends one request and returns the response with its body read.
func (b *bundle) do(t *testing.T, method, path, contentType, body string, h http.Header) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, b.url+path, r)
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(raw)
}

func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// endpointRows is every endpoint row as text, to tell "unchanged" exactly.
func (b *bundle) endpointRows(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT row_to_json(e)::text FROM endpoints e ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireProblem asserts an RFC 9457 answer: the status, the media type,
// the members every problem carries, and the field at fault (if any).
func requireProblem(t *testing.T, resp *http.Response, body string, status int, field string) map[string]any {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, body)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), body)
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	require.NotEmpty(t, p["type"], body)
	require.NotEmpty(t, p["title"], body)
	require.EqualValues(t, status, p["status"], body)
	require.NotEmpty(t, p["detail"], body)
	if field != "" {
		require.Equal(t, field, p["field"], body)
	} else {
		require.NotContains(t, p, "field", body)
	}
	return p
}

// answers reads openapi.json once for the test servers, which hold every
// answer they give to it (apicheck).
var answers = sync.OnceValues(func() (*apicheck.Checker, error) { return apicheck.New(api.OpenAPIDocument()) })
