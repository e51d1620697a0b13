package otelreceiver_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/receiver/otelreceiver"
	"github.com/hookflow/hookflow/kit/webhook"
)

// pg is the package's Postgres cluster, started on first use.
var pg localpg.Suite

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

// A delivery carrying traceparent is applied inside a span that continues
// the sender's trace, and Apply runs in that span's context; one without it
// starts a trace of its own; a failed one is an error span.
func TestTraceparentContinuesIntoTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, receiver.Migrate(ctx, pool))
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	tp := &recorder{}

	var (
		mu       sync.Mutex
		applyCtx = map[string]trace.SpanContext{}
	)
	rc, err := receiver.New(receiver.Config{Secrets: []string{secret}}, receiver.Deps{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		Tracer: otelreceiver.New(otelreceiver.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}}),
		Apply: func(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
			mu.Lock()
			applyCtx[ev.ID] = trace.SpanContextFromContext(ctx)
			mu.Unlock()
			if ev.ID == "evt_failing" {
				return errors.New("disk on fire")
			}
			return nil
		},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	post := func(id string, seq int64, traceparent string) int {
		t.Helper()
		body, err := json.Marshal(receiver.Event{
			ID: id, Type: "test.event", Timestamp: time.Now().UTC().Truncate(time.Second), EndpointID: "ep_test",
			CorrelationID: "order-traced", Sequence: seq, PreviousSequence: seq - 1, Data: json.RawMessage(`{"n":1}`),
		})
		require.NoError(t, err)
		now := time.Now()
		sig, err := webhook.Sign([]string{secret}, id, now.Unix(), body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderID, id)
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(webhook.HeaderSignature, sig)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	require.Equal(t, http.StatusOK, post("evt_traced", 1, "00-"+traceID+"-"+spanID+"-01"))
	require.Equal(t, http.StatusOK, post("evt_untraced", 2, ""))
	require.Equal(t, http.StatusInternalServerError, post("evt_failing", 3, ""))

	spans := map[string]*recordedSpan{}
	for _, s := range tp.ended() {
		require.Equal(t, otelreceiver.SpanName, s.name)
		spans[s.attrs["hookflow.event_id"]] = s
	}
	require.Len(t, spans, 3)

	traced := spans["evt_traced"]
	require.Equal(t, otelreceiver.ScopeName, traced.scope)
	require.Equal(t, trace.SpanKindServer, traced.kind)
	require.Equal(t, traceID, traced.SpanContext().TraceID().String(), "the span joins the sender's trace")
	require.Equal(t, spanID, traced.parent.SpanID().String(), "the sender's span is its parent")
	require.True(t, traced.parent.IsRemote())
	attrs := traced.attrs
	require.Equal(t, "applied", attrs["hookflow.receiver.outcome"])
	require.Equal(t, "order-traced", attrs["hookflow.correlation_id"])
	require.Equal(t, "1", attrs["hookflow.sequence"])
	require.Equal(t, "POST", attrs["http.request.method"])
	require.Equal(t, "200", attrs["http.response.status_code"])
	require.Equal(t, codes.Unset, traced.status)
	mu.Lock()
	require.Equal(t, traced.SpanContext().SpanID(), applyCtx["evt_traced"].SpanID(), "Apply runs inside the delivery's span")
	mu.Unlock()

	untraced := spans["evt_untraced"]
	require.False(t, untraced.parent.IsValid(), "without traceparent the delivery starts its own trace")
	require.NotEqual(t, traceID, untraced.SpanContext().TraceID().String())

	failing := spans["evt_failing"]
	require.Equal(t, "error", failing.attrs["hookflow.receiver.outcome"])
	require.Equal(t, "500", failing.attrs["http.response.status_code"])
	require.Equal(t, codes.Error, failing.status, "a 5xx is the receiver's error")
	require.Len(t, failing.errs, 1)
	require.ErrorContains(t, failing.errs[0], "disk on fire")
}

// recorder is a TracerProvider that keeps every span the receiver ends:
// enough of OpenTelemetry's SDK for this test, without making it a
// requirement of the module.
type recorder struct {
	embedded.TracerProvider
	mu    sync.Mutex
	spans []*recordedSpan
}

func (r *recorder) Tracer(name string, _ ...trace.TracerOption) trace.Tracer {
	return recordingTracer{r: r, scope: name}
}

func (r *recorder) ended() []*recordedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*recordedSpan
	for _, s := range r.spans {
		if s.done {
			out = append(out, s)
		}
	}
	return out
}

type recordingTracer struct {
	embedded.Tracer
	r     *recorder
	scope string
}

func (rt recordingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	parent := trace.SpanContextFromContext(ctx)
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	if parent.IsValid() {
		tid = parent.TraceID()
	} else {
		_, _ = rand.Read(tid[:])
	}
	s := &recordedSpan{
		r: rt.r, scope: rt.scope, name: name, kind: cfg.SpanKind(), parent: parent, attrs: map[string]string{},
		sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
	}
	s.SetAttributes(cfg.Attributes()...)
	rt.r.mu.Lock()
	rt.r.spans = append(rt.r.spans, s)
	rt.r.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

// recordedSpan keeps what the test checks; the rest is noop.Span's.
type recordedSpan struct {
	noop.Span
	r      *recorder
	scope  string
	name   string
	kind   trace.SpanKind
	sc     trace.SpanContext
	parent trace.SpanContext
	attrs  map[string]string
	status codes.Code
	errs   []error
	done   bool
}

func (s *recordedSpan) SpanContext() trace.SpanContext { return s.sc }
func (s *recordedSpan) IsRecording() bool              { return true }

func (s *recordedSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	for _, a := range kv {
		s.attrs[string(a.Key)] = a.Value.String()
	}
}

func (s *recordedSpan) SetStatus(code codes.Code, _ string) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.status = code
}

func (s *recordedSpan) RecordError(err error, _ ...trace.EventOption) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *recordedSpan) End(...trace.SpanEndOption) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.done = true
}
