// Package tracing sets up OpenTelemetry tracing for hookflow's processes from
// the standard OTEL_* environment variables, and gives the Temporal client the
// interceptor that carries a trace from the API through the workflows and
// activities.
//
// Tracing is off unless the environment asks for it (see Enabled). Off, no
// provider, exporter, propagator or interceptor is installed: instrumented
// code runs against OpenTelemetry's global no-op provider, which records
// nothing, and no traceparent is read or sent. On, spans go to an OTLP
// exporter (grpc or http/protobuf) through a batch processor, and the W3C
// TraceContext and Baggage propagators are installed globally.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
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

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Settings is what the environment asks of tracing.
type Settings struct {
	// Enabled: export spans. When false the rest is unused.
	Enabled bool
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
}

// FromEnv reads the on/off rule and the protocol from getenv:
//
//   - OTEL_SDK_DISABLED=true turns tracing off, whatever else is set.
//   - OTEL_TRACES_EXPORTER, when set, decides: a comma-separated list of
//     "otlp" (on) and "none"; any other exporter is an error.
//   - Otherwise tracing is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
//     OTEL_EXPORTER_OTLP_ENDPOINT is set, and off when neither is.
//
// The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf (the specification's
// default); grpc and http/protobuf are supported. Unlike the specification,
// whose default exporter is otlp, nothing is exported by default: a process
// must not try to reach a collector nobody configured.
func FromEnv(getenv func(string) string) (Settings, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Settings{}, nil
	}
	var s Settings
	if v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v != "" {
		for _, e := range strings.Split(v, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "otlp":
				s.Enabled = true
			case "none", "":
			default:
				return Settings{}, &config.UsageError{Msg: fmt.Sprintf("OTEL_TRACES_EXPORTER: unsupported exporter %q (hookflow exports traces with otlp, or none)", e)}
			}
		}
	} else {
		s.Enabled = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	}
	if !s.Enabled {
		return Settings{}, nil
	}
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if getenv(name) == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	s.Protocol = strings.ToLower(strings.TrimSpace(cmp.Or(getenv(name), ProtocolHTTP)))
	if s.Protocol != ProtocolGRPC && s.Protocol != ProtocolHTTP {
		return Settings{}, &config.UsageError{Msg: fmt.Sprintf("%s: unsupported protocol %q (use grpc or http/protobuf)", name, s.Protocol)}
	}
	return s, nil
}

// Tracing is one process's tracing, as Setup made it.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when off
}

// Setup reads the environment (see FromEnv) and, when tracing is on, builds
// the OTLP exporter and a batching TracerProvider for service (the default
// service name, one of the Service constants) and installs it and the W3C
// propagators globally. The exporter reads its own OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, TLS, timeout, compression) and the provider
// OTEL_TRACES_SAMPLER and OTEL_BSP_*, from the process environment as the
// OpenTelemetry SDK always does. Exporter errors are logged to logger at
// warn level. Call Shutdown before exiting to flush. A configuration error
// is a *config.UsageError.
func Setup(ctx context.Context, service string, getenv func(string) string, logger *slog.Logger) (*Tracing, error) {
	s, err := FromEnv(getenv)
	if err != nil || !s.Enabled {
		return &Tracing{}, err
	}
	var exp sdktrace.SpanExporter
	switch s.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
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
	logger.Info("tracing on", "service", name.AsString(), "protocol", s.Protocol)
	return &Tracing{provider: tp}, nil
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
