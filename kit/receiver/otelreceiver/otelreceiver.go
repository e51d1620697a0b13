// Package otelreceiver makes the receiver kit's deliveries OpenTelemetry
// spans: set New's Tracer as receiver.Deps.Tracer.
//
// It is a Go module of its own (github.com/hookflow/hookflow/kit/receiver/otelreceiver)
// so that a receiver that does not trace keeps OpenTelemetry, and the
// modules its go.mod files list, out of its module graph.
//
// Each delivery is a server span named SpanName, the child of the sender's
// traceparent when the request has one, so the receiver's work joins the
// event's trace. Only the method is recorded from the request: no header,
// URL or body.
package otelreceiver

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookflow/hookflow/kit/receiver"
)

// SpanName is the name of the span each delivery gets.
const SpanName = "receive webhook"

// ScopeName is the instrumentation scope of the spans: the receiver kit's,
// as it was before the spans were made here, so that queries on it keep
// finding them.
const ScopeName = "github.com/hookflow/hookflow/kit/receiver"

// Config holds the tracer's collaborators.
type Config struct {
	// TracerProvider makes the spans. Nil means OpenTelemetry's global
	// provider (a no-op until one is installed).
	TracerProvider trace.TracerProvider
	// Propagator reads the sender's trace context (W3C traceparent) from
	// the request. Nil means OpenTelemetry's global propagator, looked up
	// per request so that one installed after New still applies.
	Propagator propagation.TextMapPropagator
}

// New returns a receiver.Tracer that makes OpenTelemetry spans.
func New(cfg Config) receiver.Tracer {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &tracer{tracer: tp.Tracer(ScopeName), propagator: cfg.Propagator}
}

type tracer struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator // nil: the global one
}

// Start continues the sender's trace (traceparent) in a server span.
func (t *tracer) Start(r *http.Request) (context.Context, receiver.Span) {
	prop := t.propagator
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, s := t.tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method)))
	return ctx, span{s}
}

type span struct{ trace.Span }

// Event names the verified event.
func (s span) Event(ev receiver.Event) {
	s.SetAttributes(
		attribute.String("hookflow.event_id", ev.ID),
		attribute.String("hookflow.endpoint_id", ev.EndpointID),
		attribute.String("hookflow.correlation_id", ev.CorrelationID),
		attribute.Int64("hookflow.sequence", ev.Sequence),
		attribute.Int64("hookflow.previous_sequence", ev.PreviousSequence),
	)
}

// Outcome records what the transaction came to, and the error when it
// failed.
func (s span) Outcome(outcome string, err error) {
	if err != nil {
		s.RecordError(err)
	}
	s.SetAttributes(attribute.String("hookflow.receiver.outcome", outcome))
}

// End records the status answered. A 5xx is an error of the receiver; a
// 4xx is the sender's, so the span's status is left unset (as for any
// server).
func (s span) End(status int) {
	if status != 0 {
		s.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if status >= http.StatusInternalServerError {
		s.SetStatus(codes.Error, http.StatusText(status))
	}
	s.Span.End()
}
