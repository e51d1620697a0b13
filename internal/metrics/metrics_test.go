package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
)

func newMetrics(t *testing.T) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	return m
}

func TestNilMetricsRecordNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.EventAccepted("ep")
	m.Attempt("ep", "delivered", time.Millisecond, true)
	m.Retry("ep")
	m.Throttled("ep")
	m.DeadLettered("ep")
	m.ForgetEndpoint("ep")
	m.NoticeDropped("hookflow.dead_letter.created")
}

// TestForgetEndpointDropsItsSeries: a deleted endpoint's series go, every
// other endpoint's stay.
func TestForgetEndpointDropsItsSeries(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	for _, ep := range []string{"ep_a", "ep_b"} {
		m.EventAccepted(ep)
		m.Attempt(ep, "permanent", time.Millisecond, false)
		m.Retry(ep)
		m.Throttled(ep)
		m.DeadLettered(ep)
	}
	m.ForgetEndpoint("ep_a")
	out := scrape(t, m)
	require.NotContains(t, out, `"ep_a"`)
	require.Contains(t, out, `hookflow_events_accepted_total{endpoint_id="ep_b"} 1`)
	require.Contains(t, out, `hookflow_delivery_attempt_duration_seconds_count{endpoint_id="ep_b",outcome="permanent"} 1`)
}

func TestDeliveryInstruments(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	m.EventAccepted("ep_a")
	m.Attempt("ep_a", "retry", 20*time.Millisecond, false)
	m.Retry("ep_a")
	m.Attempt("ep_a", "retry", 20*time.Millisecond, false)
	m.Retry("ep_a")
	m.Attempt("ep_b", "permanent", time.Millisecond, false)
	m.DeadLettered("ep_b")
	m.Throttled("ep_b")

	out := scrape(t, m)
	require.Contains(t, out, `hookflow_events_accepted_total{endpoint_id="ep_a"} 1`)
	require.Contains(t, out, `hookflow_delivery_retries_total{endpoint_id="ep_a"} 2`)
	require.Contains(t, out, `hookflow_endpoint_consecutive_failures{endpoint_id="ep_a"} 2`)
	require.Contains(t, out, `hookflow_events_dead_lettered_total{endpoint_id="ep_b"} 1`)
	require.Contains(t, out, `hookflow_delivery_throttled_total{endpoint_id="ep_b"} 1`)
	require.Contains(t, out, `hookflow_delivery_attempt_duration_seconds_count{endpoint_id="ep_a",outcome="retry"} 2`)

	m.Attempt("ep_a", "delivered", 5*time.Millisecond, true)
	out = scrape(t, m)
	require.Contains(t, out, `hookflow_endpoint_consecutive_failures{endpoint_id="ep_a"} 0`)
	require.Contains(t, out, `hookflow_events_delivered_total{endpoint_id="ep_a"} 1`)
}

type fakeStats struct {
	s       store.Summary
	tenants []store.TenantSummary
	err     error
}

func (f fakeStats) StatsSummary(context.Context) (store.Summary, error) { return f.s, f.err }

func (f fakeStats) StatsTenants(_ context.Context, offset, limit int) ([]store.TenantSummary, int64, error) {
	return f.tenants[min(offset, len(f.tenants)):min(offset+limit, len(f.tenants))], int64(len(f.tenants)), f.err
}

func TestStoreGaugesReadOnScrape(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	require.NoError(t, metrics.RegisterStore(m.Registry(), fakeStats{s: store.Summary{Queued: 2, InFlight: 3, DeadLettersOpen: 4, OldestLagSeconds: 12.5,
		ByEndpoint: []store.EndpointSummary{{EndpointID: "ep_a", Waiting: 4, Delivering: 1, DeadLettersOpen: 4, LagSeconds: 12.5}}}}, logger))
	out := scrape(t, m)
	for _, want := range []string{"hookflow_events_queued 2", "hookflow_events_in_flight 3", "hookflow_dead_letters_open 4",
		"hookflow_oldest_undelivered_age_seconds 12.5", "hookflow_store_up 1",
		`hookflow_endpoint_deliveries{endpoint_id="ep_a",state="waiting"} 4`, `hookflow_endpoint_deliveries{endpoint_id="ep_a",state="delivering"} 1`,
		`hookflow_endpoint_dead_letters_open{endpoint_id="ep_a"} 4`, `hookflow_endpoint_oldest_undelivered_age_seconds{endpoint_id="ep_a"} 12.5`} {
		require.Contains(t, out, want)
	}

	require.NotContains(t, out, "hookflow_tenant_oldest_undelivered_age_seconds{", "no tenant ranked, no tenant series")

	down := newMetrics(t)
	require.NoError(t, metrics.RegisterStore(down.Registry(), fakeStats{err: errors.New("db down")}, logger))
	out = scrape(t, down)
	require.Contains(t, out, "hookflow_store_up 0")
	require.NotContains(t, out, "hookflow_dead_letters_open")
}

// TestTenantSeriesAreBounded: however many tenants there are, the worst
// TenantSeries have series of their own and the rest are one OtherTenant
// series holding the remainder of the totals.
func TestTenantSeriesAreBounded(t *testing.T) {
	t.Parallel()
	src := fakeStats{s: store.Summary{DeadLettersOpen: 250, ByEndpoint: []store.EndpointSummary{{EndpointID: "ep_a", Waiting: 300, Delivering: 40}}}}
	for i := range 25 {
		// Ranked worst first, as the store answers.
		src.tenants = append(src.tenants, store.TenantSummary{TenantID: fmt.Sprintf("t%02d", i), DeadLettersOpen: int64(25 - i),
			Waiting: 10, Delivering: 1, OldestLagSeconds: float64(100 - i)})
	}
	m := newMetrics(t)
	require.NoError(t, metrics.RegisterStore(m.Registry(), src, slog.New(slog.DiscardHandler)))
	out := scrape(t, m)
	require.Equal(t, metrics.TenantSeries+1, strings.Count(out, "hookflow_tenant_dead_letters_open{"), out)
	require.Equal(t, metrics.TenantSeries, strings.Count(out, "hookflow_tenant_oldest_undelivered_age_seconds{"), out)
	require.Contains(t, out, `hookflow_tenant_dead_letters_open{tenant_id="t00"} 25`)
	require.Contains(t, out, `hookflow_tenant_oldest_undelivered_age_seconds{tenant_id="t09"} 91`)
	require.NotContains(t, out, `tenant_id="t10"`, "the eleventh tenant is in (other)")
	require.Contains(t, out, `hookflow_tenant_dead_letters_open{tenant_id="(other)"} 45`, "250 open, 25+24+…+16 = 205 of them the top's")
	require.Contains(t, out, `hookflow_tenant_deliveries_pending{tenant_id="(other)"} 230`, "340 pending, 10×11 of them the top's")
}

// TestTemporalHandler feeds the handler as the SDK does (tags that vary per
// call site) and checks what a scrape of hookflow's registry shows: the
// SDK's names in Prometheus' conventions, its tags as the only labels, timers
// in seconds.
func TestTemporalHandler(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h, err := metrics.NewTemporalHandler(reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	base := h.WithTags(map[string]string{"namespace": "default"})
	base.Counter("temporal_request").Inc(1)
	base.WithTags(map[string]string{"operation": "StartWorkflowExecution"}).Counter("temporal_request").Inc(2)
	base.WithTags(map[string]string{"task_queue": "q"}).Gauge("temporal_worker_task_slots_available").Update(7)
	base.Timer("temporal_request_latency").Record(30 * time.Millisecond)

	fams, err := reg.Gather()
	require.NoError(t, err)
	names := make([]string, 0, len(fams))
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	require.ElementsMatch(t, []string{"temporal_request_total", "temporal_worker_task_slots_available", "temporal_request_latency_seconds"}, names)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	require.Contains(t, out, `temporal_request_total{namespace="default"} 1`)
	require.Contains(t, out, `temporal_request_total{namespace="default",operation="StartWorkflowExecution"} 2`)
	require.Contains(t, out, `temporal_worker_task_slots_available{namespace="default",task_queue="q"} 7`)
	require.Contains(t, out, `temporal_request_latency_seconds_count{namespace="default"} 1`)
	require.Contains(t, out, `temporal_request_latency_seconds_bucket{namespace="default",le="0.05"} 1`)
	require.Contains(t, out, `temporal_request_latency_seconds_bucket{namespace="default",le="0.025"} 0`)
}

// TestTemporalHandlerBesideHookflowMetrics: the SDK's metrics are served by
// the same /metrics as hookflow's own.
func TestTemporalHandlerBesideHookflowMetrics(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	h, err := metrics.NewTemporalHandler(m.Registry(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	m.EventAccepted("ep")
	h.WithTags(map[string]string{"namespace": "default"}).Counter("temporal_request").Inc(1)
	out := scrape(t, m)
	require.Contains(t, out, `hookflow_events_accepted_total{endpoint_id="ep"} 1`)
	require.Contains(t, out, `temporal_request_total{namespace="default"} 1`)
	require.Contains(t, out, "go_goroutines")
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	return rec.Body.String()
}
