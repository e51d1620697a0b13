// Package tracing sets up OpenTelemetry tracing for hookflow's processes from
// the standard OTEL_* environment variables, and gives the Temporal client the
// interceptor that carries a trace from the API through the workflows and
// activities.
//
// Tracing is off unless the environment asks for it (see Setup). Off, no
// provider, exporter, propagator or interceptor is installed: instrumented
// code runs against OpenTelemetry's global no-op provider, which records
// nothing, and no traceparent is read or sent. On, spans go to the exporter
// OpenTelemetry's autoexport picks (OTLP over grpc or http/protobuf, or the
// console) through a batch processor, and the W3C TraceContext and Baggage
// propagators are installed globally.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/config"
)

// Default service names, one per process kind; OTEL_SERVICE_NAME (or
// service.name in OTEL_RESOURCE_ATTRIBUTES) overrides them.
const (
	ServiceAPI      = "hookflow-api"
	ServiceWorker   = "hookflow-worker"
	ServiceDev      = "hookflow-dev"
	ServiceRelay    = "hookflow-relay"
	ServiceReceiver = "hookflow-receiver"
)

// ScopeName is the instrumentation scope of hookflow's own spans.
const ScopeName = "github.com/hookflow/hookflow"

// Tracing is one process's tracing, as Setup made it.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when off
}

// Setup reads the process environment and, when tracing is on, builds the
// exporter and a batching TracerProvider for service (the default service
// name, one of the Service constants) and installs it and the W3C
// propagators globally. Exporter errors are logged to logger at warn level.
// Call Shutdown before exiting to flush. A configuration error is a
// *config.UsageError.
//
// The exporter is autoexport's: OTEL_TRACES_EXPORTER names it (otlp, console
// or none), OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
// picks OTLP's transport (http/protobuf by default, or grpc), and the
// exporter reads its other OTEL_EXPORTER_OTLP_* variables (endpoint, headers,
// TLS, timeout, compression), the provider OTEL_TRACES_SAMPLER and OTEL_BSP_*.
// hookflow adds two rules around it:
//
//   - OTEL_SDK_DISABLED=true turns tracing off, whatever else is set.
//   - With OTEL_TRACES_EXPORTER unset, tracing is on only when
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
//     set. Unlike the specification, whose default exporter is otlp, nothing
//     is exported by default: a process must not try to reach a collector
//     nobody configured.
func Setup(ctx context.Context, service string, logger *slog.Logger) (*Tracing, error) {
	exp, err := newExporter(ctx)
	if err != nil || exp == nil {
		return &Tracing{}, err
	}
	// Later detectors win: the default name, then OTEL_RESOURCE_ATTRIBUTES
	// and OTEL_SERVICE_NAME.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, &config.UsageError{Msg: "OTEL_RESOURCE_ATTRIBUTES: " + err.Error()}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	// The SDK reports export failures here; the message never carries the
	// exporter's headers, which may hold a collector's credentials.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "error", err)
	}))
	Install(tp)
	name, _ := res.Set().Value("service.name")
	logger.Info("tracing on", "service", name.AsString(), "exporter", cmp.Or(os.Getenv("OTEL_TRACES_EXPORTER"), "otlp"))
	return &Tracing{provider: tp}, nil
}

// newExporter returns the span exporter the environment asks for, or nil
// when tracing is off (see Setup).
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	var opts []autoexport.SpanOption
	if os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		// Consulted only while OTEL_TRACES_EXPORTER is unset: off.
		opts = append(opts, autoexport.WithFallbackSpanExporter(func(context.Context) (sdktrace.SpanExporter, error) {
			return nil, nil
		}))
	}
	exp, err := autoexport.NewSpanExporter(ctx, opts...)
	if err != nil {
		return nil, &config.UsageError{Msg: fmt.Sprintf("trace exporter %q: %v (OTEL_TRACES_EXPORTER takes otlp, console or none; OTLP's protocol is grpc or http/protobuf)",
			os.Getenv("OTEL_TRACES_EXPORTER"), err)}
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return exp, nil
}

// Install makes tp the global TracerProvider and installs the W3C
// TraceContext and Baggage propagators globally. Setup calls it; tests call
// it with a provider that records spans in memory.
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Shutdown flushes the spans not yet exported and stops the exporter, within
// ctx. It is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// TemporalInterceptors are the interceptors to give the Temporal client:
// the tracing interceptor when tracing is on, none when it is off (so an
// untraced process pays nothing, and its workflow logs carry no empty trace
// IDs). Workers built from the client inherit them; do not also set them on
// worker options, or every span is made twice.
func (t *Tracing) TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !t.Enabled() {
		return nil, nil
	}
	i, err := TemporalInterceptor(t.provider)
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// TemporalInterceptor is Temporal's OpenTelemetry tracing interceptor on tp.
// On the client it starts a StartWorkflow span (and SignalWorkflow,
// SignalWithStartWorkflow, QueryWorkflow ones) and writes its context into
// the Temporal header; on a worker it continues that context in RunWorkflow,
// StartActivity and RunActivity spans, and puts the activity's span into the
// activity's context.Context.
func TemporalInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	if tp == nil {
		return nil, errors.New("tracing: tracer provider is required")
	}
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: tp.Tracer("go.temporal.io/sdk"),
		// Queries are polled by the UI and the CLI; they would bury the
		// event's trace.
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	return i, nil
}
