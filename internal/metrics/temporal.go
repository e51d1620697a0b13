package metrics

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// timerBuckets are the bounds in seconds of the Temporal SDK's timers
// (temporal_*_seconds histograms): poll round trips to long polls. Each
// call makes its own slice.
func timerBuckets() []float64 {
	return []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
}

// NewTemporalHandler returns the Temporal SDK's own OpenTelemetry metrics
// handler, to put in client.Options.MetricsHandler, read by OpenTelemetry's
// Prometheus exporter registered in reg. The SDK's names come out in
// Prometheus' conventions: counters end in _total, timers are histograms in
// seconds ending in _seconds. A metric the meter refuses is logged and
// dropped, never a panic in a worker.
//
// Register it once per registry: a second one would report the same series.
func NewTemporalHandler(reg prometheus.Registerer, logger *slog.Logger) (client.MetricsHandler, error) {
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// The series carry the SDK's tags and nothing else: no
		// otel_scope_* labels, no target_info family.
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal metrics exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		// The resource is not exported (no target_info); an empty one
		// spares parsing OTEL_RESOURCE_ATTRIBUTES here.
		sdkmetric.WithResource(resource.Empty()),
		// OpenTelemetry's default buckets are meant for milliseconds.
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: timerBuckets()}},
		)),
	)
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                mp.Meter("go.temporal.io/sdk"),
		UseMonotonicCounters: true,
		OnError:              func(err error) { logger.Warn("temporal sdk metric dropped", "error", err) },
	}), nil
}
