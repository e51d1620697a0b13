// Package api is hookflow's REST API over Echo: endpoints, events,
// correlations, dead letters, health. HTTP only: the work is done by the
// store, the starter and Temporal behind small interfaces declared here.
package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/hookflow/hookflow/api/apigen"
	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	wire "github.com/hookflow/hookflow/kit/client"
)

// RouterConfig are the API's settings.
type RouterConfig struct {
	// Token is the bootstrap admin token: a bearer token with every scope,
	// to create the API keys everything else uses.
	Token string
	// MaxBodyBytes bounds request bodies.
	MaxBodyBytes int64
	// SecretGrace is how long a rotated-out secret keeps signing (default 24 h).
	SecretGrace time.Duration
	// EventsPerSecond and EventsBurst bound POST /v1/events per API key, in
	// this process (defaults 1000, and twice the rate).
	EventsPerSecond float64
	EventsBurst     int
	// ReadsPerSecond and ReadsBurst bound the reads (every GET on /v1) per
	// API key, in this process (defaults 100, and twice the rate): a read
	// key is a credential too, and an event view or a listing costs the
	// database more than a post.
	ReadsPerSecond float64
	ReadsBurst     int
	// AllowWeakToken lets the bootstrap token be shorter than
	// MinTokenLength: hookflow dev, whose token is the well-known
	// dev-token, sets it; no setting does.
	AllowWeakToken bool
	// ReplayPageSize is how many open dead letters a batch replay reads at
	// a time (default 500).
	ReplayPageSize int
	// FailedAuthPerSecond and FailedAuthBurst bound failed authentications
	// per client network and per presented credential, in this process
	// (defaults 1 per second, bursts of 30); past them the failures are
	// answered 429 (auth: a valid credential is never refused).
	FailedAuthPerSecond float64
	FailedAuthBurst     int
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (HOOKFLOW_TRUSTED_PROXIES); none, the client is the peer.
	TrustedProxies []netip.Prefix
	// MaxEndpoints caps each tenant's endpoints not deleted (HOOKFLOW_MAX_ENDPOINTS,
	// default contract.DefaultMaxEndpoints); MaxSubscribers the endpoints
	// one event is routed to (HOOKFLOW_MAX_SUBSCRIBERS, default
	// contract.DefaultMaxSubscribers, at most
	// contract.MaxSubscribersCeiling).
	MaxEndpoints   int
	MaxSubscribers int
	// PortalBaseURL is where the portal page is served, without a trailing
	// slash: a portal session's link is <PortalBaseURL>/portal/<tenant>/#code=…
	// (HOOKFLOW_PORTAL_BASE_URL, or the API's own address: app.ServeAPI
	// sets it); empty, links are paths on whatever serves the API.
	PortalBaseURL string
}

// MinTokenLength is the shortest bootstrap token the API accepts outside
// hookflow dev: 32 characters, e.g. `openssl rand -hex 16` or longer.
const MinTokenLength = 32

// ErrWeakToken is New's error for a bootstrap token shorter than
// MinTokenLength.
var ErrWeakToken = fmt.Errorf("the bootstrap token (HOOKFLOW_API_TOKEN) must be at least %d characters: make one with `openssl rand -hex 32`", MinTokenLength)

// CheckToken returns ErrWeakToken for a bootstrap token shorter than
// MinTokenLength, unless allowWeak (hookflow dev). The token is an admin
// key that never expires: it must not be guessable.
func CheckToken(token string, allowWeak bool) error {
	if len(token) < MinTokenLength && !allowWeak {
		return ErrWeakToken
	}
	return nil
}

// Starter makes an accepted event a workflow, and carries an operator's
// replay or skip to a dead letter's workflow (starter.Starter).
// Each acts as the tenant its event, dead letter or argument names.
type Starter interface {
	Start(ctx context.Context, ev store.Event) error
	// SignalDeadLetter reports ended when the event's workflow completed:
	// the event is delivered or skipped.
	SignalDeadLetter(ctx context.Context, d store.DeadLetter, signal string, arg any) (ended bool, err error)
	// Resync makes the correlation's sequencer load the ledger (a voided
	// sequence's tombstone) and passes its releases on.
	Resync(ctx context.Context, tenant, correlationID string) error
	// SkipDeletedDeadLetters skips the open dead letters of a deleted
	// endpoint as by, and answers how many.
	SkipDeletedDeadLetters(ctx context.Context, tenant, endpointID, by string) (int, error)
}

// Temporal is the part of the Temporal client the API uses.
type Temporal interface {
	CheckHealth(ctx context.Context, request *client.CheckHealthRequest) (*client.CheckHealthResponse, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// RouterDeps are the API's collaborators; all are required.
type RouterDeps struct {
	Store    *store.Store
	Pool     *pgxpool.Pool
	Starter  Starter
	Temporal Temporal
	Logger   *slog.Logger
	// Transports check an endpoint's settings, by its type, as its
	// deliveries would be judged (transport.Transport.Validate).
	Transports *transport.Registry
	// Metrics is optional: when set, the API counts accepted events. It is
	// served on a listener of its own (app.ServeMetrics), never here.
	Metrics *metrics.Metrics
}

// Server is the HTTP API.
type Server struct {
	cfg      RouterConfig
	deps     RouterDeps
	echo     *echo.Echo
	limits   *rateLimits
	reads    *rateLimits
	failures *authFailures
	tenants  *tenantCache
	// accept is how a publish enters the ledger and becomes a workflow,
	// the relay's way too.
	accept *accept.Acceptor
	// public are the operations auth lets by without a credential, as
	// "METHOD /path" (operation.public).
	public map[string]bool
}

// New builds the API and its routes.
func New(cfg RouterConfig, deps RouterDeps) (*Server, error) {
	cfg.PortalBaseURL = strings.TrimRight(cfg.PortalBaseURL, "/")
	switch {
	case deps.Store == nil, deps.Pool == nil, deps.Starter == nil, deps.Temporal == nil, deps.Logger == nil, deps.Transports == nil:
		return nil, errors.New("api: store, pool, starter, temporal, logger and transports are required")
	case cfg.Token == "":
		return nil, errors.New("api: a bearer token is required")
	}
	if err := CheckToken(cfg.Token, cfg.AllowWeakToken); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.SecretGrace <= 0 {
		cfg.SecretGrace = 24 * time.Hour
	}
	cfg.EventsPerSecond = cmp.Or(cfg.EventsPerSecond, 1000)
	cfg.EventsBurst = cmp.Or(cfg.EventsBurst, max(1, int(2*cfg.EventsPerSecond)))
	cfg.ReadsPerSecond = cmp.Or(cfg.ReadsPerSecond, 100)
	cfg.ReadsBurst = cmp.Or(cfg.ReadsBurst, max(1, int(2*cfg.ReadsPerSecond)))
	cfg.ReplayPageSize = cmp.Or(cfg.ReplayPageSize, 500)
	cfg.FailedAuthPerSecond = cmp.Or(cfg.FailedAuthPerSecond, 1)
	cfg.FailedAuthBurst = cmp.Or(cfg.FailedAuthBurst, 30)
	cfg.MaxEndpoints = cmp.Or(cfg.MaxEndpoints, contract.DefaultMaxEndpoints)
	cfg.MaxSubscribers = cmp.Or(cfg.MaxSubscribers, contract.DefaultMaxSubscribers)
	if cfg.MaxSubscribers < 0 || cfg.MaxSubscribers > contract.MaxSubscribersCeiling || cfg.MaxEndpoints < 0 {
		return nil, fmt.Errorf("api: the cap on subscribers per event must be from 1 to %d, and the cap on endpoints positive", contract.MaxSubscribersCeiling)
	}
	// A new event naming a disabled endpoint is refused, so that a key
	// cannot mint dead letters.
	acceptor, err := accept.New(accept.Config{MaxSubscribers: cfg.MaxSubscribers, StartTimeout: startTimeout, RefuseDisabledEndpoint: true}, deps.Starter)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(deps.Logger)
	e.IPExtractor = ipExtractor(cfg.TrustedProxies)
	s := &Server{cfg: cfg, deps: deps, echo: e, limits: newRateLimits("post events", cfg.EventsPerSecond, cfg.EventsBurst),
		reads: newRateLimits("read", cfg.ReadsPerSecond, cfg.ReadsBurst), failures: newAuthFailures(cfg.FailedAuthPerSecond, cfg.FailedAuthBurst),
		tenants: newTenantCache(deps.Store), accept: acceptor}

	// Auth wraps every request, before routing's middleware: group
	// middleware and RouteNotFound register catch-all routes that make Echo
	// answer 404 where 405 is due; Echo's own 404 and 405 go through the
	// error handler. Tracing wraps auth so a refused request shows in the
	// trace too.
	e.Use(traceRequests)
	e.Use(secureHeaders)
	e.Use(s.auth)
	// The routes are the document's (apigen), each behind the scope the
	// document names for it and its parameters' checks (operations.go).
	ops, err := loadOperations(openAPIDoc)
	if err != nil {
		return nil, err
	}
	s.public = map[string]bool{}
	for _, op := range ops {
		if op.public {
			s.public[op.method+" "+op.path] = true
		}
	}
	apigen.RegisterHandlersWithOptions(e, s, apigen.RegisterHandlersOptions{OperationMiddlewares: s.operationMiddlewares(ops)})
	s.registerPortal()
	return s, nil
}

// ipExtractor is how the client's address is found: the connection's peer,
// never a header a client can write, unless the peer is one of trusted
// (reverse proxies): then the rightmost X-Forwarded-For address that is not
// one of them. Echo's own defaults would trust loopback and private peers
// too; only what the operator names is trusted here.
func ipExtractor(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// Handler is the API as an http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Echo exposes the router, for adding routes such as /metrics.
func (s *Server) Echo() *echo.Echo { return s.echo }

// decode reads a JSON body strictly: JSON content type, within the size
// limit, as the operation's schema in the document has it (checkBody: the
// members it names and no other, their kinds, lengths, patterns and
// bounds), then into dst, the document's type, with nothing after the
// value.
func (s *Server) decode(c echo.Context, dst any) error {
	req := c.Request()
	mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return problem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported Media Type", "send the body as application/json")
	}
	if req.ContentLength > s.cfg.MaxBodyBytes {
		return tooLarge(s.cfg.MaxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(s.cfg.MaxBodyBytes)
		}
		return problem(http.StatusBadRequest, "unreadable-body", "Bad Request", "could not read the request body")
	}
	if err := checkBody(c, body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return jsonProblem(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "unexpected data after the JSON value")
	}
	return nil
}

// decodeOptional is decode for bodies that may be empty: an empty body
// leaves dst as it is, whatever its content type says (generated clients
// send Content-Type: application/json with no body).
func (s *Server) decodeOptional(c echo.Context, dst any) error {
	req := c.Request()
	if req.ContentLength > 0 {
		return s.decode(c, dst)
	}
	// Unknown length (chunked): read at most one byte ahead to tell.
	first := make([]byte, 1)
	n, _ := io.ReadFull(req.Body, first)
	if n == 0 {
		return nil
	}
	req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(first[:n]), req.Body))
	return s.decode(c, dst)
}

func tooLarge(limit int64) *Problem {
	return problem(http.StatusRequestEntityTooLarge, "body-too-large", "Request Entity Too Large", fmt.Sprintf("request body exceeds %d bytes", limit))
}

func jsonProblem(err error) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn))
	case errors.As(err, &typ) && typ.Field == "":
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the body must be a JSON object")
	case errors.As(err, &typ):
		p := fieldProblem(typ.Field, fmt.Sprintf("%s must be %s", typ.Field, jsonKind(typ.Type.Kind().String())))
		return p
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the body is empty or cut short")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		p := fieldProblem(name, "unknown field "+name)
		p.Type = problemTypeBase + "unknown-field"
		return p
	default:
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
	}
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "int32":
		return "an integer"
	default:
		return "of another JSON type"
	}
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Healthz is 200 while the process serves.
func (s *Server) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, wire.Health{Status: "ok"})
}

// Readyz is 200 when Postgres answers. Temporal being down is reported as
// "degraded" but still 200: the API keeps accepting events (they wait as
// queued and start when Temporal is back), so it must stay in rotation.
// Postgres down is 503: nothing can be accepted without the ledger.
func (s *Server) Readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	r := wire.Readiness{Status: wire.ReadinessStatusReady, Checks: map[string]wire.ReadinessChecks{"postgres": wire.ReadinessChecksOk, "temporal": wire.ReadinessChecksOk}}
	status := http.StatusOK
	if _, err := s.deps.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		r.Checks["temporal"] = wire.ReadinessChecksUnavailable
		r.Status = wire.ReadinessStatusDegraded
	}
	if err := s.deps.Pool.Ping(ctx); err != nil {
		r.Checks["postgres"] = wire.ReadinessChecksUnavailable
		status, r.Status = http.StatusServiceUnavailable, wire.ReadinessStatusNotReady
	}
	return c.JSON(status, r)
}
