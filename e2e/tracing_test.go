package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/receiver/otelreceiver"
	"github.com/hookflow/hookflow/lab/spantest"
	"github.com/hookflow/hookflow/lab/testenv"
)

// One event is one trace: the producer's traceparent is continued by the
// API's request span, the workflow start carries it through Temporal into
// the workflow and its activities, every delivery attempt is a span that
// sends traceparent, and the receiver kit applies the event inside a span
// of the same trace. The first attempt is answered 503 so that "every
// attempt" is seen.
func TestTraceFollowsTheEventToTheReceiver(t *testing.T) {
	t.Parallel()
	tp, rec := spantest.Install(t)
	ic, err := tracing.TemporalInterceptor(tp)
	require.NoError(t, err)
	b := setup(t, options{interceptors: []interceptor.ClientInterceptor{ic}})

	// The receiver: the real receiver kit on a real socket, behind a
	// handler that notes each traceparent and refuses the first attempt.
	rpool := migratedPool(t, receiver.Migrate)
	var (
		mu           sync.Mutex
		traceparents []string
		applied      []string
	)
	// The kit needs the endpoint's secret, the endpoint needs the URL.
	var kit atomic.Pointer[receiver.Receiver]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		first := len(traceparents) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		kit.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ep := b.createEndpoint(srv.URL + "/webhook")
	rc, err := receiver.New(receiver.Config{Secrets: []string{ep.Secret}}, receiver.Deps{
		Pool: rpool, Logger: testenv.Logger(t), Tracer: otelreceiver.New(otelreceiver.Config{}),
		Apply: func(ctx context.Context, _ pgx.Tx, ev receiver.Event) error {
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, ev.ID+"@"+trace.SpanContextFromContext(ctx).TraceID().String())
			return nil
		},
	})
	require.NoError(t, err)
	kit.Store(rc)

	// The producer posts the event from inside its own trace.
	const (
		producerTrace = "5b8efff798038103d269b633813fc60c"
		producerSpan  = "eee19b7ec3c1b174"
	)
	evID := b.id("traced")
	raw, err := json.Marshal(map[string]any{
		"id": evID, "correlation_id": b.id("order"), "sequence": 1, "endpoint_id": ep.ID, "type": "order.updated", "data": map[string]any{"n": 1},
	})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.apiURL+"/v1/events", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.cfg.APIToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+producerTrace+"-"+producerSpan+"-01")
	resp, err := b.checked().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	waitFor(t, 60*time.Second, "delivery", func() bool { return b.eventState(evID).State == contract.StateDelivered })
	mu.Lock()
	require.Equal(t, []string{evID + "@" + producerTrace}, applied, "Apply ran once, inside the event's trace")
	require.Len(t, traceparents, 2, "one refused attempt, one delivered")
	for _, tpHeader := range traceparents {
		require.True(t, strings.HasPrefix(tpHeader, "00-"+producerTrace+"-"), "every attempt sends the event's trace: %q", tpHeader)
	}
	require.NotEqual(t, traceparents[0], traceparents[1], "each attempt is its own span")
	sent := append([]string(nil), traceparents...)
	mu.Unlock()

	// The workflow's span ends when the workflow does, shortly after delivery.
	var spans []sdktrace.ReadOnlySpan
	named := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	runWorkflow := "RunWorkflow:" + contract.EventWorkflow
	waitFor(t, 30*time.Second, "the event's spans to end", func() bool {
		spans = spans[:0]
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() == producerTrace {
				spans = append(spans, s)
			}
		}
		return len(named(runWorkflow)) > 0 && len(named(otelreceiver.SpanName)) > 0 && len(named("RunActivity:Deliver")) == 2
	})

	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		got := named(name)
		require.Len(t, got, 1, "span %q in the event's trace", name)
		return got[0]
	}
	apiSpan := one("POST /v1/events")
	require.Equal(t, producerSpan, apiSpan.Parent().SpanID().String(), "the API continues the producer's trace")
	require.Equal(t, apiSpan.SpanContext().TraceID().String(), producerTrace)
	start := one("StartWorkflow:" + contract.EventWorkflow)
	require.Equal(t, apiSpan.SpanContext().SpanID(), start.Parent().SpanID(), "the workflow is started inside the request's span")
	require.Equal(t, start.SpanContext().SpanID(), one(runWorkflow).Parent().SpanID(), "the workflow runs under its start, through the Temporal header")
	// The first attempt runs as a local activity, the retry as a regular
	// one: each is started, and run, under the workflow's trace.
	require.Len(t, named("StartActivity:Deliver"), 2, "the local first attempt and the activity that retries it")

	attempts := named("deliver webhook")
	require.Len(t, attempts, 2)
	runs := map[trace.SpanID]bool{}
	for _, s := range named("RunActivity:Deliver") {
		runs[s.SpanContext().SpanID()] = true
	}
	status := map[string]string{}
	for _, a := range attempts {
		require.Equal(t, trace.SpanKindClient, a.SpanKind())
		require.True(t, runs[a.Parent().SpanID()], "an attempt's span is the child of its activity run")
		st := spantest.Attrs(a)
		require.Equal(t, evID, st["hookflow.event_id"])
		status[st["hookflow.attempt"]] = st["http.response.status_code"]
		require.Contains(t, sent, "00-"+producerTrace+"-"+a.SpanContext().SpanID().String()+"-01", "the receiver got this attempt's span as traceparent")
	}
	require.Equal(t, map[string]string{"1": "503", "2": "200"}, status)

	kitSpan := one(otelreceiver.SpanName)
	require.Equal(t, "applied", spantest.Attrs(kitSpan)["hookflow.receiver.outcome"])
	var delivered sdktrace.ReadOnlySpan
	for _, a := range attempts {
		if spantest.Attrs(a)["hookflow.attempt"] == "2" {
			delivered = a
		}
	}
	require.Equal(t, delivered.SpanContext().SpanID(), kitSpan.Parent().SpanID(), "the receiver's transaction is the child of the delivering attempt")
}
