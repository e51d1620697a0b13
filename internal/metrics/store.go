package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookflow/hookflow/internal/store"
)

// StatsSource reads the ledger's summary and the tenants' ranking; the
// unscoped *store.Store is one.
type StatsSource interface {
	StatsSummary(ctx context.Context) (store.Summary, error)
	StatsTenants(ctx context.Context, offset, limit int) ([]store.TenantSummary, int64, error)
}

// TenantSeries is how many tenants have series of their own: the worst,
// as GET /v1/stats/tenants ranks them. Tenants are as many as a SaaS has
// customers, so a label per tenant would grow without bound; the rest
// are summed under OtherTenant, and a tenant that leaves the top loses
// its series at the next scrape (they are read at scrape time).
const TenantSeries = 10

// OtherTenant is the tenant_id label of what the tenants outside the top
// TenantSeries hold. It cannot be a tenant's ID (parentheses are outside
// the ID's character set).
const OtherTenant = "(other)"

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
	// Per tenant, for the TenantSeries worst only (and OtherTenant).
	tenantDeadLetters, tenantPending, tenantOldestLag *prometheus.Desc
}

// RegisterStore adds the Postgres-backed gauges (queue depth, events in
// flight, open dead letters, age of the oldest undelivered event, and the
// last three per endpoint and per worst tenant) to reg.
// Two queries per scrape; register it in one process kind (the API), not in
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
		tenantDeadLetters: d("tenant_dead_letters_open", "Dead letters of the tenant waiting for an operator: the worst tenants' own, the others' summed under tenant_id=\"(other)\".", "tenant_id"),
		tenantPending:     d("tenant_deliveries_pending", "Deliveries of the tenant not finished (waiting or delivering): the worst tenants' own, the others' summed under tenant_id=\"(other)\".", "tenant_id"),
		tenantOldestLag:   d("tenant_oldest_undelivered_age_seconds", "Age of the tenant's oldest event with a delivery not delivered or skipped, for the worst tenants.", "tenant_id"),
	})
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.inFlight, c.deadLetters, c.oldestLag, c.up,
		c.endpointDeliveries, c.endpointDeadLetters, c.endpointOldestLag, c.tenantDeadLetters, c.tenantPending, c.tenantOldestLag} {
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
	c.collectTenants(ctx, ch, s)
}

// collectTenants emits the worst tenants' series, and the rest of the
// summary's totals under OtherTenant. A failed read leaves them out (the
// summary's gauges stand) and is logged.
func (c *storeCollector) collectTenants(ctx context.Context, ch chan<- prometheus.Metric, s store.Summary) {
	worst, _, err := c.src.StatsTenants(ctx, 0, TenantSeries)
	if err != nil {
		c.logger.Warn("metrics: rank tenants", "error", err)
		return
	}
	otherDead, otherPending := s.DeadLettersOpen, int64(0)
	for _, e := range s.ByEndpoint {
		otherPending += e.Waiting + e.Delivering
	}
	for _, t := range worst {
		ch <- prometheus.MustNewConstMetric(c.tenantDeadLetters, prometheus.GaugeValue, float64(t.DeadLettersOpen), t.TenantID)
		ch <- prometheus.MustNewConstMetric(c.tenantPending, prometheus.GaugeValue, float64(t.Waiting+t.Delivering), t.TenantID)
		ch <- prometheus.MustNewConstMetric(c.tenantOldestLag, prometheus.GaugeValue, t.OldestLagSeconds, t.TenantID)
		otherDead -= t.DeadLettersOpen
		otherPending -= t.Waiting + t.Delivering
	}
	// The two reads are not one snapshot: a delivery finished between them
	// must not make the rest negative.
	ch <- prometheus.MustNewConstMetric(c.tenantDeadLetters, prometheus.GaugeValue, float64(max(otherDead, 0)), OtherTenant)
	ch <- prometheus.MustNewConstMetric(c.tenantPending, prometheus.GaugeValue, float64(max(otherPending, 0)), OtherTenant)
}
