package api

import (
	"net/http"
	"strings"

	"github.com/hookflow/hookflow/kit/intake"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the API's spans.
const tracerName = "github.com/hookflow/hookflow/api"

// traceRequests starts a server span per /v1 request, named after its route
// template ("POST /v1/events"), as the child of the caller's traceparent when
// it sends one, so a producer's trace continues through hookflow. The span
// is in the request's context: the Temporal client's tracing interceptor
// picks it up when the event's workflow is started. Only the method, route
// and status are recorded: never the path (it holds IDs), the query, a
// header or the body. Probes, /metrics and /openapi.json are not traced.
//
// With tracing off the global propagator reads nothing and the global
// provider is OpenTelemetry's no-op one: the cost is one non-recording span.
func traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if !strings.HasPrefix(req.URL.Path, "/v1/") {
			return next(c)
		}
		ctx := otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		name, attrs := req.Method, []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(req.Method)}
		if route := c.Path(); strings.HasPrefix(route, "/v1/") {
			name += " " + route
			attrs = append(attrs, semconv.HTTPRoute(route))
		}
		ctx, span := otel.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		c.SetRequest(req.WithContext(ctx))

		if err := next(c); err != nil {
			// Write the problem inside the span, so its status is the one sent;
			// the error handler skips a response already committed.
			c.Error(err)
		}
		status := c.Response().Status
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		return nil
	}
}

// traceEvent names the event on the request's span, so the trace can be
// found from an event ID, a correlation ID or a sequence.
func traceEvent(c echo.Context, ev intake.Event) {
	trace.SpanFromContext(c.Request().Context()).SetAttributes(
		attribute.String("hookflow.event_id", ev.ID),
		attribute.String("hookflow.correlation_id", ev.CorrelationID),
		attribute.Int64("hookflow.sequence", ev.Sequence),
		attribute.String("hookflow.endpoint_id", ev.EndpointID),
	)
}
