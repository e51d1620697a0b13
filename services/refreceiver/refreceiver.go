// Package refreceiver is hookflow's reference receiver: a small ledger built
// on the receiver kit. Each event's data.amount (a JSON number) is added to
// the balance of its lane (endpoint_id, correlation_id), exactly once and in
// sequence order, so the ledger shows at a glance whether delivery kept its
// promises. Several endpoints may point at one reference receiver: each has
// its own ledger of a correlation.
//
// Routes:
//
//	POST /webhook                               the receiver kit (see package receiver)
//	GET  /correlations/{id}[?endpoint_id=ep_…]  {"endpoint_id","correlation_id","last_sequence","applied","balance","parked"}
//	GET  /healthz                               liveness
//
// GET /correlations/{id} may leave endpoint_id out when one endpoint has a
// lane of the correlation here; with several it answers 400 naming them.
//
// Config.StartPosition says where a lane never seen starts (see
// receiver.StartPosition): hookflow receiver reads it from
// HOOKFLOW_RECEIVER_START.
//
// With Config.Retention set, Run also prunes the kit's processed_events on a
// schedule (see receiver.Prune), so the receiver's tables stay bounded.
package refreceiver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/receiver/otelreceiver"
	"github.com/hookflow/hookflow/services/refreceiver/internal/dbsqlc"
)

// ShutdownTimeout bounds how long Run waits for in-flight requests after its
// context is done.
const ShutdownTimeout = 15 * time.Second

// DefaultPruneInterval is the default Config.PruneInterval.
const DefaultPruneInterval = time.Minute

// Config holds the reference receiver's settings; they are handed to the
// receiver kit (see receiver.Config for defaults).
type Config struct {
	// Secrets verify webhook signatures. Required.
	Secrets []string
	// Tolerance is the accepted clock skew of webhook-timestamp.
	Tolerance time.Duration
	// MaxBodyBytes bounds a delivery's body.
	MaxBodyBytes int64
	// Retention is how long after they were applied Run prunes the kit's
	// processed_events rows below their correlation's cursor (see
	// receiver.Prune). Zero keeps them for ever.
	Retention time.Duration
	// PruneInterval is how often Run prunes when Retention is set; it also
	// prunes once at start. Zero means DefaultPruneInterval.
	PruneInterval time.Duration
	// StartPosition is where the kit starts a lane it has never seen: the
	// default StartFromBeginning, or StartMidStream for a receiver that
	// endpoints with history were re-pointed at.
	StartPosition receiver.StartPosition
}

// Deps holds the reference receiver's collaborators.
type Deps struct {
	// Pool reaches a database migrated with Migrate. Required.
	Pool *pgxpool.Pool
	// Logger receives the logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Server is the reference receiver.
type Server struct {
	pool          *pgxpool.Pool
	logger        *slog.Logger
	kit           *receiver.Receiver
	retention     time.Duration
	pruneInterval time.Duration
}

// New returns a Server. It does not touch the database; Run checks the
// migrations before serving.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.PruneInterval = cmp.Or(cfg.PruneInterval, DefaultPruneInterval)
	switch {
	case cfg.Retention < 0, cfg.PruneInterval < 0:
		return nil, errors.New("refreceiver config: retention and prune interval must not be negative")
	case deps.Pool == nil:
		return nil, errors.New("refreceiver deps: pool is required")
	}
	s := &Server{
		pool: deps.Pool, logger: cmp.Or(deps.Logger, slog.Default()),
		retention: cfg.Retention, pruneInterval: cfg.PruneInterval,
	}
	var err error
	s.kit, err = receiver.New(receiver.Config{
		Secrets:       cfg.Secrets,
		Tolerance:     cfg.Tolerance,
		MaxBodyBytes:  cfg.MaxBodyBytes,
		StartPosition: cfg.StartPosition,
	}, receiver.Deps{
		Pool: deps.Pool, Apply: s.apply, Logger: s.logger,
		// OpenTelemetry's globals, which hookflow's tracing installs when
		// it is on (a no-op otherwise).
		Tracer: otelreceiver.New(otelreceiver.Config{}),
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", s.kit)
	mux.HandleFunc("GET /correlations/{id}", s.getCorrelation)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// Run serves Handler on addr until ctx is done, then shuts down gracefully,
// letting in-flight requests finish for up to ShutdownTimeout. With
// Config.Retention set it prunes processed_events meanwhile, at start and
// every Config.PruneInterval. It refuses to start while migrations are
// pending. It returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context, addr string) error {
	if err := CheckMigrations(ctx, s.pool); err != nil {
		return fmt.Errorf("check migrations: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	if s.retention > 0 {
		pruneCtx, stopPruning := context.WithCancel(ctx)
		var pruning sync.WaitGroup
		pruning.Go(func() { s.pruneLoop(pruneCtx) })
		defer func() { stopPruning(); pruning.Wait() }()
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.logger.Info("reference receiver listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/webhook")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.logger.Info("reference receiver stopped")
	return nil
}

// pruneLoop prunes the kit's processed_events now and every pruneInterval
// until ctx is done. A failed run is logged and retried at the next tick.
func (s *Server) pruneLoop(ctx context.Context) {
	s.logger.Info("pruning processed events", "retention", s.retention.String(), "interval", s.pruneInterval.String())
	t := time.NewTicker(s.pruneInterval)
	defer t.Stop()
	for {
		n, err := receiver.Prune(ctx, s.pool, s.retention)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("prune processed events", "error", err, "pruned", n)
		case n > 0:
			s.logger.Info("pruned processed events", "count", n, "retention", s.retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// apply is the kit's Apply: one ledger entry and the balance update, on the
// kit's transaction.
func (s *Server) apply(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
	amount, err := parseAmount(ev.Data)
	if err != nil {
		return err
	}
	q := dbsqlc.New(tx)
	if err := q.LedgerEntryInsert(ctx, dbsqlc.LedgerEntryInsertParams{EndpointID: ev.EndpointID, EventID: ev.ID,
		CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, Amount: amount}); err != nil {
		return fmt.Errorf("insert ledger entry: %w", err)
	}
	if err := q.LedgerBalanceEnsure(ctx, dbsqlc.LedgerBalanceEnsureParams{EndpointID: ev.EndpointID, CorrelationID: ev.CorrelationID}); err != nil {
		return fmt.Errorf("create ledger balance: %w", err)
	}
	n, err := q.LedgerBalanceAdd(ctx, dbsqlc.LedgerBalanceAddParams{EndpointID: ev.EndpointID, CorrelationID: ev.CorrelationID,
		Sequence: ev.Sequence, Amount: amount})
	if err != nil {
		return fmt.Errorf("update ledger balance: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("update ledger balance: sequence %d does not follow the ledger's last sequence", ev.Sequence)
	}
	return nil
}

// parseAmount returns data.amount as decimal text. Anything but a JSON
// number is rejected for good: retrying cannot fix the event.
func parseAmount(data json.RawMessage) (string, error) {
	var d struct {
		Amount json.RawMessage `json:"amount"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return "", fmt.Errorf("data is not a JSON object: %w", receiver.ErrRejected)
	}
	raw := bytes.TrimSpace(d.Amount)
	if len(raw) == 0 || raw[0] == '"' {
		return "", fmt.Errorf("data.amount must be a number: %w", receiver.ErrRejected)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("data.amount must be a number: %w", receiver.ErrRejected)
	}
	return n.String(), nil
}

// Correlation is the GET /correlations/{id} answer: what the receiver
// applied for one lane (a correlation at one endpoint), and what it parked.
type Correlation struct {
	EndpointID    string      `json:"endpoint_id"`
	CorrelationID string      `json:"correlation_id"`
	LastSequence  int64       `json:"last_sequence"`
	Applied       []string    `json:"applied"`
	Balance       json.Number `json:"balance"`
	Parked        []int64     `json:"parked"`
}

func (s *Server) getCorrelation(w http.ResponseWriter, r *http.Request) {
	id, endpoint := r.PathValue("id"), r.URL.Query().Get("endpoint_id")
	if !r.URL.Query().Has("endpoint_id") {
		eps, err := s.kit.Endpoints(r.Context(), id)
		if err != nil {
			s.logger.Error("get correlation", "correlation_id", id, "error", err)
			writeProblem(w, http.StatusInternalServerError, "could not read the correlation")
			return
		}
		switch len(eps) {
		case 0:
			writeProblem(w, http.StatusNotFound, fmt.Sprintf("no event of correlation %q has arrived", id))
			return
		case 1:
			endpoint = eps[0]
		default:
			writeProblem(w, http.StatusBadRequest, fmt.Sprintf("correlation %q has lanes of several endpoints here (%s): name one with ?endpoint_id=", id, strings.Join(eps, ", ")))
			return
		}
	}
	view, err := s.correlation(r.Context(), endpoint, id)
	if errors.Is(err, receiver.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, fmt.Sprintf("no event of correlation %q at endpoint %q has arrived", id, endpoint))
		return
	}
	if err != nil {
		s.logger.Error("get correlation", "correlation_id", id, "error", err)
		writeProblem(w, http.StatusInternalServerError, "could not read the correlation")
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// correlation reads the ledger of the lane (endpoint, id) from one snapshot
// and adds the events the kit holds parked.
func (s *Server) correlation(ctx context.Context, endpoint, id string) (Correlation, error) {
	view := Correlation{EndpointID: endpoint, CorrelationID: id, Applied: []string{}, Balance: "0", Parked: []int64{}}
	kitState, err := s.kit.Correlation(ctx, endpoint, id)
	if err != nil {
		return Correlation{}, err
	}
	for _, p := range kitState.Parked {
		view.Parked = append(view.Parked, p.Sequence)
	}

	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Correlation{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := dbsqlc.New(tx)
	lane := dbsqlc.LedgerBalanceGetParams{EndpointID: endpoint, CorrelationID: id}
	b, err := q.LedgerBalanceGet(ctx, lane)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Only parked events so far.
	case err != nil:
		return Correlation{}, fmt.Errorf("get ledger balance: %w", err)
	default:
		view.Balance, view.LastSequence = json.Number(b.Balance), b.LastSequence
	}
	applied, err := q.LedgerEntryListByLane(ctx, dbsqlc.LedgerEntryListByLaneParams(lane))
	if err != nil {
		return Correlation{}, fmt.Errorf("list ledger entries: %w", err)
	}
	view.Applied = append(view.Applied, applied...)
	return view, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func writeProblem(w http.ResponseWriter, code int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: http.StatusText(code), Status: code, Detail: detail})
}
