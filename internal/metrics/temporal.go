package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// TemporalHandler adapts the Temporal SDK's metrics (client.MetricsHandler)
// onto a Prometheus registry, standing in for go.temporal.io/sdk/contrib/tally
// (a separate module). The SDK names its metrics freely and tags them with
// varying key sets, so the handler is an unchecked collector: it keeps the
// values itself and, at scrape time, gives each metric family the union of
// the tag keys it has seen (missing ones empty). Timers become histograms
// in seconds.
type TemporalHandler struct {
	store *temporalStore
	tags  map[string]string
}

// NewTemporalHandler registers the adapter in reg and returns the handler
// to put in client.Options.MetricsHandler.
func NewTemporalHandler(reg *prometheus.Registry) (*TemporalHandler, error) {
	st := &temporalStore{series: map[string]*series{}}
	if err := reg.Register(st); err != nil {
		return nil, err
	}
	return &TemporalHandler{store: st, tags: map[string]string{}}, nil
}

var _ client.MetricsHandler = (*TemporalHandler)(nil)

// WithTags returns a handler whose metrics carry tags on top of h's.
func (h *TemporalHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	maps.Copy(merged, tags)
	return &TemporalHandler{store: h.store, tags: merged}
}

// Counter returns the counter name with h's tags.
func (h *TemporalHandler) Counter(name string) client.MetricsCounter {
	s := h.store.get(kindCounter, name, h.tags)
	return client.MetricsCounter(counterFunc(func(d int64) { s.add(float64(d)) }))
}

// Gauge returns the gauge name with h's tags.
func (h *TemporalHandler) Gauge(name string) client.MetricsGauge {
	s := h.store.get(kindGauge, name, h.tags)
	return gaugeFunc(s.set)
}

// Timer returns the timer name with h's tags, as a histogram in seconds.
func (h *TemporalHandler) Timer(name string) client.MetricsTimer {
	s := h.store.get(kindTimer, name, h.tags)
	return timerFunc(func(d time.Duration) { s.observe(d.Seconds()) })
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindTimer
)

// timerBuckets cover SDK latencies: poll round trips to long polls.
var timerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type series struct {
	kind   kind
	name   string
	labels map[string]string

	mu      sync.Mutex
	value   float64
	count   uint64
	sum     float64
	buckets []uint64
}

func (s *series) add(d float64) {
	s.mu.Lock()
	s.value += d
	s.mu.Unlock()
}

func (s *series) set(v float64) {
	s.mu.Lock()
	s.value = v
	s.mu.Unlock()
}

func (s *series) observe(v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	s.sum += v
	for i, b := range timerBuckets {
		if v <= b {
			s.buckets[i]++
		}
	}
}

type temporalStore struct {
	mu     sync.Mutex
	series map[string]*series
}

func (t *temporalStore) get(k kind, name string, tags map[string]string) *series {
	keys := slices.Sorted(maps.Keys(tags))
	var id strings.Builder
	id.WriteString(name)
	for _, k := range keys {
		id.WriteString("\xff" + k + "=" + tags[k])
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.series[id.String()]; ok {
		return s
	}
	s := &series{kind: k, name: name, labels: maps.Clone(tags)}
	if k == kindTimer {
		s.buckets = make([]uint64, len(timerBuckets))
	}
	t.series[id.String()] = s
	return s
}

// Describe sends nothing: the collector is unchecked, its metric set grows
// as the SDK emits.
func (t *temporalStore) Describe(chan<- *prometheus.Desc) {}

func (t *temporalStore) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	all := slices.Collect(maps.Values(t.series))
	t.mu.Unlock()

	// Union of label keys per family, and one kind per family (the first
	// seen wins should the SDK ever reuse a name).
	type family struct {
		kind kind
		keys map[string]bool
	}
	fams := map[string]*family{}
	for _, s := range all {
		f := fams[s.name]
		if f == nil {
			f = &family{kind: s.kind, keys: map[string]bool{}}
			fams[s.name] = f
		}
		for k := range s.labels {
			f.keys[k] = true
		}
	}
	for _, s := range all {
		f := fams[s.name]
		if f.kind != s.kind {
			continue
		}
		keys := slices.Sorted(maps.Keys(f.keys))
		names := make([]string, len(keys))
		values := make([]string, len(keys))
		for i, k := range keys {
			names[i] = sanitize(k)
			values[i] = s.labels[k]
		}
		fq := "temporal_" + sanitize(strings.TrimPrefix(s.name, "temporal_"))
		s.mu.Lock()
		var m prometheus.Metric
		var err error
		switch s.kind {
		case kindCounter:
			m, err = prometheus.NewConstMetric(prometheus.NewDesc(fq+"_total", "Temporal SDK counter "+s.name+".", names, nil), prometheus.CounterValue, s.value, values...)
		case kindGauge:
			m, err = prometheus.NewConstMetric(prometheus.NewDesc(fq, "Temporal SDK gauge "+s.name+".", names, nil), prometheus.GaugeValue, s.value, values...)
		case kindTimer:
			b := make(map[float64]uint64, len(timerBuckets))
			for i, ub := range timerBuckets {
				b[ub] = s.buckets[i]
			}
			m, err = prometheus.NewConstHistogram(prometheus.NewDesc(fq+"_seconds", "Temporal SDK timer "+s.name+".", names, nil), s.count, s.sum, b, values...)
		}
		s.mu.Unlock()
		if err == nil {
			ch <- m
		}
	}
}

// sanitize makes s a valid Prometheus metric or label name.
func sanitize(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
