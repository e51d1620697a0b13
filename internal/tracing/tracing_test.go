package tracing_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/lab/spantest"
)

// setup runs Setup with exactly env's OTEL_* variables set, and shuts the
// result down at the end of t.
func setup(t *testing.T, env map[string]string) (*tracing.Tracing, error) {
	t.Helper()
	spantest.RestoreGlobals(t)
	clearOTelEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	tr, err := tracing.Setup(context.Background(), tracing.ServiceAPI, slog.New(slog.DiscardHandler))
	if tr != nil {
		t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	}
	return tr, err
}

// TestOnOff: the environment turns tracing on or off; the exporters are
// built but send nothing here, since no span is made.
func TestOnOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
	}{
		{"nothing set: off", nil, false},
		{"unrelated OTEL_ variables: off", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, false},
		{"exporter otlp: on", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"traces endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"grpc protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true},
		{"console exporter", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"exporter none beats an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{"sdk disabled beats everything", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{"sdk disabled false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"bad protocol is ignored while off", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := setup(t, tc.env)
			require.NoError(t, err)
			require.Equal(t, tc.on, tr.Enabled())
		})
	}
}

func TestSetupRejectsWhatItCannotExport(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"zipkin exporter": {"OTEL_TRACES_EXPORTER": "zipkin"},
		"a list":          {"OTEL_TRACES_EXPORTER": "otlp,console"},
		"http/json":       {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"http/json by endpoint": {
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := setup(t, env)
			var ue *config.UsageError
			require.True(t, errors.As(err, &ue), "want a usage error, got %v", err)
		})
	}
}

func TestOffInstallsNothing(t *testing.T) {
	tr, err := setup(t, nil)
	require.NoError(t, err)
	require.False(t, tr.Enabled())
	interceptors, err := tr.TemporalInterceptors()
	require.NoError(t, err)
	require.Empty(t, interceptors, "no Temporal interceptor when off")
	require.NoError(t, tr.Shutdown(context.Background()))
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	require.False(t, isSDK, "no provider installed when off")
	require.Empty(t, otel.GetTextMapPropagator().Fields(), "no propagator installed when off: traceparent is neither read nor sent")
}

// collector is a fake OTLP collector on 127.0.0.1, over HTTP or gRPC.
type collector struct {
	mu       sync.Mutex
	requests []*collectorpb.ExportTraceServiceRequest
}

func (c *collector) add(r *collectorpb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, r)
}

// spans returns service name → span names received.
func (c *collector) spans() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for _, r := range c.requests {
		for _, rs := range r.GetResourceSpans() {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out[service] = append(out[service], s.GetName())
				}
			}
		}
	}
	return out
}

func (c *collector) serveHTTP(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectorpb.ExportTraceServiceRequest{}
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.add(req)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type grpcCollector struct {
	collectorpb.UnimplementedTraceServiceServer
	c *collector
}

func (g grpcCollector) Export(_ context.Context, r *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	g.c.add(r)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (c *collector) serveGRPC(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, grpcCollector{c: c})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

// clearOTelEnv blanks the variables a developer's shell may have set, so
// each case sees only its own (an empty value counts as unset).
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_TRACES_SAMPLER",
	} {
		t.Setenv(k, "")
	}
}

// On, Setup exports spans to the configured collector under the service's
// name, installs the W3C propagators, and Shutdown flushes what is buffered.
func TestSetupExportsToTheCollector(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         func(url string) map[string]string
		serve       func(c *collector, t *testing.T) string
		wantService string
	}{
		{
			name:        "http/protobuf via OTEL_EXPORTER_OTLP_ENDPOINT, default service name",
			env:         func(url string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url} },
			serve:       (*collector).serveHTTP,
			wantService: tracing.ServiceWorker,
		},
		{
			name: "http/protobuf: the traces protocol wins over the general one",
			env: func(url string) map[string]string {
				return map[string]string{
					"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
				}
			},
			serve:       (*collector).serveHTTP,
			wantService: tracing.ServiceWorker,
		},
		{
			name: "grpc via OTEL_TRACES_EXPORTER, OTEL_SERVICE_NAME",
			env: func(url string) map[string]string {
				return map[string]string{
					"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
					"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url, "OTEL_SERVICE_NAME": "worker-eu-1",
				}
			},
			serve:       (*collector).serveGRPC,
			wantService: "worker-eu-1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spantest.RestoreGlobals(t)
			clearOTelEnv(t)
			c := &collector{}
			for k, v := range tc.env(tc.serve(c, t)) {
				t.Setenv(k, v)
			}
			ctx := context.Background()
			tr, err := tracing.Setup(ctx, tracing.ServiceWorker, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			require.True(t, tr.Enabled())
			interceptors, err := tr.TemporalInterceptors()
			require.NoError(t, err)
			require.Len(t, interceptors, 1)
			require.ElementsMatch(t, []string{"traceparent", "tracestate", "baggage"}, otel.GetTextMapPropagator().Fields())

			_, span := otel.Tracer("test").Start(ctx, "unit of work")
			span.End()
			require.Empty(t, c.spans(), "spans are batched, not sent one by one")
			require.NoError(t, tr.Shutdown(ctx))
			require.Equal(t, map[string][]string{tc.wantService: {"unit of work"}}, c.spans(), "Shutdown flushes the batch")
		})
	}
}
