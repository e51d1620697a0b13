package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/internal/contract"
)

// The slow-receiver measurement's shape (each lane must hand over on its
// own, so a slow receiver paces only its own lanes): the fan-out
// scenario's three endpoints take every event (fan-out 3), over
// slowCorrelations lanes each; in the second run one of them answers every
// request slowDelay late. Small enough to run in a few minutes: the slow
// lane drains slowEvents/slowCorrelations events a lane at slowDelay each.
const (
	slowDelay        = 10 * time.Second
	slowEvents       = 150
	slowCorrelations = 30
	// slowTimeout is the slow endpoint's timeout during the run: above its
	// delay, so that its answers are successes, as a tarpit's are.
	slowTimeout = "20s"
)

// SlowReceiverReport is hookflow bench --slow-receiver: does a receiver that
// answers every request 10 s late slow the other lanes of the events it
// shares?
type SlowReceiverReport struct {
	StartedAt    time.Time `json:"started_at"`
	Machine      Machine   `json:"machine"`
	Seconds      float64   `json:"seconds"`
	Events       int       `json:"events"`
	Correlations int       `json:"correlations"`
	DelaySeconds float64   `json:"delay_seconds"`
	// AllFast is the two fast endpoints' lanes in the run where the third
	// is fast too; BesideSlow the same lanes in the run where it answers
	// DelaySeconds late.
	AllFast    FastLanes `json:"all_fast"`
	BesideSlow FastLanes `json:"beside_slow"`
	// Ratio is BesideSlow's deliveries a second over AllFast's: 1 when the
	// slow lane holds nothing back.
	Ratio float64 `json:"ratio"`
	// SlowDelivered is what the slow endpoint's receiver committed of the
	// run's events, SlowSeconds how long from the first post it took, and
	// SlowPeakInFlight the most requests it held at once.
	SlowDelivered    int     `json:"slow_delivered"`
	SlowSeconds      float64 `json:"slow_seconds"`
	SlowPeakInFlight int64   `json:"slow_peak_in_flight"`
	// OrderViolations counts, over the three receivers' ledgers, the
	// entries whose sequence is not the previous one of its correlation
	// plus one.
	OrderViolations int `json:"order_violations"`
}

// FastLanes is the fast endpoints' deliveries of one run: how many, and
// over how long from the first post to their last commit.
type FastLanes struct {
	Deliveries int     `json:"deliveries"`
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"per_sec"`
}

// SlowReceiver starts a stack and measures the fan-out scenario's two fast
// endpoints' lanes beside a third that is fast, then beside the same third
// answering slowDelay late (through a proxy the bench serves in front of
// its receiver).
func SlowReceiver(ctx context.Context, cfg Config, logger *slog.Logger) (*SlowReceiverReport, error) {
	// Listening before the stack starts gives the API's and the workers'
	// allowlist the proxy's real address.
	proxy, err := listenSlowProxy(slowDelay)
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	cfg.ownReceivers = append(cfg.ownReceivers, proxy.ln.Addr().String())
	var rep *SlowReceiverReport
	err = onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &SlowReceiverReport{StartedAt: r.p.began.UTC(), Machine: m, Events: slowEvents, Correlations: slowCorrelations,
			DelaySeconds: slowDelay.Seconds()}
		if err := r.slowReceiver(ctx, rep, proxy); err != nil {
			return err
		}
		rep.Machine.LoadAvgEnd = loadAvg()
		rep.Seconds = time.Since(r.p.began).Seconds()
		return nil
	})
	return rep, err
}

func (r *runner) slowReceiver(ctx context.Context, rep *SlowReceiverReport, proxy *slowProxy) error {
	slow := r.s.fanOut[2]
	fast := []*pgxpool.Pool{r.s.fanOut[0].db, r.s.fanOut[1].db}
	sc := &scenario{name: "slow-receiver", short: "slow", kind: kindHookflow, wfType: contract.EventWorkflow, evType: fanOutEventType, routed: true,
		sinks: r.s.fanDBs(), corr: func(n int) string { return fmt.Sprintf("%s-slow-%03d", r.tag, n%slowCorrelations) }}
	r.p.logf("warm-up: one event a lane, fan-out %d", fanOutEndpoints)
	if _, err := r.burst(ctx, sc, "w", slowCorrelations); err != nil {
		return err
	}
	var err error
	if rep.AllFast, _, err = r.slowRun(ctx, sc, "fast", fast, nil); err != nil {
		return err
	}
	r.p.logf("three fast endpoints: the first two's lanes %d deliveries in %.1f s = %.1f/s", rep.AllFast.Deliveries, rep.AllFast.Seconds, rep.AllFast.PerSec)

	if err := proxy.start("http://" + slow.addr); err != nil {
		return err
	}
	if err := r.patchEndpoint(ctx, slow.endpointID, map[string]any{"url": proxy.url(), "timeout": slowTimeout}); err != nil {
		return err
	}
	var slowLane FastLanes
	rep.BesideSlow, slowLane, err = r.slowRun(ctx, sc, "beside", fast, slow.db)
	if err != nil {
		return err
	}
	rep.SlowDelivered, rep.SlowSeconds = slowLane.Deliveries, slowLane.Seconds
	rep.SlowPeakInFlight = proxy.peak.Load()
	r.p.logf("beside one answering %s late: the fast lanes %d deliveries in %.1f s = %.1f/s; the slow lane %d in %.1f s, at most %d requests at once",
		slowDelay, rep.BesideSlow.Deliveries, rep.BesideSlow.Seconds, rep.BesideSlow.PerSec, rep.SlowDelivered, rep.SlowSeconds, rep.SlowPeakInFlight)
	rep.Ratio = ratio(rep.BesideSlow.PerSec, rep.AllFast.PerSec)
	if err := r.patchEndpoint(ctx, slow.endpointID, map[string]any{"url": "http://" + slow.addr + "/webhook", "timeout": nil}); err != nil {
		return err
	}
	for _, db := range r.s.fanDBs() {
		n, err := r.orderViolations(ctx, db)
		if err != nil {
			return err
		}
		rep.OrderViolations += n
	}
	return nil
}

// slowRun posts slowEvents events of sc at once, waits for the fast sinks
// to commit them all and reads their deliveries a second from the first
// post to their last commit; with slowSink, it then waits for that one to
// commit them all too and reads it the same way.
func (r *runner) slowRun(ctx context.Context, sc *scenario, part string, fast []*pgxpool.Pool, slowSink *pgxpool.Pool) (FastLanes, FastLanes, error) {
	var fastRes, slowRes FastLanes
	specs := make([]eventSpec, slowEvents)
	for i := range specs {
		specs[i] = r.spec(sc, part)
	}
	prefix := fmt.Sprintf("%s-%s-%s-", r.tag, sc.short, part)
	start := time.Now()
	posted, err := r.postAll(ctx, sc, specs)
	if err != nil {
		return fastRes, slowRes, err
	}
	fastSc := &scenario{name: sc.name + " (fast lanes)", short: sc.short, sinks: fast}
	if _, err := r.drain(ctx, fastSc, prefix, posted); err != nil {
		return fastRes, slowRes, err
	}
	if fastRes, err = r.laneRate(ctx, fastSc, prefix, start); err != nil {
		return fastRes, slowRes, err
	}
	if slowSink != nil {
		slowSc := &scenario{name: sc.name + " (slow lane)", short: sc.short, sinks: []*pgxpool.Pool{slowSink}}
		if _, err := r.drain(ctx, slowSc, prefix, posted); err != nil {
			return fastRes, slowRes, err
		}
		if slowRes, err = r.laneRate(ctx, slowSc, prefix, start); err != nil {
			return fastRes, slowRes, err
		}
	}
	// The events' workflows end before the next run, so that it starts
	// from the same idle stack.
	if _, err := r.drain(ctx, sc, prefix, posted); err != nil {
		return fastRes, slowRes, err
	}
	return fastRes, slowRes, r.waitClosed(ctx, sc.wfType, 2*time.Minute)
}

// laneRate is sc's sinks' commits of the prefix, over the time from start
// to the last of them.
func (r *runner) laneRate(ctx context.Context, sc *scenario, prefix string, start time.Time) (FastLanes, error) {
	applied, err := r.appliedTimes(ctx, sc, prefix)
	if err != nil {
		return FastLanes{}, err
	}
	var times []time.Time
	for _, sink := range applied {
		for _, at := range sink {
			times = append(times, at)
		}
	}
	return lanesOver(times, start), nil
}

// lanesOver is the deliveries at times, over the span from start to the
// last of them.
func lanesOver(times []time.Time, start time.Time) FastLanes {
	res := FastLanes{Deliveries: len(times)}
	if len(times) == 0 {
		return res
	}
	last := slices.MaxFunc(times, time.Time.Compare)
	res.Seconds = last.Sub(start).Seconds()
	if res.Seconds > 0 {
		res.PerSec = float64(res.Deliveries) / res.Seconds
	}
	return res
}

// slowProxy answers every request delay late: it waits, then passes the
// request to the receiver behind it as it came (the signature holds), and
// its answer back. It counts the requests it holds at once.
type slowProxy struct {
	ln       net.Listener
	srv      *http.Server
	delay    time.Duration
	proxy    *httputil.ReverseProxy
	inFlight atomic.Int64
	peak     atomic.Int64
}

// listenSlowProxy listens for the proxy; start serves it.
func listenSlowProxy(delay time.Duration) (*slowProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("slow proxy: %w", err)
	}
	p := &slowProxy{ln: ln, delay: delay}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	return p, nil
}

// start serves the proxy in front of the receiver at target.
func (p *slowProxy) start(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("slow proxy target: %w", err)
	}
	p.proxy = httputil.NewSingleHostReverseProxy(u)
	// Serve ends with the proxy's close; a failure before shows as the
	// slow lane's missing deliveries.
	go func() { _ = p.srv.Serve(p.ln) }()
	return nil
}

func (p *slowProxy) url() string { return "http://" + p.ln.Addr().String() + "/webhook" }

func (p *slowProxy) close() { _ = p.srv.Close() }

// ServeHTTP holds the request delay, then passes it on.
func (p *slowProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		peak := p.peak.Load()
		if n <= peak || p.peak.CompareAndSwap(peak, n) {
			break
		}
	}
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-req.Context().Done():
		return
	case <-t.C:
	}
	p.proxy.ServeHTTP(w, req)
}

// WriteJSON writes the report to path.
func (rep *SlowReceiverReport) WriteJSON(path string) error {
	return writeJSON(path, "slow receiver report", rep)
}

// WriteTable prints the figures and the summary line.
func (rep *SlowReceiverReport) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "hookflow bench --slow-receiver: fan-out %d over %d lanes, %d events a run; one endpoint answering %.0f s late beside two fast ones, against three fast ones\n",
		fanOutEndpoints, rep.Correlations, rep.Events, rep.DelaySeconds)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, %s, load average %s at start, %s at end; %.0f s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)
	fmt.Fprintf(w, "three fast endpoints:    the first two's lanes %d deliveries in %.1f s = %.1f/s\n", rep.AllFast.Deliveries, rep.AllFast.Seconds, rep.AllFast.PerSec)
	fmt.Fprintf(w, "beside one %.0f s late:   the same lanes %d deliveries in %.1f s = %.1f/s\n", rep.DelaySeconds, rep.BesideSlow.Deliveries, rep.BesideSlow.Seconds, rep.BesideSlow.PerSec)
	fmt.Fprintf(w, "the slow lane:           %d deliveries in %.1f s, at most %d requests at once\n\n", rep.SlowDelivered, rep.SlowSeconds, rep.SlowPeakInFlight)
	_, err := fmt.Fprintf(w, "slow_receiver fast_lanes=%.1f/s all_fast=%.1f/s ratio=%.2f slow_delivered=%d/%d slow_seconds=%.1f slow_peak_in_flight=%d order_violations=%d\n",
		rep.BesideSlow.PerSec, rep.AllFast.PerSec, rep.Ratio, rep.SlowDelivered, rep.Events, rep.SlowSeconds, rep.SlowPeakInFlight, rep.OrderViolations)
	return err
}
