package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookflow/hookflow/internal/transport"
)

// tracerName is the instrumentation scope of the delivery spans: the
// delivery activity's, as it was before the webhook became a transport, so
// that what filters traces on it keeps finding them.
const tracerName = "github.com/hookflow/hookflow/activities"

// send makes one delivery attempt's HTTP request inside a client span (a
// child of the RunActivity span the Temporal interceptor put in ctx) and
// sends its context to the receiver as traceparent, so the receiver's work
// joins the event's trace. Every attempt is its own span, with the status
// the receiver answered. The URL is not recorded (it may carry a token in
// its query or path); only its host and port are, and an error's message
// is scrubbed of the URL's credentials, its path always among them. With tracing off the span is a
// no-op one and no traceparent is sent.
func send(ctx context.Context, d transport.Destination, m transport.Message, req *http.Request, client *http.Client) (*http.Response, error) {
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(req.Method),
		semconv.ServerAddress(req.URL.Hostname()),
		attribute.String("hookflow.event_id", m.EventID),
		attribute.String("hookflow.correlation_id", m.CorrelationID),
		attribute.Int64("hookflow.sequence", m.Sequence),
		attribute.String("hookflow.endpoint_id", d.EndpointID),
		attribute.Int("hookflow.attempt", int(m.Attempt)),
	}
	if p, err := strconv.Atoi(req.URL.Port()); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	ctx, span := otel.Tracer(tracerName).Start(ctx, "deliver webhook", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	// W3C traceparent and tracestate only: baggage stays inside hookflow,
	// since a receiver is another party.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))

	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error repeats the URL; record only what went wrong, with
		// anything of the URL's credentials a cause may quote taken out.
		// This is span.RecordError with the message redacted.
		cause := err
		if ue, ok := errors.AsType[*url.Error](err); ok {
			cause = ue.Err
		}
		span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
			semconv.ExceptionType(fmt.Sprintf("%T", cause)),
			semconv.ExceptionMessage(scrub(cause.Error(), req.URL, false)),
		))
		span.SetStatus(codes.Error, "request failed")
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	// Anything but a 2xx other than 202 means the event is not delivered.
	if resp.StatusCode < 200 || resp.StatusCode >= 300 || resp.StatusCode == http.StatusAccepted {
		span.SetStatus(codes.Error, "receiver answered "+strconv.Itoa(resp.StatusCode))
	}
	return resp, nil
}
