package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
)

// Attempt outcomes recorded in delivery_attempts.
const (
	OutcomeDelivered = "delivered"
	OutcomeRetry     = "retry"
	OutcomePermanent = "permanent"
	OutcomeGone      = "gone"
	OutcomeDisabled  = "disabled"
)

// DeliverInput is one event as the workflow hands it to Deliver. Every
// attempt sends the same envelope; only webhook-timestamp and the signature
// change.
type DeliverInput struct {
	EventID       string          `json:"event_id"`
	CorrelationID string          `json:"correlation_id"`
	Sequence      int64           `json:"sequence"`
	EndpointID    string          `json:"endpoint_id"`
	Type          string          `json:"type"`
	Timestamp     time.Time       `json:"timestamp"`
	Data          json.RawMessage `json:"data"`
	// Skipped are the sequences just before this one that an operator
	// skipped; the envelope tells the receiver so it does not wait for them.
	Skipped []int64 `json:"skipped,omitempty"`
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration `json:"timeout"`
	// AttemptOffset is added to Temporal's attempt number in the attempts
	// recorded: the regular activity that follows a first attempt made as a
	// local activity counts on from it.
	AttemptOffset int32 `json:"attempt_offset,omitempty"`
}

// Envelope is the signed body a receiver gets.
type Envelope struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	Timestamp     string          `json:"timestamp"`
	CorrelationID string          `json:"correlation_id"`
	Sequence      int64           `json:"sequence"`
	Data          json.RawMessage `json:"data"`
	// SkippedSequences, present only after an operator skip, lists the
	// sequences before this one that will never be delivered.
	SkippedSequences []int64 `json:"skipped_sequences,omitempty"`
}

// Envelope builds the body sent for this event.
func (in DeliverInput) Envelope() Envelope {
	return Envelope{
		ID: in.EventID, Type: in.Type, Timestamp: in.Timestamp.UTC().Format(time.RFC3339Nano),
		CorrelationID: in.CorrelationID, Sequence: in.Sequence, Data: in.Data, SkippedSequences: in.Skipped,
	}
}

// DeliverResult describes the attempt that succeeded.
type DeliverResult struct {
	StatusCode int   `json:"status_code"`
	Attempt    int32 `json:"attempt"`
	// HandOffPending: the event is delivered but telling its sequencer (or
	// releasing the successor it named) failed; the workflow runs Finish,
	// which retries.
	HandOffPending bool `json:"hand_off_pending,omitempty"`
}

// maxRecordedBody bounds how much of a receiver's answer is kept.
const maxRecordedBody = 2048

// Deliver makes one signed POST of the event to its endpoint and maps the
// answer per the wire contract: 2xx except 202 → delivered (the ledger is
// updated, then the event is handed over to its sequencer, which names the
// event it releases next, and that one is signalled, before returning);
// 410 → the endpoint is disabled, non-retryable;
// any other 4xx except 408 and 429 → non-retryable; 429/503 with Retry-After
// → retry after that delay; everything else → retry.
func (a *Activities) Deliver(ctx context.Context, in DeliverInput) (DeliverResult, error) {
	attempt := activity.GetInfo(ctx).Attempt + in.AttemptOffset
	ep, state, err := a.store.EventStartAttempt(ctx, in.EventID, in.EndpointID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return DeliverResult{}, temporal.NewNonRetryableApplicationError("endpoint "+in.EndpointID+" does not exist", ErrTypeEndpointDisabled, nil)
		}
		return DeliverResult{}, err
	}
	if state == contract.StateDelivered {
		// An earlier attempt was delivered and recorded, and its result lost
		// on the way back (a workflow task that timed out after its local
		// activity finished, or an operator's reset): nothing is sent again,
		// and the hand-over, which may not have happened, is repeated.
		return a.handOver(ctx, in, DeliverResult{StatusCode: http.StatusOK, Attempt: attempt}), nil
	}
	started := a.now()
	if ep.Disabled {
		a.record(ctx, in.EventID, store.Attempt{Attempt: attempt, StartedAt: started, Outcome: OutcomeDisabled, Error: ptr("endpoint is disabled")})
		return DeliverResult{}, temporal.NewNonRetryableApplicationError("endpoint "+ep.ID+" is disabled", ErrTypeEndpointDisabled, nil)
	}
	body, err := json.Marshal(in.Envelope())
	if err != nil {
		return DeliverResult{}, temporal.NewNonRetryableApplicationError("encode envelope: "+err.Error(), ErrTypePermanent, nil)
	}
	ts := started.Unix()
	sig, err := webhook.Sign(ep.SigningSecrets(started), in.EventID, ts, body)
	if err != nil {
		return DeliverResult{}, temporal.NewNonRetryableApplicationError("sign: "+err.Error(), ErrTypePermanent, nil)
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return DeliverResult{}, temporal.NewNonRetryableApplicationError("build request: "+redactError(err, nil), ErrTypePermanent, nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookflow")
	req.Header.Set(webhook.HeaderID, in.EventID)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(webhook.HeaderSignature, sig)

	resp, err := a.send(ctx, in, attempt, req)
	latency := a.now().Sub(started)
	rec := store.Attempt{Attempt: attempt, StartedAt: started, LatencyMS: int32(latency.Milliseconds())}
	if err != nil {
		// The error is text from here on, stored and sent to Temporal: it
		// names the endpoint by its redacted URL, and it is not passed on as
		// a cause, whose message would carry the URL whole.
		msg := redactError(err, req.URL)
		rec.Outcome, rec.Error = OutcomeRetry, ptr(msg)
		a.record(ctx, in.EventID, rec)
		a.observe(in.EndpointID, rec, latency)
		return DeliverResult{}, temporal.NewApplicationError("deliver: "+msg, ErrTypeRetryable)
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxRecordedBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // drain so the connection is reused
	resp.Body.Close()
	code := int32(resp.StatusCode)
	rec.StatusCode = &code
	what := fmt.Sprintf("receiver answered %d", resp.StatusCode)
	if len(snippet) > 0 {
		// A receiver's error page may quote the URL it was called at.
		what += ": " + scrub(string(snippet), req.URL)
	}

	switch c := resp.StatusCode; {
	case c >= 200 && c < 300 && c != http.StatusAccepted:
		rec.Outcome = OutcomeDelivered
		a.observe(in.EndpointID, rec, latency)
		if err := a.store.EventDelivered(ctx, in.EventID, in.CorrelationID, in.Sequence, rec, a.now()); err != nil {
			// The receiver has it; a retry re-sends and gets "already processed".
			return DeliverResult{}, err
		}
		return a.handOver(ctx, in, DeliverResult{StatusCode: c, Attempt: attempt}), nil
	case c == http.StatusGone:
		rec.Outcome, rec.Error = OutcomeGone, ptr(what)
		a.record(ctx, in.EventID, rec)
		a.observe(in.EndpointID, rec, latency)
		if err := a.store.EndpointDisable(ctx, ep.ID, "receiver answered 410 Gone for event "+in.EventID); err != nil {
			return DeliverResult{}, err
		}
		return DeliverResult{}, temporal.NewNonRetryableApplicationError(what, ErrTypeEndpointGone, nil)
	case (c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable) && retryAfter(resp.Header, a.now()) > 0:
		d := retryAfter(resp.Header, a.now())
		rec.Outcome, rec.Error = OutcomeRetry, ptr(what)
		a.record(ctx, in.EventID, rec)
		a.observe(in.EndpointID, rec, latency)
		return DeliverResult{}, temporal.NewApplicationErrorWithOptions(what, ErrTypeRetryAfter, temporal.ApplicationErrorOptions{NextRetryDelay: d})
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests,
		c >= 300 && c < 400: // redirects are not followed: a moved endpoint is a configuration error
		rec.Outcome, rec.Error = OutcomePermanent, ptr(what)
		a.record(ctx, in.EventID, rec)
		a.observe(in.EndpointID, rec, latency)
		return DeliverResult{}, temporal.NewNonRetryableApplicationError(what, ErrTypePermanent, nil)
	default:
		rec.Outcome, rec.Error = OutcomeRetry, ptr(what)
		a.record(ctx, in.EventID, rec)
		a.observe(in.EndpointID, rec, latency)
		return DeliverResult{}, temporal.NewApplicationError(what, ErrTypeRetryable)
	}
}

// handOver tells the sequencer the delivered event is finished, which
// releases its successor. A failure is not the attempt's: the event is
// delivered, and failing here would send it again; the workflow repeats the
// hand-over (Finish) instead.
func (a *Activities) handOver(ctx context.Context, in DeliverInput, res DeliverResult) DeliverResult {
	if err := a.Finish(ctx, FinishInput{CorrelationID: in.CorrelationID, Sequence: in.Sequence, EventID: in.EventID}); err != nil {
		a.logger.Warn("hand delivered event over to its sequencer", "event_id", in.EventID, "error", err)
		res.HandOffPending = true
	}
	return res
}

// observe records an HTTP attempt's metrics.
func (a *Activities) observe(endpointID string, rec store.Attempt, latency time.Duration) {
	a.metrics.Attempt(endpointID, rec.Outcome, latency, rec.Outcome == OutcomeDelivered)
	if rec.Outcome == OutcomeRetry {
		a.metrics.Retry(endpointID)
	}
}

// record stores an attempt. A failure to record is logged, not returned: the
// attempt happened either way, and failing the activity would re-send.
func (a *Activities) record(ctx context.Context, eventID string, at store.Attempt) {
	if err := a.store.AttemptInsert(ctx, eventID, at); err != nil {
		a.logger.Error("record delivery attempt", "event_id", eventID, "attempt", at.Attempt, "error", err)
	}
}

// maxRetryAfter caps the delay a receiver may ask for.
const maxRetryAfter = time.Hour

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or
// unusable. It is capped at maxRetryAfter, and a number of seconds too
// large for any integer is capped too, not taken as absent.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

func ptr[T any](v T) *T { return &v }
