// Package receiver is the receiving half of hookflow's delivery guarantee: an
// http.Handler that verifies Standard Webhooks signatures and applies each
// event exactly once, in sequence order per lane, inside one PostgreSQL
// transaction together with the application's own state change.
//
// A lane is one hookflow endpoint's share of one correlation: the envelope's
// (endpoint_id, correlation_id). Dedup, cursor and parked events are kept per
// lane, so several endpoints (say, with different event_types) may point at
// one receiver database, and each applies its own stream in order; an event
// fanned out to two of them is applied once in each lane.
//
// Per request: verify the signature on the raw body → BEGIN → dedup insert
// into processed_events → lock the lane's cursor → apply (your Apply
// function, on the same transaction) → compare-and-swap the cursor → COMMIT →
// answer.
//
// The order rule: an endpoint sees only the events of a correlation meant for
// it, so sequences arrive sparse (1, 4, 9), and each envelope names in
// previous_sequence the last earlier one sent to this endpoint (0: none). An
// event applies when the lane's cursor (the last applied sequence) equals
// its previous_sequence, and the cursor then moves to its sequence;
// it also applies when the cursor stands at one of its skipped_sequences,
// which happens when an operator skipped an event that the receiver had
// applied after all (its answer was lost). An event whose previous_sequence
// the cursor has not reached yet is parked and answered 202; once that
// predecessor is applied, the parked events that follow it are applied in
// order.
//
// A lane the receiver has never seen (nothing of it applied here yet)
// starts where Config.StartPosition says. StartFromBeginning (the default)
// expects the lane's first event, with previous_sequence 0; a later one
// parks, as for any gap. That is right for a receiver that has been there
// from the endpoint's first delivery, and it is what catches a lost
// history. After an endpoint is re-pointed at a fresh receiver (a new
// database, a new URL), its next envelope names a previous_sequence the old
// receiver applied, so with StartFromBeginning every lane with history parks
// until the sender dead-letters it. StartMidStream applies the first
// envelope of a never-seen lane whatever its previous_sequence and keeps the
// cursor from there: set it on a receiver that takes over endpoints
// mid-stream and knows the history before is elsewhere (or not needed).
// Switching a receiver to it also frees lanes that parked that way, at the
// sender's next retry or an operator's replay of the dead letter. Once a
// lane has applied an event its gaps park, whatever the start position.
//
// Answers follow the hookflow wire contract:
//
//	200 {"status":"applied"}            applied now
//	200 {"status":"already_processed"}  applied before (a retry); nothing done
//	202 {"status":"parked"}             stored, waiting for its previous_sequence; the sender retries
//	400 bad envelope (endpoint_id missing, say) or envelope id ≠ webhook-id header (permanent)
//	401 signature or timestamp check failed (permanent)
//	409 the sequence was already applied, or is parked, in the lane under another event ID, or the cursor
//	    went past the event's previous_sequence to a sequence it does not list as skipped
//	    (permanent); at or below the pruned watermark the answer is 200 already_processed (see Prune)
//	413 body larger than Config.MaxBodyBytes (permanent)
//	422 Apply returned an error wrapping ErrRejected (permanent)
//	500 Apply or the database failed; everything rolled back (the sender retries)
//
// Errors are RFC 9457 application/problem+json. Create the tables with Migrate
// or apply Migrations with your own tool.
//
// processed_events, the dedup ledger, gains a row per event. Run Prune on a
// schedule to keep it bounded: it deletes rows older than a retention whose
// sequence is below their lane's cursor, and records per lane the highest
// sequence it pruned. The cursor's compare-and-swap already
// refuses those sequences, and a delivery at or below that watermark is
// answered 200 already_processed, so a retry of a pruned event is answered as
// before and nothing is applied twice. What stays is one cursor row per
// lane and, in processed_events, the row at each cursor plus the
// rows younger than the retention.
package receiver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/webhook"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultMaxBodyBytes is the default Config.MaxBodyBytes: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultTimeout is the default Config.Timeout.
	DefaultTimeout = 30 * time.Second
)

// ErrRejected marks an event the application refuses for good (say, data it
// cannot interpret). When Apply returns an error wrapping it, the transaction
// is rolled back and the receiver answers 422, which the sender dead-letters
// at once instead of retrying.
var ErrRejected = errors.New("event rejected")

// ErrNotFound is returned by Correlation for a correlation ID the receiver
// has never seen.
var ErrNotFound = errors.New("not found")

// Event is the signed envelope a delivery carries.
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	// EndpointID is the hookflow endpoint the event was sent to: with
	// CorrelationID it names the lane whose cursor orders it.
	EndpointID    string `json:"endpoint_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	// PreviousSequence is the sequence of the last earlier event of the
	// correlation sent to this endpoint, 0 for none. The lane's cursor must
	// stand there for the event to apply.
	PreviousSequence int64           `json:"previous_sequence"`
	Data             json.RawMessage `json:"data"`
	// SkippedSequences, sent by hookflow after an operator skipped events,
	// lists the sequences meant for this endpoint after PreviousSequence and
	// before this one that will never arrive.
	SkippedSequences []int64 `json:"skipped_sequences,omitempty"`
}

// follows reports whether ev applies on a cursor at last, below ev.Sequence:
// the cursor stands at ev's previous_sequence, or at a sequence the sender
// skipped after it. The latter is an event an operator skipped although the
// receiver had applied it (its answer was lost): the sender counts it as
// never delivered, the receiver's cursor as applied, and both agree that
// nothing meant for this endpoint is missing before ev.
func (ev Event) follows(last int64) bool {
	return last == ev.PreviousSequence || last > ev.PreviousSequence && slices.Contains(ev.SkippedSequences, last)
}

// StartPosition is where the receiver takes up a lane it has never seen:
// no event of that endpoint and correlation applied here yet.
type StartPosition int

const (
	// StartFromBeginning, the default, applies a never-seen lane's first
	// event only at previous_sequence 0; a later one parks (202) until its
	// predecessors arrive, which after a re-pointing they never do.
	StartFromBeginning StartPosition = iota
	// StartMidStream applies the first event of a lane with nothing applied
	// yet whatever its previous_sequence, and keeps the lane's cursor from
	// there. For a receiver that takes over endpoints with history, such as
	// a fresh one an endpoint was re-pointed at.
	StartMidStream
)

// String returns the name ParseStartPosition reads: "beginning" or
// "mid-stream".
func (p StartPosition) String() string {
	switch p {
	case StartFromBeginning:
		return "beginning"
	case StartMidStream:
		return "mid-stream"
	}
	return fmt.Sprintf("StartPosition(%d)", int(p))
}

// ParseStartPosition reads "beginning" (or "") and "mid-stream".
func ParseStartPosition(s string) (StartPosition, error) {
	switch s {
	case "", "beginning":
		return StartFromBeginning, nil
	case "mid-stream":
		return StartMidStream, nil
	}
	return 0, fmt.Errorf("start position %q: want beginning or mid-stream", s)
}

// Config holds the receiver's settings.
type Config struct {
	// Secrets verify signatures ("whsec_…"); a delivery passes when any of
	// them matches any signature it carries. During a rotation list the new
	// and the old secret. Required.
	Secrets []string
	// Tolerance is how far webhook-timestamp may lie from the receiver's
	// clock. Zero means webhook.DefaultTolerance (5 minutes).
	Tolerance time.Duration
	// MaxBodyBytes bounds the request body; larger bodies get 413. Zero
	// means DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// Timeout bounds the database work of one request, Apply calls and the
	// drain of parked successors included. Processing does not stop when the
	// client goes away: once a signed event has arrived, finishing it is
	// cheaper than redoing it. Zero means DefaultTimeout.
	Timeout time.Duration
	// StartPosition is where a lane the receiver has never seen starts.
	// Zero is StartFromBeginning.
	StartPosition StartPosition
}

// Deps holds the receiver's collaborators.
type Deps struct {
	// Pool reaches the database holding the kit's tables. Required.
	Pool *pgxpool.Pool
	// Apply makes the event's state change. It runs inside the receiver's
	// transaction and must write through tx only, so that its changes
	// commit or roll back together with the dedup and cursor rows; it must
	// not commit or roll back tx itself. Calls for one correlation ID never
	// overlap and come in sequence order; calls for different correlations
	// run concurrently. Return an error to roll back and answer 500 (the
	// sender retries), or one wrapping ErrRejected to answer 422. An event's
	// Apply may run more than once when its transaction rolls back (only one
	// run ever commits), so effects outside tx are not exactly-once. Required.
	Apply func(ctx context.Context, tx pgx.Tx, ev Event) error
	// Logger receives the receiver's logs. Nil means slog.Default().
	Logger *slog.Logger
	// Tracer makes the span of each delivery. Nil means no spans. For
	// OpenTelemetry, set otelreceiver.New's (a module of its own, so that
	// a receiver without tracing does not inherit OpenTelemetry).
	Tracer Tracer
}

// Receiver is the webhook endpoint. It is safe for concurrent use.
type Receiver struct {
	cfg    Config
	pool   *pgxpool.Pool
	apply  func(ctx context.Context, tx pgx.Tx, ev Event) error
	logger *slog.Logger
	tracer Tracer // nil: no spans
}

// New returns a Receiver, filling defaults into cfg and validating it and deps.
func New(cfg Config, deps Deps) (*Receiver, error) {
	cfg.Tolerance = cmp.Or(cfg.Tolerance, webhook.DefaultTolerance)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	switch {
	case len(cfg.Secrets) == 0:
		return nil, errors.New("receiver config: at least one secret is required")
	case cfg.Tolerance < 0, cfg.MaxBodyBytes < 0, cfg.Timeout < 0:
		return nil, errors.New("receiver config: tolerance, max body bytes and timeout must not be negative")
	case cfg.StartPosition != StartFromBeginning && cfg.StartPosition != StartMidStream:
		return nil, fmt.Errorf("receiver config: unknown start position %d", cfg.StartPosition)
	case deps.Pool == nil:
		return nil, errors.New("receiver deps: pool is required")
	case deps.Apply == nil:
		return nil, errors.New("receiver deps: apply is required")
	}
	for i, s := range cfg.Secrets {
		if _, err := webhook.DecodeSecret(s); err != nil {
			return nil, fmt.Errorf("receiver config: secret %d: %w", i, err)
		}
	}
	return &Receiver{
		cfg:    cfg,
		pool:   deps.Pool,
		apply:  deps.Apply,
		logger: cmp.Or(deps.Logger, slog.Default()),
		tracer: deps.Tracer,
	}, nil
}

// ServeHTTP handles one delivery (POST). The answer is written only after the
// transaction has committed, so a 2xx other than 202 always means the event
// is durably applied.
//
// With a Deps.Tracer, each delivery is a span that continues the sender's
// trace when the request carries one, so the receiver's work joins the
// event's trace. The span covers the verification and the transaction, and
// is in the context Apply gets, so the application's own spans nest under
// it.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, span := rc.startSpan(r)
	// Limit the body on the server's own writer: it closes the connection
	// after an oversized body only when it sees its own type.
	r.Body = http.MaxBytesReader(w, r.Body, rc.cfg.MaxBodyBytes)
	sw := &statusWriter{ResponseWriter: w}
	// Deferred so that the span ends even when Apply panics (status 0
	// then: nothing was answered).
	defer func() { span.End(sw.status) }()
	rc.serve(sw, r.WithContext(ctx), span)
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request, span Span) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, http.StatusMethodNotAllowed, "deliveries are POST requests")
		return
	}
	if r.ContentLength > rc.cfg.MaxBodyBytes {
		writeProblem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", rc.cfg.MaxBodyBytes))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeProblem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", rc.cfg.MaxBodyBytes))
			return
		}
		writeProblem(w, http.StatusBadRequest, "could not read the body")
		return
	}
	headerID := r.Header.Get(webhook.HeaderID)
	if err := webhook.VerifyHeader(rc.cfg.Secrets, r.Header, body, time.Now(), rc.cfg.Tolerance); err != nil {
		if errors.Is(err, webhook.ErrInvalidSecret) {
			rc.logger.Error("verify webhook", "event_id", headerID, "error", err)
			writeProblem(w, http.StatusInternalServerError, "receiver misconfigured")
			return
		}
		rc.logger.Warn("webhook rejected", "event_id", headerID, "reason", err.Error())
		writeProblem(w, http.StatusUnauthorized, err.Error())
		return
	}
	ev, err := decodeEvent(body)
	if err != nil {
		rc.logger.Warn("webhook rejected", "event_id", headerID, "reason", err.Error())
		writeProblem(w, http.StatusBadRequest, err.Error())
		return
	}
	if ev.ID != headerID {
		rc.logger.Warn("webhook rejected", "event_id", headerID, "reason", "envelope id differs from webhook-id")
		writeProblem(w, http.StatusBadRequest, "envelope id differs from the webhook-id header")
		return
	}

	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), rc.cfg.Timeout)
	defer cancel()
	log := rc.logger.With("event_id", ev.ID, "endpoint_id", ev.EndpointID, "correlation_id", ev.CorrelationID, "sequence", ev.Sequence)
	span.Event(ev)
	out, err := rc.process(ctx, ev, body, r.Header)
	traceOutcome(span, out, err)
	switch {
	case errors.Is(err, ErrRejected):
		log.Warn("event rejected by apply", "error", err)
		writeProblem(w, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil:
		log.Error("process event", "error", err)
		writeProblem(w, http.StatusInternalServerError, "event not applied; retry later")
		return
	}
	switch out {
	case outcomeApplied:
		log.Debug("event applied")
		rc.drain(ctx, ev.EndpointID, ev.CorrelationID, ev.Sequence)
		writeStatus(w, http.StatusOK, "applied", ev.ID)
	case outcomeAlreadyProcessed:
		log.Debug("event already processed")
		writeStatus(w, http.StatusOK, "already_processed", ev.ID)
	case outcomeParked:
		log.Info("event parked until its previous sequence is applied", "previous_sequence", ev.PreviousSequence)
		writeStatus(w, http.StatusAccepted, "parked", ev.ID)
	case outcomeSequenceConflict:
		log.Warn("sequence claimed by another event id")
		writeProblem(w, http.StatusConflict, fmt.Sprintf("sequence %d of correlation %s at endpoint %s belongs to another event id", ev.Sequence, ev.CorrelationID, ev.EndpointID))
	case outcomePreviousPassed:
		log.Warn("cursor passed the event's previous sequence", "previous_sequence", ev.PreviousSequence)
		writeProblem(w, http.StatusConflict, fmt.Sprintf("correlation %s at endpoint %s has applied past previous_sequence %d, to a sequence this event does not list as skipped: it can never apply", ev.CorrelationID, ev.EndpointID, ev.PreviousSequence))
	}
}

// decodeEvent parses and validates the envelope.
func decodeEvent(body []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, fmt.Errorf("envelope is not valid JSON: %w", err)
	}
	switch {
	case !validKey(ev.ID):
		return Event{}, errors.New("envelope id must be 1-255 characters of [A-Za-z0-9_:-]")
	case !validKey(ev.EndpointID):
		return Event{}, errors.New("envelope endpoint_id must be 1-255 characters of [A-Za-z0-9_:-]")
	case !validKey(ev.CorrelationID):
		return Event{}, errors.New("envelope correlation_id must be 1-255 characters of [A-Za-z0-9_:-]")
	case ev.Sequence < 1:
		return Event{}, errors.New("envelope sequence must be an integer >= 1")
	case ev.PreviousSequence < 0 || ev.PreviousSequence >= ev.Sequence:
		return Event{}, errors.New("envelope previous_sequence must be at least 0 and below sequence")
	case slices.ContainsFunc(ev.SkippedSequences, func(q int64) bool { return q <= ev.PreviousSequence || q >= ev.Sequence }):
		return Event{}, errors.New("envelope skipped_sequences must lie between previous_sequence and sequence")
	case ev.Type == "":
		return Event{}, errors.New("envelope type is required")
	}
	return ev, nil
}

// validKey reports whether s is a valid idempotency key or correlation ID:
// 1-255 characters of [A-Za-z0-9_:-].
func validKey(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

type statusBody struct {
	Status  string `json:"status"`
	EventID string `json:"event_id"`
}

func writeStatus(w http.ResponseWriter, code int, status, eventID string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(statusBody{Status: status, EventID: eventID})
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
