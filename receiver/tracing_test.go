package receiver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookflow/hookflow/internal/spantest"
	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/receiver"
	"github.com/hookflow/hookflow/webhook"
)

// A delivery carrying traceparent is applied inside a span that continues
// the sender's trace, and Apply runs in that span's context.
func TestTraceparentContinuesIntoTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	var (
		mu       sync.Mutex
		applyCtx = map[string]trace.SpanContext{}
	)
	rc, err := receiver.New(receiver.Config{Secrets: []string{b.secret}}, receiver.Deps{
		Pool: b.pool, Logger: testenv.Logger(t),
		TracerProvider: tp, Propagator: propagation.TraceContext{},
		Apply: func(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
			mu.Lock()
			applyCtx[ev.ID] = trace.SpanContextFromContext(ctx)
			mu.Unlock()
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
		body := envelope(id, "order-traced", seq)
		now := time.Now()
		sig, err := webhook.Sign([]string{b.secret}, id, now.Unix(), body)
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

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		require.Equal(t, receiver.SpanName, s.Name())
		spans[spantest.Attrs(s)["hookflow.event_id"]] = s
	}
	require.Len(t, spans, 2)

	traced := spans["evt_traced"]
	require.Equal(t, trace.SpanKindServer, traced.SpanKind())
	require.Equal(t, traceID, traced.SpanContext().TraceID().String(), "the span joins the sender's trace")
	require.Equal(t, spanID, traced.Parent().SpanID().String(), "the sender's span is its parent")
	require.True(t, traced.Parent().IsRemote())
	attrs := spantest.Attrs(traced)
	require.Equal(t, "applied", attrs["hookflow.receiver.outcome"])
	require.Equal(t, "order-traced", attrs["hookflow.correlation_id"])
	require.Equal(t, "200", attrs["http.response.status_code"])
	mu.Lock()
	require.Equal(t, traced.SpanContext().SpanID(), applyCtx["evt_traced"].SpanID(), "Apply runs inside the delivery's span")
	mu.Unlock()

	untraced := spans["evt_untraced"]
	require.False(t, untraced.Parent().IsValid(), "without traceparent the delivery starts its own trace")
	require.NotEqual(t, traceID, untraced.SpanContext().TraceID().String())
}
