// Package metrics is hookflow's Prometheus instrumentation: delivery
// counters and latencies observed in-process, gauges read from Postgres on
// each scrape, and the Temporal SDK's own metrics, which its OpenTelemetry
// handler feeds into the same registry. Every metric lives in a registry the
// caller passes in; nothing is registered globally.
package metrics

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every hookflow metric.
const Namespace = "hookflow"

// Metrics holds hookflow's own instruments. A nil *Metrics is valid and
// records nothing, so components can take it as an optional dependency.
//
// Labels are bounded on purpose: endpoint_id (operators register endpoints;
// there are few) and outcome (a fixed set). Correlation IDs are never a
// label: they are unbounded; GET /v1/stats lists the lagging ones instead.
type Metrics struct {
	reg    *prometheus.Registry
	logger *slog.Logger

	accepted            *prometheus.CounterVec
	delivered           *prometheus.CounterVec
	deadLettered        *prometheus.CounterVec
	attempts            *prometheus.HistogramVec
	retries             *prometheus.CounterVec
	throttled           *prometheus.CounterVec
	consecutiveFailures *prometheus.GaugeVec
	cleaned             *prometheus.CounterVec
	cleanerRuns         *prometheus.CounterVec
	noticesDropped      *prometheus.CounterVec
}

// attemptBuckets are the attempt-latency histogram's bounds in seconds:
// from a local receiver's few milliseconds to the delivery timeout. Each
// call makes its own slice, so no registry can change another's.
func attemptBuckets() []float64 {
	return []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
}

// New registers hookflow's instruments, and the Go runtime and process
// collectors, in reg.
func New(reg *prometheus.Registry, logger *slog.Logger) (*Metrics, error) {
	if reg == nil || logger == nil {
		return nil, errors.New("metrics: registry and logger are required")
	}
	m := &Metrics{
		reg:    reg,
		logger: logger,
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_accepted_total",
			Help: "Events accepted by the API (202), by endpoint.",
		}, []string{"endpoint_id"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_delivered_total",
			Help: "Events delivered (receiver answered 2xx other than 202), by endpoint.",
		}, []string{"endpoint_id"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_dead_lettered_total",
			Help: "Events written to the dead-letter queue, by endpoint.",
		}, []string{"endpoint_id"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "delivery_attempt_duration_seconds",
			Help:    "Duration of each HTTP delivery attempt, by endpoint and outcome (delivered, retry, permanent, gone).",
			Buckets: attemptBuckets(),
		}, []string{"endpoint_id", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "delivery_retries_total",
			Help: "Delivery attempts that failed and will be retried, by endpoint.",
		}, []string{"endpoint_id"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "delivery_throttled_total",
			Help: "Delivery attempts the endpoint's rate limit held back for a later send slot, by endpoint, as seen by this process.",
		}, []string{"endpoint_id"}),
		cleaned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "cleaner_rows_total",
			Help: "Rows the cleaner pruned, by kind: payloads (emptied), attempts and keys (deleted).",
		}, []string{"kind"}),
		cleanerRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "cleaner_runs_total",
			Help: "Cleaner runs by this process, by result: done, skipped (another process held the lock), failed.",
		}, []string{"result"}),
		noticesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "operational_events_dropped_total",
			Help: "Operational events (hookflow.*) the ledger could not store, by type: the dead letter or breaker transition each reports was written without its notice.",
		}, []string{"type"}),
		consecutiveFailures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "endpoint_consecutive_failures",
			Help: "Failed attempts to the endpoint since its last success, as seen by this process.",
		}, []string{"endpoint_id"}),
	}
	for _, c := range []prometheus.Collector{
		m.accepted, m.delivered, m.deadLettered, m.attempts, m.retries, m.throttled, m.consecutiveFailures, m.cleaned, m.cleanerRuns, m.noticesDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Registry is the registry the instruments live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format. A failing
// collector is logged and the rest is still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{m.logger},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// EventAccepted counts an event the API accepted for endpointID.
func (m *Metrics) EventAccepted(endpointID string) {
	if m == nil {
		return
	}
	m.accepted.WithLabelValues(endpointID).Inc()
}

// Attempt records one HTTP delivery attempt: its latency, its outcome, and
// the endpoint's run of failures.
func (m *Metrics) Attempt(endpointID, outcome string, latency time.Duration, delivered bool) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(endpointID, outcome).Observe(latency.Seconds())
	if delivered {
		m.delivered.WithLabelValues(endpointID).Inc()
		m.consecutiveFailures.WithLabelValues(endpointID).Set(0)
		return
	}
	m.consecutiveFailures.WithLabelValues(endpointID).Inc()
}

// Retry counts a failed attempt that will be retried.
func (m *Metrics) Retry(endpointID string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(endpointID).Inc()
}

// Throttled counts an attempt to endpointID its rate limit held back. The
// durable count, shared by every worker, is the endpoint's stats'
// "throttled"; this is the process's share of it.
func (m *Metrics) Throttled(endpointID string) {
	if m == nil {
		return
	}
	m.throttled.WithLabelValues(endpointID).Inc()
}

// Cleaned counts rows the cleaner pruned.
func (m *Metrics) Cleaned(kind string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.cleaned.WithLabelValues(kind).Add(float64(n))
}

// CleanerRun counts a cleaner run by its result.
func (m *Metrics) CleanerRun(result string) {
	if m == nil {
		return
	}
	m.cleanerRuns.WithLabelValues(result).Inc()
}

// DeadLettered counts an event dead-lettered for endpointID.
func (m *Metrics) DeadLettered(endpointID string) {
	if m == nil {
		return
	}
	m.deadLettered.WithLabelValues(endpointID).Inc()
}

// ForgetEndpoint removes every series labelled with endpoint id (a
// deleted endpoint's): endpoint IDs are never reused, so without it each
// create-and-delete would leave its series behind for the life of the
// process.
func (m *Metrics) ForgetEndpoint(id string) {
	if m == nil {
		return
	}
	match := prometheus.Labels{"endpoint_id": id}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.accepted, m.delivered, m.deadLettered, m.attempts, m.retries, m.throttled, m.consecutiveFailures} {
		v.DeletePartialMatch(match)
	}
}

// NoticeDropped counts an operational event of eventType the ledger
// could not store (store.NoticeReport).
func (m *Metrics) NoticeDropped(eventType string) {
	if m == nil {
		return
	}
	m.noticesDropped.WithLabelValues(eventType).Inc()
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Warn("metrics collection", "error", v) }
