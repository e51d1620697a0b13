package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/internal/contract"
)

// The rate-limit measurement's shape: two endpoints
// with rateLimitCorrelations lanes each, one limited to rateLimitTarget
// deliveries a second. The limited one's rate is read over
// rateLimitWindow of its receiver's commits, after rateLimitSkip of them
// (the lanes' first attempts, which find the limiter idle) and with
// rateLimitTail to spare, so the window never sees the last lanes drain.
// The window never begins before every event is posted either: the posts
// take seconds on a busy machine, and the lanes are not all busy before.
const (
	rateLimitTarget       = 5.0
	rateLimitCorrelations = 20
	rateLimitSkip         = 5 * time.Second
	rateLimitWindow       = 60 * time.Second
	rateLimitTail         = 20 * time.Second
	// rateLimitUnlimitedEvents is the unlimited endpoint's burst, alone
	// and beside the limited one: 30 events a lane.
	rateLimitUnlimitedEvents = 600
	// rateLimitSteady is the unlimited endpoint's steady load, posted one
	// event every 1/rateLimitSteady s for rateLimitSteadyFor, alone and
	// beside the limited one: under what this machine delivers at all, so
	// that whether the limited endpoint slows it is the question, not the
	// share of a saturated machine that a burst measures.
	rateLimitSteady    = 4.0
	rateLimitSteadyFor = 60 * time.Second
)

// RateLimitReport is hookflow bench --rate-limit: does an endpoint's rate
// limit hold its rate, keep each lane in order, and leave the other
// endpoints as fast as they are without it?
type RateLimitReport struct {
	StartedAt    time.Time `json:"started_at"`
	Machine      Machine   `json:"machine"`
	Seconds      float64   `json:"seconds"`
	Correlations int       `json:"correlations"`
	// Target is the limited endpoint's rate_limit, deliveries a second.
	Target float64 `json:"target"`
	// LimitedEvents were posted to the limited endpoint at once, enough to
	// keep it busy through the window; LimitedDelivered of them reached
	// its receiver.
	LimitedEvents    int `json:"limited_events"`
	LimitedDelivered int `json:"limited_delivered"`
	// LimitedRate is the receiver's commits a second over WindowSeconds,
	// from rateLimitSkip after its first commit; OffPercent its distance
	// from Target.
	LimitedRate float64 `json:"limited_rate"`
	// LimitedAlone is the same rate in a run of the limited endpoint alone
	// before: the limiter's own accuracy, without the other's load.
	LimitedAlone  float64 `json:"limited_alone_rate"`
	WindowSeconds float64 `json:"window_seconds"`
	OffPercent    float64 `json:"off_percent"`
	// Throttled is the limited endpoint's "throttled" from GET
	// /v1/endpoints/{id}/stats at the end.
	Throttled int64 `json:"throttled"`
	// OrderViolations counts, over both receivers' ledgers, the entries
	// whose sequence is not the previous one of its correlation plus one.
	OrderViolations int `json:"order_violations"`
	// The unlimited endpoint's burst: alone before the limited one starts,
	// beside it while it is throttled, and alone again after it drained.
	UnlimitedEvents int     `json:"unlimited_events"`
	AloneBefore     float64 `json:"alone_before_per_sec"`
	Beside          float64 `json:"beside_per_sec"`
	AloneAfter      float64 `json:"alone_after_per_sec"`
	// The unlimited endpoint at a steady rateLimitSteady a second, alone
	// and beside a third run of the limited one (LimitedBesideSteady): its
	// commits a second and the p50 and p99 from each event's post to its
	// receiver's commit.
	SteadyAlone         SteadyResult `json:"steady_alone"`
	SteadyBeside        SteadyResult `json:"steady_beside"`
	LimitedBesideSteady float64      `json:"limited_beside_steady_rate"`
}

// SteadyResult is one steady load: posted, delivered, the commits a second
// and the post-to-commit latency.
type SteadyResult struct {
	Posted    int     `json:"posted"`
	Delivered int     `json:"delivered"`
	Rate      float64 `json:"per_sec"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
}

// RateLimit starts a stack and measures an endpoint's rate limit: the first
// two fan-out receivers' endpoints become the limited one (rate_limit
// rateLimitTarget) and the unlimited one, each fed rateLimitCorrelations
// lanes.
func RateLimit(ctx context.Context, cfg Config, logger *slog.Logger) (*RateLimitReport, error) {
	var rep *RateLimitReport
	err := onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &RateLimitReport{StartedAt: r.p.began.UTC(), Machine: m, Correlations: rateLimitCorrelations, Target: rateLimitTarget,
			UnlimitedEvents: rateLimitUnlimitedEvents}
		if err := r.rateLimit(ctx, rep); err != nil {
			return err
		}
		rep.Machine.LoadAvgEnd = loadAvg()
		rep.Seconds = time.Since(r.p.began).Seconds()
		return nil
	})
	return rep, err
}

func (r *runner) rateLimit(ctx context.Context, rep *RateLimitReport) error {
	limited, unlimited := r.s.fanOut[0], r.s.fanOut[1]
	lane := func(short string) func(int) string {
		return func(n int) string { return fmt.Sprintf("%s-%s-%02d", r.tag, short, n%rateLimitCorrelations) }
	}
	lim := &scenario{name: "rate-limited", short: "lim", kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType,
		sinks: []*pgxpool.Pool{limited.db}, endpoint: limited.endpointID, corr: lane("lim")}
	unl := &scenario{name: "unlimited", short: "unl", kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType,
		sinks: []*pgxpool.Pool{unlimited.db}, endpoint: unlimited.endpointID, corr: lane("unl")}
	if err := r.patchEndpoint(ctx, limited.endpointID, map[string]any{"rate_limit": rateLimitTarget}); err != nil {
		return err
	}

	r.p.logf("warm-up: one event a lane to each endpoint")
	for _, sc := range []*scenario{unl, lim} {
		if _, err := r.burst(ctx, sc, "w", rateLimitCorrelations); err != nil {
			return err
		}
	}
	alone, err := r.burst(ctx, unl, "alone1", rateLimitUnlimitedEvents)
	if err != nil {
		return err
	}
	rep.AloneBefore = alone.EventsPerSec
	r.p.logf("unlimited alone: %d/%d delivered at %.1f/s", alone.Delivered, alone.Events, alone.EventsPerSec)

	// The limited endpoint alone, then with the unlimited burst beside it.
	limAlone, err := r.limitedRun(ctx, lim, "alone", nil)
	if err != nil {
		return err
	}
	rep.LimitedAlone = limAlone.rate
	r.p.logf("limited alone: %d/%d delivered, %.2f/s over %.1f s", limAlone.delivered, limAlone.posted, limAlone.rate, limAlone.span)
	run, err := r.limitedRun(ctx, lim, "run", func() error {
		unl.overlaps = true
		defer func() { unl.overlaps = false }()
		beside, err := r.burst(ctx, unl, "beside", rateLimitUnlimitedEvents)
		rep.Beside = beside.EventsPerSec
		r.p.logf("unlimited beside the limited one: %d/%d delivered at %.1f/s", beside.Delivered, beside.Events, beside.EventsPerSec)
		return err
	})
	if err != nil {
		return err
	}
	rep.LimitedEvents, rep.LimitedDelivered = run.posted, run.delivered
	rep.LimitedRate, rep.WindowSeconds = run.rate, run.span
	rep.OffPercent = 100 * math.Abs(rep.LimitedRate-rateLimitTarget) / rateLimitTarget
	after, err := r.burst(ctx, unl, "after", rateLimitUnlimitedEvents)
	if err != nil {
		return err
	}
	rep.AloneAfter = after.EventsPerSec
	r.p.logf("unlimited alone again: %d/%d delivered at %.1f/s", after.Delivered, after.Events, after.EventsPerSec)

	// The unlimited endpoint at a steady load under the machine's capacity,
	// alone, then beside the limited one.
	if rep.SteadyAlone, err = r.steady(ctx, unl, "steady1"); err != nil {
		return err
	}
	steadyRun, err := r.limitedRun(ctx, lim, "steady", func() error {
		var err error
		rep.SteadyBeside, err = r.steady(ctx, unl, "steady2")
		return err
	})
	if err != nil {
		return err
	}
	rep.LimitedBesideSteady = steadyRun.rate

	for _, db := range []*pgxpool.Pool{limited.db, unlimited.db} {
		n, err := r.orderViolations(ctx, db)
		if err != nil {
			return err
		}
		rep.OrderViolations += n
	}
	if rep.Throttled, err = r.throttled(ctx, limited.endpointID); err != nil {
		return err
	}
	return nil
}

// limitedResult is one run of the limited endpoint: what was posted and
// delivered, and its rate over the steady window (steadyRate).
type limitedResult struct {
	posted, delivered int
	rate, span        float64
}

// limitedRun posts enough events to keep the limited endpoint busy through
// the window, at once over its lanes, runs beside (when not nil)
// rateLimitSkip later, waits for the endpoint to drain and reads its rate.
func (r *runner) limitedRun(ctx context.Context, lim *scenario, part string, beside func() error) (limitedResult, error) {
	var res limitedResult
	busy := (rateLimitSkip + rateLimitWindow + rateLimitTail).Seconds() * rateLimitTarget
	specs := make([]eventSpec, int(math.Ceil(busy/rateLimitCorrelations))*rateLimitCorrelations)
	for i := range specs {
		specs[i] = r.spec(lim, part)
	}
	prefix := fmt.Sprintf("%s-%s-%s-", r.tag, lim.short, part)
	r.p.logf("posting %d events to the limited endpoint (%g/s) over %d lanes", len(specs), rateLimitTarget, rateLimitCorrelations)
	var err error
	if res.posted, err = r.postAll(ctx, lim, specs); err != nil {
		return res, err
	}
	posted := time.Now()
	if beside != nil {
		if err := sleep(ctx, rateLimitSkip); err != nil {
			return res, err
		}
		if err := beside(); err != nil {
			return res, err
		}
	}
	if res.delivered, err = r.drain(ctx, lim, prefix, res.posted); err != nil {
		return res, err
	}
	applied, err := r.appliedTimes(ctx, lim, prefix)
	if err != nil {
		return res, err
	}
	var times []time.Time
	for _, at := range applied[0] {
		times = append(times, at)
	}
	res.rate, res.span = steadyRate(times, posted, rateLimitSkip, rateLimitWindow)
	r.p.logf("limited %s: commits per 10 s from the first: %v", part, perTenSeconds(times))
	return res, nil
}

// steady posts rateLimitSteady events a second to sc for
// rateLimitSteadyFor, each on its own goroutine at its tick (a slow answer
// delays no later post), waits for them to drain, and reads their rate and
// post-to-commit latency.
func (r *runner) steady(ctx context.Context, sc *scenario, part string) (SteadyResult, error) {
	var res SteadyResult
	n := int(rateLimitSteady * rateLimitSteadyFor.Seconds())
	specs := make([]eventSpec, n)
	for i := range specs {
		specs[i] = r.spec(sc, part)
	}
	r.p.logf("%s: posting %d events at %g/s", sc.name, n, rateLimitSteady)
	postedAt := make(map[string]time.Time, n)
	var mu sync.Mutex
	var ok atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rateLimitSteady))
	defer tick.Stop()
	for _, e := range specs {
		select {
		case <-ctx.Done():
			wg.Wait()
			return res, ctx.Err()
		case <-tick.C:
		}
		wg.Go(func() {
			at := time.Now()
			if r.post(ctx, sc, e) == nil {
				ok.Add(1)
				mu.Lock()
				postedAt[e.id] = at
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Posted = int(ok.Load())
	prefix := fmt.Sprintf("%s-%s-%s-", r.tag, sc.short, part)
	var err error
	if res.Delivered, err = r.drain(ctx, sc, prefix, res.Posted); err != nil {
		return res, err
	}
	applied, err := r.appliedTimes(ctx, sc, prefix)
	if err != nil {
		return res, err
	}
	var times []time.Time
	var lat []time.Duration
	for id, at := range applied[0] {
		times = append(times, at)
		if p, ok := postedAt[id]; ok {
			lat = append(lat, at.Sub(p))
		}
	}
	// The commits over the posting's span, after the first lanes' start.
	res.Rate, _ = steadyRate(times, time.Time{}, rateLimitSkip, rateLimitSteadyFor-rateLimitSkip)
	slices.Sort(lat)
	if len(lat) > 0 {
		res.P50MS = float64(lat[len(lat)/2].Microseconds()) / 1000
		res.P99MS = float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()) / 1000
	}
	r.p.logf("%s %s: %d/%d delivered at %.2f/s, post to commit p50 %.0f ms, p99 %.0f ms", sc.name, part, res.Delivered, res.Posted, res.Rate, res.P50MS, res.P99MS)
	return res, nil
}

// postAll posts specs with cfg.Concurrency producers and returns how many
// were accepted; it does not wait for their delivery.
func (r *runner) postAll(ctx context.Context, sc *scenario, specs []eventSpec) (int, error) {
	var ok atomic.Int64
	var errOnce sync.Once
	var firstErr error
	jobs := make(chan eventSpec)
	var wg sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for e := range jobs {
				if err := r.post(ctx, sc, e); err != nil {
					errOnce.Do(func() { firstErr = err })
					continue
				}
				ok.Add(1)
			}
		})
	}
	for _, e := range specs {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	if n := int(ok.Load()); n < len(specs) {
		r.p.logf("%s: %d of %d events were not accepted; first error: %v", sc.name, len(specs)-n, len(specs), firstErr)
	}
	return int(ok.Load()), ctx.Err()
}

// drain waits until the receiver has committed want events of the prefix,
// or none more for stallLimit, and returns how many it has.
func (r *runner) drain(ctx context.Context, sc *scenario, prefix string, want int) (int, error) {
	return r.waitCount(ctx, sc.name, want, stallLimit, func(ctx context.Context) (int, error) {
		return r.committed(ctx, sc, prefix)
	})
}

// waitCount waits until count reaches want, or has not grown for stall,
// and returns the last count; name labels its progress lines.
func (r *runner) waitCount(ctx context.Context, name string, want int, stall time.Duration, count func(context.Context) (int, error)) (int, error) {
	last, lastChange, lastPrint := -1, time.Now(), time.Now()
	for {
		n, err := count(ctx)
		if err != nil {
			return 0, err
		}
		if n >= want {
			return n, nil
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) > stall {
			r.p.logf("%s: no commit for %s; giving up on %d events", name, stall, want-n)
			return n, nil
		}
		if time.Since(lastPrint) >= 10*time.Second {
			lastPrint = time.Now()
			r.p.logf("%s: committed %d/%d", name, n, want)
		}
		if err := r.s.checkAlive(); err != nil {
			return n, err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return n, err
		}
	}
}

// steadyRate is the commits a second in the window that begins skip after
// the first of times, or at notBefore when that is later, and the window's
// length: window, or less when the commits end sooner (then the rate is
// over what there is).
func steadyRate(times []time.Time, notBefore time.Time, skip, window time.Duration) (float64, float64) {
	if len(times) == 0 {
		return 0, 0
	}
	sorted := slices.SortedFunc(slices.Values(times), time.Time.Compare)
	from := sorted[0].Add(skip)
	if notBefore.After(from) {
		from = notBefore
	}
	to := from.Add(window)
	if last := sorted[len(sorted)-1]; last.Before(to) {
		to = last
	}
	span := to.Sub(from).Seconds()
	if span <= 0 {
		return 0, 0
	}
	n := 0
	for _, t := range sorted {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return float64(n) / span, span
}

// perTenSeconds counts times in 10-second buckets from the first.
func perTenSeconds(times []time.Time) []int {
	if len(times) == 0 {
		return nil
	}
	first := slices.MinFunc(times, time.Time.Compare)
	var out []int
	for _, t := range times {
		i := int(t.Sub(first) / (10 * time.Second))
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// orderViolations counts the receiver's ledger entries, in the order it
// applied them, whose sequence is not the previous of their correlation
// plus one.
func (r *runner) orderViolations(ctx context.Context, db *pgxpool.Pool) (int, error) {
	rows, err := db.Query(ctx, "SELECT correlation_id, sequence FROM ledger_entries ORDER BY entry_no")
	if err != nil {
		return 0, fmt.Errorf("read ledger order: %w", err)
	}
	last := map[string]int64{}
	bad := 0
	var corr string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&corr, &seq}, func() error {
		if seq != last[corr]+1 {
			bad++
		}
		last[corr] = seq
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read ledger order: %w", err)
	}
	return bad, nil
}

// patchEndpoint changes an endpoint's settings through the API.
func (r *runner) patchEndpoint(ctx context.Context, id string, change map[string]any) error {
	body, _ := json.Marshal(change)
	resp, err := r.api(ctx, http.MethodPatch, "/v1/endpoints/"+id, body)
	if err != nil {
		return fmt.Errorf("patch endpoint: %w", err)
	}
	return resp.Body.Close()
}

// throttled reads the endpoint's throttled count from its stats.
func (r *runner) throttled(ctx context.Context, id string) (int64, error) {
	resp, err := r.api(ctx, http.MethodGet, "/v1/endpoints/"+id+"/stats", nil)
	if err != nil {
		return 0, fmt.Errorf("read endpoint stats: %w", err)
	}
	defer resp.Body.Close()
	var st struct {
		Throttled int64 `json:"throttled"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("read endpoint stats: %w", err)
	}
	return st.Throttled, nil
}

// api sends one request to hookflow's API as the bench's admin; an answer
// other than 2xx is an error.
func (r *runner) api(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.s.apiURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, msg)
	}
	return resp, nil
}

// WriteJSON writes the report to path.
func (rep *RateLimitReport) WriteJSON(path string) error {
	return writeJSON(path, "rate limit report", rep)
}

// Alone is the unlimited endpoint's rate without the limited one: the mean
// of its bursts before and after.
func (rep *RateLimitReport) Alone() float64 { return (rep.AloneBefore + rep.AloneAfter) / 2 }

// WriteTable prints the figures and the summary line.
func (rep *RateLimitReport) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "hookflow bench --rate-limit: two endpoints, %d lanes each, one limited to %g/s\n", rep.Correlations, rep.Target)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, %s, load average %s at start, %s at end; %.0f s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)
	fmt.Fprintf(w, "limited:   %d/%d delivered; %.2f/s over %.1f s of its receiver's commits (from %s after the first, or the last post); throttled %d\n",
		rep.LimitedDelivered, rep.LimitedEvents, rep.LimitedRate, rep.WindowSeconds, rateLimitSkip, rep.Throttled)
	fmt.Fprintf(w, "limited alone (before, nothing beside it): %.2f/s over the same window\n", rep.LimitedAlone)
	fmt.Fprintf(w, "unlimited: %d events a burst: %.1f/s alone before, %.1f/s beside the limited one, %.1f/s alone after\n",
		rep.UnlimitedEvents, rep.AloneBefore, rep.Beside, rep.AloneAfter)
	fmt.Fprintf(w, "unlimited at a steady %g/s: alone %.2f/s (post to commit p50 %.0f ms, p99 %.0f ms), beside the limited one %.2f/s (p50 %.0f ms, p99 %.0f ms); the limited one beside it %.2f/s\n\n",
		rateLimitSteady, rep.SteadyAlone.Rate, rep.SteadyAlone.P50MS, rep.SteadyAlone.P99MS, rep.SteadyBeside.Rate, rep.SteadyBeside.P50MS, rep.SteadyBeside.P99MS, rep.LimitedBesideSteady)
	_, err := fmt.Fprintf(w, "rate_limit limited=%.2f/s (target %g/s, %.1f%% off) limited_alone=%.2f/s order_violations=%d throttled=%d unlimited=%.1f/s alone=%.1f/s ratio=%.2f"+
		" steady_alone=%.2f/s steady_beside=%.2f/s steady_ratio=%.2f steady_p50_ms=%.0f/%.0f limited_beside_steady=%.2f/s\n",
		rep.LimitedRate, rep.Target, rep.OffPercent, rep.LimitedAlone, rep.OrderViolations, rep.Throttled, rep.Beside, rep.Alone(), ratio(rep.Beside, rep.Alone()),
		rep.SteadyAlone.Rate, rep.SteadyBeside.Rate, ratio(rep.SteadyBeside.Rate, rep.SteadyAlone.Rate), rep.SteadyAlone.P50MS, rep.SteadyBeside.P50MS, rep.LimitedBesideSteady)
	return err
}
