package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/temporaltest"
	"github.com/hookflow/hookflow/schema"
)

// setupObserved is setup with one metrics registry shared by the API, the
// workers and the Temporal client, as `hookflow dev` serves it.
func setupObserved(t *testing.T, window time.Duration) *bundle {
	t.Helper()
	tmp := temporaltest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := testenv.Logger(t)
	cfg := config.Config{
		DatabaseURL: testenv.NewDatabase(t), TemporalAddress: tmp.Address(), TemporalNamespace: temporaltest.Namespace,
		TaskQueue: testenv.TaskQueue(t), APIAddr: "127.0.0.1:0", APIToken: "test-token-" + randHex(16),
		RecoveryWindow: window, DeliveryTimeout: 5 * time.Second, MaxBodyBytes: 64 << 10, AllowPrivate: true,
		MetricsAddr: "127.0.0.1:0",
	}
	pool, err := app.ConnectPostgres(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
	pool.Close()
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	m, err := app.NewMetrics(logger)
	require.NoError(t, err)
	c, err := app.TemporalClient(ctx, cfg, logger, app.WithMetrics(m))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	b := &bundle{t: t, cfg: cfg, store: st.Tenant(contract.DefaultTenant), client: c, prefix: randHex(4)}
	w, err := app.StartWorker(cfg, st, c, logger, app.WithMetrics(m))
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	ready := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.ServeAPI(ctx, cfg, st, c, logger, app.WithMetrics(m), app.OnReady(func(a app.Addrs) { ready <- a }))
	}()
	select {
	case a := <-ready:
		b.apiURL, b.metricsURL = "http://"+a.API, "http://"+a.Metrics
	case err := <-done:
		t.Fatalf("api did not start: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return b
}

// scrape reads GET /metrics on the metrics listener (no token) as metric
// families; the API's own port has no /metrics.
func (b *bundle) scrape() map[string]*dto.MetricFamily {
	b.t.Helper()
	resp, err := http.Get(b.apiURL + "/metrics")
	require.NoError(b.t, err)
	resp.Body.Close()
	require.Equal(b.t, http.StatusNotFound, resp.StatusCode, "no /metrics on the API's port")
	resp, err = http.Get(b.metricsURL + "/metrics")
	require.NoError(b.t, err)
	defer resp.Body.Close()
	require.Equal(b.t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(b.t, err)
	return fams
}

// sample is the value of the series of family name whose labels include
// want; ok=false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestOpsMetricsAndStats delivers one event and dead-letters another that
// holds a successor, then checks /metrics and /v1/stats tell exactly that.
func TestOpsMetricsAndStats(t *testing.T) {
	t.Parallel()
	b := setupObserved(t, 3*time.Second)
	rcv := newLedgerReceiver(t)
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	okCorr, dlCorr := b.id("ok"), b.id("stuck")
	rcv.fault = func(ev contract.Envelope, _ int) string {
		if ev.CorrelationID == dlCorr && ev.Sequence == 1 {
			return "400"
		}
		return ""
	}
	byEP := map[string]string{"endpoint_id": ep.ID}

	before, _ := sample(b.scrape(), "hookflow_events_delivered_total", byEP)
	code, _ := b.postEvent(okCorr+"-1", okCorr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(okCorr+"-1", contract.StateDelivered, 30*time.Second)

	fams := b.scrape()
	delivered, ok := sample(fams, "hookflow_events_delivered_total", byEP)
	require.True(t, ok, "delivered counter for %s", ep.ID)
	require.Equal(t, before+1, delivered)
	n, ok := sample(fams, "hookflow_delivery_attempt_duration_seconds", map[string]string{"endpoint_id": ep.ID, "outcome": "delivered"})
	require.True(t, ok, "attempt histogram")
	require.GreaterOrEqual(t, n, 1.0)
	accepted, _ := sample(fams, "hookflow_events_accepted_total", byEP)
	require.Equal(t, 1.0, accepted)
	sdk := 0
	for name := range fams {
		if len(name) > 9 && name[:9] == "temporal_" {
			sdk++
		}
	}
	require.Positive(t, sdk, "Temporal SDK metrics are exported")

	// Sequence 1 of dlCorr is rejected for good; 2 waits behind it.
	for s := int64(1); s <= 2; s++ {
		code, _ := b.postEvent(fmt.Sprintf("%s-%d", dlCorr, s), dlCorr, s, ep.ID, map[string]any{"n": s})
		require.Equal(t, http.StatusAccepted, code)
	}
	b.waitState(dlCorr+"-1", contract.StateDeadLettered, 30*time.Second)
	b.waitState(dlCorr+"-2", contract.StateWaiting, 30*time.Second)

	var st client.Stats
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats", nil, &st))
	require.EqualValues(t, 0, st.Queued)
	require.EqualValues(t, 1, st.InFlight, "%+v", st)
	require.EqualValues(t, 1, st.DeliveredLast5M)
	require.EqualValues(t, 1, st.DeadLettersOpen)
	require.Greater(t, st.OldestLagSeconds, 0.0)
	require.EqualValues(t, 1, st.BlockedCorrelations.Count)
	require.Len(t, st.BlockedCorrelations.Top, 1)
	top := st.BlockedCorrelations.Top[0]
	require.Equal(t, dlCorr, top.CorrelationID)
	require.EqualValues(t, 1, top.NextSequence)
	require.Equal(t, string(contract.StateDeadLettered), string(top.BlockedBy))
	require.Equal(t, dlCorr+"-1", top.BlockingEventID)
	require.EqualValues(t, 1, top.Parked)
	require.Greater(t, top.AgeSeconds, 0.0)

	fams = b.scrape()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"hookflow_dead_letters_open", nil, 1},
		{"hookflow_events_in_flight", nil, 1},
		{"hookflow_events_dead_lettered_total", byEP, 1},
		{"hookflow_endpoint_consecutive_failures", byEP, 1},
		{"hookflow_delivery_attempt_duration_seconds", map[string]string{"endpoint_id": ep.ID, "outcome": "permanent"}, 1},
	} {
		got, ok := sample(fams, c.name, c.labels)
		require.True(t, ok, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	lag, ok := sample(fams, "hookflow_oldest_undelivered_age_seconds", nil)
	require.True(t, ok)
	require.Greater(t, lag, 0.0)

	// The /v1/stats route needs the token like the rest of /v1.
	resp, err := http.Get(b.apiURL + "/v1/stats")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
