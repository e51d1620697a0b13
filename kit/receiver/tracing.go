package receiver

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the receiver kit's spans.
const tracerName = "github.com/hookflow/hookflow/kit/receiver"

// SpanName is the name of the span each delivery gets.
const SpanName = "receive webhook"

// startSpan continues the sender's trace (traceparent) in a server span.
// Only the method is recorded from the request: no header, URL or body.
func (rc *Receiver) startSpan(r *http.Request) (context.Context, trace.Span) {
	prop := rc.propagator
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return rc.tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method)))
}

// endSpan records the status answered. A 5xx is an error of the receiver;
// a 4xx is the sender's, so the span is left unset (as for any server).
func endSpan(span trace.Span, status int) {
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// traceEvent names the verified event on the delivery's span.
func traceEvent(ctx context.Context, ev Event) {
	trace.SpanFromContext(ctx).SetAttributes(
		attribute.String("hookflow.event_id", ev.ID),
		attribute.String("hookflow.endpoint_id", ev.EndpointID),
		attribute.String("hookflow.correlation_id", ev.CorrelationID),
		attribute.Int64("hookflow.sequence", ev.Sequence),
		attribute.Int64("hookflow.previous_sequence", ev.PreviousSequence),
	)
}

// traceOutcome records what the transaction came to.
func traceOutcome(ctx context.Context, out outcome, err error) {
	span := trace.SpanFromContext(ctx)
	what := out.String()
	switch {
	case errors.Is(err, ErrRejected):
		what = "rejected"
	case err != nil:
		what = "error"
		span.RecordError(err)
	}
	span.SetAttributes(attribute.String("hookflow.receiver.outcome", what))
}

// String names the outcome as the receiver answers it.
func (o outcome) String() string {
	switch o {
	case outcomeApplied:
		return "applied"
	case outcomeAlreadyProcessed:
		return "already_processed"
	case outcomeParked:
		return "parked"
	case outcomeSequenceConflict:
		return "sequence_conflict"
	case outcomePreviousPassed:
		return "previous_passed"
	default:
		return "unknown"
	}
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
