package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookflow/hookflow/internal/store"
)

// StatsSource reads the ledger's summary; *store.Store is one.
type StatsSource interface {
	StatsSummary(ctx context.Context) (store.Summary, error)
}

// storeCollector reads gauges from Postgres at scrape time, so every API
// replica reports the same truth and nothing drifts between scrapes.
type storeCollector struct {
	src     StatsSource
	logger  *slog.Logger
	timeout time.Duration

	queued, inFlight, deadLetters, oldestLag, up *prometheus.Desc
	// Per endpoint, from the same summary: endpoints are few, and an
	// endpoint with nothing pending and no open dead letter has no series
	// (it reads as absent, not 0).
	endpointDeliveries, endpointDeadLetters, endpointOldestLag *prometheus.Desc
}

// RegisterStore adds the Postgres-backed gauges (queue depth, events in
// flight, open dead letters, age of the oldest undelivered event, and the
// last three per endpoint) to reg.
// One query per scrape; register it in one process kind (the API), not in
// every worker.
func RegisterStore(reg *prometheus.Registry, src StatsSource, logger *slog.Logger) error {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return reg.Register(&storeCollector{
		src: src, logger: logger, timeout: 5 * time.Second,
		queued:      d("events_queued", "Events accepted whose workflow is not started yet."),
		inFlight:    d("events_in_flight", "Events waiting for their turn or being delivered."),
		deadLetters: d("dead_letters_open", "Dead letters waiting for an operator."),
		oldestLag:   d("oldest_undelivered_age_seconds", "Age of the oldest event not delivered or skipped yet (0 when none)."),
		up:          d("store_up", "1 when the last scrape could read the ledger, 0 when it could not."),
		endpointDeliveries: d("endpoint_deliveries", "Deliveries to the endpoint not finished, by state (waiting, delivering).",
			"endpoint_id", "state"),
		endpointDeadLetters: d("endpoint_dead_letters_open", "Dead letters of the endpoint waiting for an operator.", "endpoint_id"),
		endpointOldestLag: d("endpoint_oldest_undelivered_age_seconds",
			"Age of the oldest event with a delivery to the endpoint not delivered or skipped (0 when none).", "endpoint_id"),
	})
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.inFlight, c.deadLetters, c.oldestLag, c.up,
		c.endpointDeliveries, c.endpointDeadLetters, c.endpointOldestLag} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := c.src.StatsSummary(ctx)
	if err != nil {
		// A scrape must not fail as a whole because Postgres is slow: the
		// gauges are left out and store_up says why.
		c.logger.Warn("metrics: read ledger summary", "error", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.deadLetters, prometheus.GaugeValue, float64(s.DeadLettersOpen))
	ch <- prometheus.MustNewConstMetric(c.oldestLag, prometheus.GaugeValue, s.OldestLagSeconds)
	for _, e := range s.ByEndpoint {
		ch <- prometheus.MustNewConstMetric(c.endpointDeliveries, prometheus.GaugeValue, float64(e.Waiting), e.EndpointID, "waiting")
		ch <- prometheus.MustNewConstMetric(c.endpointDeliveries, prometheus.GaugeValue, float64(e.Delivering), e.EndpointID, "delivering")
		ch <- prometheus.MustNewConstMetric(c.endpointDeadLetters, prometheus.GaugeValue, float64(e.DeadLettersOpen), e.EndpointID)
		ch <- prometheus.MustNewConstMetric(c.endpointOldestLag, prometheus.GaugeValue, e.LagSeconds, e.EndpointID)
	}
}
