// Package app wires hookflow's pieces into the processes the hookflow
// command runs (api, worker, dev), so the command, the lab's bench and the
// end-to-end tests build them the same way. It sits beside the command, above
// everything it wires: nothing of the product imports it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	"github.com/hookflow/hookflow/internal/transport/nats"
	"github.com/hookflow/hookflow/internal/transport/rabbitmq"
	"github.com/hookflow/hookflow/internal/transport/redis"
	"github.com/hookflow/hookflow/internal/transport/webhook"
	"github.com/hookflow/hookflow/schema"
	"github.com/hookflow/hookflow/services/cleaner"
	"github.com/hookflow/hookflow/services/starter"
	"github.com/hookflow/hookflow/worker"
)

// NewLogger logs JSON when w is not a terminal, text when it is.
func NewLogger(w io.Writer) *slog.Logger {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, nil))
		}
	}
	return slog.New(slog.NewJSONHandler(w, nil))
}

// DefaultMaxConns is each process's pool size when its DSN does not set
// pool_max_conns.
const DefaultMaxConns = 32

// The floors of an API process's two pools (APIConns). The base pool
// serves the five sweeps and the cleaner, each one statement at a time, a
// metrics scrape, and the events the requests hand to the starter: eight
// keep a sweep from waiting behind a burst of hand-overs. Four requests
// at once is the least an API serves usefully.
const (
	minBaseConns    = 8
	minRequestConns = 4
)

// APIConns splits an API process's pool size (pool_max_conns) between its
// base pool and its request pool (RequestPool), so the process holds no
// more connections than the DSN says and max_connections can be sized
// from it: a quarter to the base pool, whose sweeps run one statement each
// however busy the API is, the rest to the requests, which come in
// parallel. Each keeps its floor, so a pool_max_conns below 12 gives the
// process 12.
func APIConns(total int32) (base, requests int32) {
	base = max(total/4, minBaseConns)
	requests = max(total-base, minRequestConns)
	return base, requests
}

// ConnectPostgres opens a pool and checks the server answers.
func ConnectPostgres(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return connectPostgres(ctx, url, nil)
}

// connectPostgres is ConnectPostgres; size, when set, turns the configured
// pool size into the pool's.
func connectPostgres(ctx context.Context, url string, size func(int32) int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &config.UsageError{Msg: "invalid HOOKFLOW_DATABASE_URL: " + err.Error()}
	}
	// pool_max_conns in the DSN wins; otherwise room for the API's handlers,
	// its sweeps and cleaner, or a worker's activities.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	if size != nil {
		cfg.MaxConns = size(cfg.MaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach Postgres at %s: %w", net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port)), err)
	}
	return pool, nil
}

// RequestPool opens a second pool on base's database for the API's
// requests: each of its sessions has statement_timeout set to timeout
// (none when zero), so no request's statement runs longer, and each
// statement is planned for its arguments (plan_cache_mode), while the
// sweeps, the cleaner and, in one process, the workers keep base's
// sessions, whose long statements must finish. It holds up to maxConns
// connections, opened as requests need them, like base's.
func RequestPool(ctx context.Context, base *pgxpool.Pool, timeout time.Duration, maxConns int32) (*pgxpool.Pool, error) {
	cfg := base.Config()
	cfg.MaxConns = maxConns
	cfg.MinConns = min(cfg.MinConns, maxConns)
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if timeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	}
	// The lists' filters are optional ($1 IS NULL OR type = $1): only a
	// plan made for the values given turns them into index conditions. A
	// prepared statement may otherwise settle on one generic plan after
	// five runs, and read a tenant's whole log for a rare type.
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open request pool: %w", err)
	}
	return pool, nil
}

// ConnectStore opens the pool and refuses an out-of-date schema.
func ConnectStore(ctx context.Context, url string) (*store.Store, error) {
	return connectStore(ctx, url, nil)
}

// ConnectAPIStore is ConnectStore for a process that serves only the API:
// the pool size the DSN gives is split (APIConns) between the store's pool
// and the request pool it returns (RequestPool, with timeout), for
// ServeAPI's WithRequestPool.
func ConnectAPIStore(ctx context.Context, url string, timeout time.Duration) (*store.Store, *pgxpool.Pool, error) {
	var requests int32
	st, err := connectStore(ctx, url, func(total int32) int32 {
		base, r := APIConns(total)
		requests = r
		return base
	})
	if err != nil {
		return nil, nil, err
	}
	reqPool, err := RequestPool(ctx, st.Pool(), timeout, requests)
	if err != nil {
		st.Pool().Close()
		return nil, nil, err
	}
	return st, reqPool, nil
}

func connectStore(ctx context.Context, url string, size func(int32) int32) (*store.Store, error) {
	pool, err := connectPostgres(ctx, url, size)
	if err != nil {
		return nil, err
	}
	if err := schema.CheckCurrent(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	st, err := store.New(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return st, nil
}

// Option configures TemporalClient and ServeAPI.
type Option func(*options)

type options struct {
	requests     *pgxpool.Pool
	metrics      *metrics.Metrics
	lazy         bool
	interceptors []interceptor.ClientInterceptor
	ready        func(Addrs)
}

func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithMetrics records in m: the SDK's metrics (TemporalClient), the
// accepted events and the Postgres-backed gauges (ServeAPI), the deliveries
// (StartWorker). Processes sharing m (hookflow dev) show on one page.
// Without it TemporalClient drops the SDK's metrics, ServeAPI makes its own
// registry and StartWorker records nothing.
func WithMetrics(m *metrics.Metrics) Option { return func(o *options) { o.metrics = m } }

// WithRequestPool serves ServeAPI's requests on p (ConnectAPIStore's),
// which the caller closes. Without it ServeAPI opens a request pool as
// large as the store's, beside it: hookflow dev's process, whose workers
// share the store's pool, holds both.
func WithRequestPool(p *pgxpool.Pool) Option { return func(o *options) { o.requests = p } }

// Lazy makes TemporalClient connect on first use, so the API can start (and
// accept events) while Temporal is down.
func Lazy() Option { return func(o *options) { o.lazy = true } }

// WithInterceptors applies interceptors (tracing's, when it is on) to the
// client and to every worker built from it.
func WithInterceptors(is ...interceptor.ClientInterceptor) Option {
	return func(o *options) { o.interceptors = append(o.interceptors, is...) }
}

// OnReady has ServeAPI call f once its sockets are bound.
func OnReady(f func(Addrs)) Option { return func(o *options) { o.ready = f } }

// TemporalClient dials Temporal (see Lazy, WithMetrics, WithInterceptors).
func TemporalClient(ctx context.Context, cfg config.Config, logger *slog.Logger, opts ...Option) (client.Client, error) {
	o := collect(opts)
	copts := client.Options{
		HostPort:     cfg.TemporalAddress,
		Namespace:    cfg.TemporalNamespace,
		Logger:       sdklog.NewStructuredLogger(slog.New(levelFloor{logger.Handler(), slog.LevelWarn})),
		Interceptors: o.interceptors,
	}
	if o.metrics != nil {
		h, err := metrics.NewTemporalHandler(o.metrics.Registry(), logger)
		if err != nil {
			return nil, fmt.Errorf("temporal metrics: %w", err)
		}
		copts.MetricsHandler = h
	}
	if o.lazy {
		c, err := client.NewLazyClient(copts)
		if err != nil {
			return nil, fmt.Errorf("temporal client: %w", err)
		}
		return c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, copts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (HOOKFLOW_TEMPORAL_ADDRESS): %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// levelFloor drops records below a level; the SDK is chatty at info.
type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(a), h.min}
}
func (h levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(n), h.min}
}

// NewStarter builds the starter from the settings.
func NewStarter(cfg config.Config, st *store.Store, c client.Client, logger *slog.Logger) (*starter.Starter, error) {
	return starter.New(starter.Config{
		TaskQueue: cfg.TaskQueue, RecoveryWindow: cfg.RecoveryWindow, DeliveryTimeout: cfg.DeliveryTimeout,
		StuckAfter: cfg.RepairAfter, EventMaxHistory: cfg.EventMaxHistory, HandOverBatch: cfg.HandOverBatch,
	}, st, c, logger)
}

// Addrs are the addresses a served API is bound to; Metrics is empty when
// it serves none.
type Addrs struct {
	API, Metrics string
}

// NewMetrics makes a fresh registry with hookflow's instruments in it.
func NewMetrics(logger *slog.Logger) (*metrics.Metrics, error) {
	m, err := metrics.New(prometheus.NewRegistry(), logger)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// Targets is the delivery policy of the settings: which private targets
// endpoints may use.
func Targets(cfg config.Config) egress.Policy {
	return egress.Policy{AllowPrivate: cfg.AllowPrivate, Allowlist: cfg.PrivateAllowlist}
}

// Transports are the transports deliveries go through, by endpoint type.
// The brokers' hold connection pools: Close them when done.
func Transports(cfg config.Config) (*transport.Registry, error) {
	targets := Targets(cfg)
	return transport.NewRegistry(map[string]transport.Transport{
		webhook.Type:  webhook.New(targets),
		nats.Type:     nats.New(targets),
		redis.Type:    redis.New(targets),
		rabbitmq.Type: rabbitmq.New(targets),
	})
}

// closingWorker closes the worker's transports' connections once it has
// stopped, when no attempt can use them any more.
type closingWorker struct {
	sdkworker.Worker
	transports *transport.Registry
}

func (w closingWorker) Stop() {
	w.Worker.Stop()
	_ = w.transports.Close()
}

// ServeAPI listens on cfg.APIAddr and serves until ctx is done, then shuts
// down gracefully; the starter's sweeps and the cleaner run alongside. The
// metrics page (see WithMetrics) is served on cfg.MetricsAddr only, never on
// the API's listener.
func ServeAPI(ctx context.Context, cfg config.Config, st *store.Store, c client.Client, logger *slog.Logger, opts ...Option) error {
	o := collect(opts)
	m := o.metrics
	if m == nil {
		var err error
		if m, err = NewMetrics(logger); err != nil {
			return err
		}
	}
	st = st.WithNotices(store.NoticeReport{Logger: logger, Dropped: m.NoticeDropped})
	strt, err := NewStarter(cfg, st, c, logger)
	if err != nil {
		return err
	}
	if err := metrics.RegisterStore(m.Registry(), st, logger); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := cleaner.CheckRetentions(cfg.PayloadRetention, cfg.AttemptRetention, cfg.KeyRetention); err != nil {
		return &config.UsageError{Msg: err.Error()}
	}
	cl, err := cleaner.New(cleaner.Config{
		PayloadRetention: cfg.PayloadRetention, AttemptRetention: cfg.AttemptRetention, KeyRetention: cfg.KeyRetention,
		Interval: cfg.CleanerInterval,
	}, st, logger, m)
	if err != nil {
		return err
	}
	reqPool := o.requests
	if reqPool == nil {
		if reqPool, err = RequestPool(ctx, st.Pool(), cfg.StatementTimeout, st.Pool().Config().MaxConns); err != nil {
			return err
		}
		defer reqPool.Close()
	}
	// Listen first: portal links default to the address bound.
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (HOOKFLOW_API_ADDR): %w", cfg.APIAddr, err)
	}
	transports, err := Transports(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	defer transports.Close()
	srv, err := api.New(api.RouterConfig{
		Token: cfg.APIToken, AllowWeakToken: cfg.Dev, MaxBodyBytes: cfg.MaxBodyBytes,
		EventsPerSecond: cfg.EventsRateLimit, ReadsPerSecond: cfg.ReadsRateLimit, TrustedProxies: cfg.TrustedProxies, MaxEndpoints: cfg.MaxEndpoints, MaxSubscribers: cfg.MaxSubscribers,
		PortalBaseURL: config.PortalBase(cfg.PortalBaseURL, ln.Addr().String()),
	}, api.RouterDeps{Store: st.WithPool(reqPool), Pool: reqPool, Starter: strt, Temporal: c, Logger: logger, Transports: transports, Metrics: m})
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go strt.Run(sweepCtx)
	go cl.Run(sweepCtx)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	addrs := Addrs{API: ln.Addr().String()}
	if cfg.MetricsAddr != "" {
		bound := make(chan string, 1)
		go func() { errc <- ServeMetrics(sweepCtx, cfg.MetricsAddr, m, func(a string) { bound <- a }) }()
		select {
		case addrs.Metrics = <-bound:
		case err := <-errc:
			_ = hs.Close()
			return err
		}
	}
	if o.ready != nil {
		o.ready(addrs)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down api: %w", err)
	}
	return nil
}

// StartWorker starts one worker on the task queue (see WithMetrics); Stop
// drains it.
func StartWorker(cfg config.Config, st *store.Store, c client.Client, logger *slog.Logger, opts ...Option) (sdkworker.Worker, error) {
	m := collect(opts).metrics
	st = st.WithNotices(store.NoticeReport{Logger: logger, Dropped: m.NoticeDropped})
	strt, err := NewStarter(cfg, st, c, logger)
	if err != nil {
		return nil, err
	}
	transports, err := Transports(cfg)
	if err != nil {
		return nil, err
	}
	acts, err := activities.New(activities.Deps{Store: st, Transports: transports, Logger: logger, Metrics: m, Sequencer: strt,
		CircuitCloseSuccesses: cfg.CircuitCloseSuccesses})
	if err != nil {
		return nil, err
	}
	w, err := worker.New(c, worker.Config{TaskQueue: cfg.TaskQueue}, acts)
	if err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		_ = transports.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	return closingWorker{Worker: w, transports: transports}, nil
}

// ServeMetrics serves m at http://addr/metrics until ctx is done; workers
// run it when HOOKFLOW_METRICS_ADDR is set. ready is called once the
// socket is bound.
func ServeMetrics(ctx context.Context, addr string, m *metrics.Metrics, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (HOOKFLOW_METRICS_ADDR): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down metrics: %w", err)
	}
	return nil
}
