package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookflow/hookflow/lab/spantest"
)

// A producer's traceparent is continued by a server span named after the
// route; the span reaches the starter (and so the workflow start), names the
// event, and records neither the path, the token nor the body.
func TestRequestSpanContinuesTheProducersTrace(t *testing.T) {
	_, rec := spantest.Install(t)
	b := setup(t)

	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		spanID  = "b7ad6b7169203331"
	)
	h := b.bearer()
	h.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	body := fmt.Sprintf(`{"id":"evt_traced","correlation_id":"order-7","sequence":1,"endpoint_id":%q,"type":"order.created","data":{"card":"4111-secret"}}`, b.endpointID)
	resp, out := b.do(t, http.MethodPost, "/v1/events", "application/json", body, h)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, out)
	resp, out = b.do(t, http.MethodGet, "/v1/events/evt_traced", "", "", http.Header{"Traceparent": h["Traceparent"]})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, out)
	resp, _ = b.do(t, http.MethodGet, "/healthz", "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() == traceID {
			byName[s.Name()] = s
		}
		require.NotContains(t, s.Name(), "healthz", "probes are not traced")
	}
	post, ok := byName["POST /v1/events"]
	require.True(t, ok, "spans: %v", byName)
	require.Equal(t, trace.SpanKindServer, post.SpanKind())
	require.Equal(t, spanID, post.Parent().SpanID().String(), "the producer's span is the parent")
	require.Equal(t, map[string]string{
		"http.request.method": "POST", "http.route": "/v1/events", "http.response.status_code": "202",
		"hookflow.event_id": "evt_traced", "hookflow.correlation_id": "order-7", "hookflow.sequence": "1",
		"hookflow.endpoint_id": b.endpointID,
	}, spantest.Attrs(post))
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.String(), "4111-secret", "no body in spans")
			require.NotContains(t, kv.Value.String(), b.token, "no token in spans")
		}
	}
	started := b.starter.lastTrace.Load()
	require.NotNil(t, started)
	require.Equal(t, post.SpanContext().SpanID(), started.SpanID(), "the workflow start runs in the request's span")

	get, ok := byName["GET /v1/events/:id"]
	require.True(t, ok, "a refused request is traced too: %v", byName)
	require.Equal(t, map[string]string{
		"http.request.method": "GET", "http.route": "/v1/events/:id", "http.response.status_code": "401",
	}, spantest.Attrs(get), "the path (with its IDs) is not recorded")
}
