// Package spantest records OpenTelemetry spans in memory for tests that
// check what hookflow traces.
package spantest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hookflow/hookflow/internal/tracing"
)

// Install makes a provider that records every span into the returned
// recorder, installs it globally as tracing.Install does in production, and
// puts the no-op globals back when t ends. Tests that call it must not run
// in parallel with other tests of their package that trace.
func Install(t testing.TB) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	RestoreGlobals(t)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracing.Install(tp)
	return tp, rec
}

// RestoreGlobals puts OpenTelemetry's global provider and propagator back
// to no-ops (tracing off) when t ends.
func RestoreGlobals(t testing.TB) {
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}

// Attrs is a span's attributes as text, keyed by name.
func Attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}
