package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/bench/internal/dbsqlc"
	hookflowdb "github.com/hookflow/hookflow/schema/dbsqlc"
)

// Settings of the ledger bench.
const (
	// LedgerCleanerInterval is the API's cleaner interval during a ledger
	// run: short, so that several runs fall inside each size's traffic.
	LedgerCleanerInterval = 10 * time.Second
	// DefaultLedgerBytesRows caps the size of the bytes-per-event ledger
	// when it is not given.
	DefaultLedgerBytesRows = 1_000_000
	maxLedgerRows          = 100_000_000

	// DefaultLedgerSpan is how far back the synthetic history goes: past
	// every default retention, so that the cleaner has work at once.
	DefaultLedgerSpan = 120 * 24 * time.Hour

	// The synthetic history: delivered events spread over the span, the
	// newest ledgerNewest old, ledgerEventsPerCorrelation per correlation,
	// one in ledgerRetriedEvery with two attempts (as LedgerAttemptsInsert).
	ledgerNewest               = time.Hour
	ledgerEventsPerCorrelation = 100
	ledgerRetriedEvery         = 10
	// bytesSpan keeps the bytes-per-event ledger inside every default
	// retention, so that only the bench's own cleaner runs prune it.
	bytesSpan = 24 * time.Hour
	// synthBatch is the events of one INSERT … SELECT; maxSynthConns the
	// connections that insert at once (one per CPU, up to this).
	synthBatch    = 100_000
	maxSynthConns = 4
)

// LedgerConfig is what a ledger run measures.
type LedgerConfig struct {
	// Sizes are the numbers of delivered events of history to synthesise,
	// one measurement each, in this order.
	Sizes []int64
	// BytesRows is the size of the ledger whose bytes per event are read
	// before and after pruning: 0 skips it, negative means the largest of
	// Sizes up to DefaultLedgerBytesRows.
	BytesRows int64
	// Span is how far back the history goes (0: DefaultLedgerSpan). Within
	// the payload retention, the cleaner has nothing to prune: what is left
	// is the cost of the history's size alone.
	Span time.Duration
}

// retentions are hookflow's default retentions, which the API child runs
// with (the bench passes it none).
type retentions struct {
	payload, attempt, key    time.Duration
	payloadS, attemptS, keyS string
}

func defaultRetentions() (retentions, error) {
	var r retentions
	for _, s := range config.Settings() {
		var d *time.Duration
		var text *string
		switch s.Env {
		case "HOOKFLOW_PAYLOAD_RETENTION":
			d, text = &r.payload, &r.payloadS
		case "HOOKFLOW_ATTEMPT_RETENTION":
			d, text = &r.attempt, &r.attemptS
		case "HOOKFLOW_KEY_RETENTION":
			d, text = &r.key, &r.keyS
		default:
			continue
		}
		v, err := config.ParseRetention(s.Default)
		if err != nil {
			return r, fmt.Errorf("default of %s: %w", s.Env, err)
		}
		*d, *text = v, s.Default
	}
	if r.payloadS == "" || r.attemptS == "" || r.keyS == "" {
		return r, errors.New("bench: hookflow's retention settings not found")
	}
	return r, nil
}

// Ledger starts a stack whose API cleans every LedgerCleanerInterval and,
// for each size, empties hookflow's ledger, synthesises that much history,
// and measures accept latency, the ordered scenario's rate and the idle
// single key's latency on top of it, with what the cleaner did meanwhile.
// Then it reads the bytes per event of a synthetic ledger before and after
// pruning.
func Ledger(ctx context.Context, cfg Config, lc LedgerConfig, logger *slog.Logger) (*LedgerReport, error) {
	if len(lc.Sizes) == 0 {
		return nil, errors.New("bench: at least one ledger size is required")
	}
	for _, n := range lc.Sizes {
		if n < 0 || n > maxLedgerRows {
			return nil, fmt.Errorf("bench: ledger size %d out of range (0 to %d)", n, maxLedgerRows)
		}
	}
	ret, err := defaultRetentions()
	if err != nil {
		return nil, err
	}
	if lc.Span < 0 {
		return nil, errors.New("bench: the ledger's span must not be negative")
	}
	if lc.Span == 0 {
		lc.Span = DefaultLedgerSpan
	}
	cfg.CleanerInterval = LedgerCleanerInterval
	conns := min(max(runtime.NumCPU(), 1), maxSynthConns)
	var rep *LedgerReport
	err = onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &LedgerReport{StartedAt: r.p.began.UTC(), Machine: m, Settings: settingsOf(r.cfg), History: LedgerHistory{
			SpanDays: lc.Span.Hours() / 24, NewestAgeHours: ledgerNewest.Hours(), EventsPerCorrelation: ledgerEventsPerCorrelation,
			RetriedEvery: ledgerRetriedEvery, SynthConnections: conns,
			PayloadRetention: ret.payloadS, AttemptRetention: ret.attemptS, KeyRetention: ret.keyS,
			CleanerInterval:      LedgerCleanerInterval.String(),
			PastPayloadRetention: pastRetention(lc.Span, ledgerNewest, ret.payload),
			PastAttemptRetention: pastRetention(lc.Span, ledgerNewest, ret.attempt),
			PastKeyRetention:     pastRetention(lc.Span, ledgerNewest, ret.key),
		}}
		lb, err := newLedgerBench(ctx, r, ret, conns, lc.Span)
		if err != nil {
			return err
		}
		defer lb.pool.Close()
		for i, n := range lc.Sizes {
			size, err := lb.measure(ctx, n, i+1, len(lc.Sizes))
			if err != nil {
				return err
			}
			rep.Sizes = append(rep.Sizes, size)
		}
		rep.Verdicts = flatness(rep.Sizes)
		if n := bytesRows(lc.Sizes, lc.BytesRows); n > 0 {
			if rep.Bytes, err = lb.bytes(ctx, n); err != nil {
				return err
			}
		}
		rep.Machine.LoadAvgEnd = loadAvg()
		rep.Seconds = time.Since(r.p.began).Seconds()
		return nil
	})
	return rep, err
}

// ledgerBench is a ledger run on one stack.
type ledgerBench struct {
	cfg   Config
	s     *stack
	p     *progress
	pool  *pgxpool.Pool // hookflow's database, as its owner
	ret   retentions
	conns int
	span  time.Duration // of the history
	hc    *http.Client
}

func newLedgerBench(ctx context.Context, r *runner, ret retentions, conns int, span time.Duration) (*ledgerBench, error) {
	lb := &ledgerBench{cfg: r.cfg, s: r.s, p: r.p, ret: ret, conns: conns, span: span, hc: r.hc}
	// Room for every synthesising connection and the watcher's reads.
	var err error
	lb.pool, err = app.ConnectPostgres(ctx, r.s.pg.AdminURL("hookflow")+fmt.Sprintf("&pool_max_conns=%d", conns+2))
	if err != nil {
		return nil, err
	}
	return lb, nil
}

// exec runs one of the bench's statements that takes no arguments.
func (lb *ledgerBench) exec(ctx context.Context, what, sql string) error {
	if _, err := lb.pool.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// measure is one size: empty the ledger, synthesise n events of history,
// settle, then the traffic, with the cleaner watched throughout.
func (lb *ledgerBench) measure(ctx context.Context, n int64, i, of int) (LedgerSize, error) {
	lb.p.logf("ledger size %d/%d: %s events of history", i, of, thousands(n))
	plan := newSynthPlan(n, ledgerEventsPerCorrelation, synthBatch)
	size := LedgerSize{Rows: n, Attempts: plan.attempts(), Correlations: plan.correlations}
	if err := lb.exec(ctx, "empty the ledger", dbsqlc.LedgerTruncate); err != nil {
		return size, err
	}
	began := time.Now()
	if n > 0 {
		if err := lb.synth(ctx, plan, began.Add(-ledgerNewest-lb.span), lb.span); err != nil {
			return size, err
		}
	}
	size.SynthSeconds = time.Since(began).Seconds()
	watch := lb.watchCleaner(ctx)
	defer watch.stop() // on an early return
	settled := time.Now()
	if err := lb.settle(ctx); err != nil {
		return size, err
	}
	size.SettleSeconds = time.Since(settled).Seconds()
	sz, err := lb.sizes(ctx)
	if err != nil {
		return size, err
	}
	size.LedgerBytes = sz.total()
	lb.p.logf("ledger %s: synthesised in %.0f s, settled in %.0f s, %s MB; the cleaner works on it from now on",
		thousands(n), size.SynthSeconds, size.SettleSeconds, mb(size.LedgerBytes))

	r := newRunner(lb.cfg, lb.s, lb.p)
	if err := lb.traffic(ctx, r); err != nil {
		return size, err
	}
	size.Cleaner = watch.stop()
	size.Ordered = r.burstResult(r.ordered, fmt.Sprintf("POST /v1/events, %d correlations, on %s events of history", lb.cfg.Correlations, thousands(n)))
	size.MedianRoundPerSec = medianRound(r.ordered.rounds)
	var accepts []time.Duration
	for _, rd := range r.ordered.rounds {
		accepts = append(accepts, rd.accepts...)
	}
	size.Accept = percentiles(accepts)
	size.Idle = idleResult(ScenarioSingleKeyIdle, "hookflow single key, one event at a time", r.single.idle)
	var idleAccepts []time.Duration
	for _, s := range r.single.idle {
		idleAccepts = append(idleAccepts, s.accepted.Sub(s.sent))
	}
	size.IdleAccept = percentiles(idleAccepts)
	size.Statements = lb.explain(ctx, r.tag)
	if err := lb.pool.QueryRow(ctx, dbsqlc.LedgerCounts).Scan(&size.Left.Events, &size.Left.PayloadsPruned, &size.PayloadBytes, &size.Left.Attempts); err != nil {
		return size, fmt.Errorf("count the history left: %w", err)
	}
	c := size.Cleaner
	lb.p.logf("ledger %s: accept p50 %.1f ms p99 %.1f ms (idle %.1f / %.1f); ordered %.1f events/s (median round %.1f); idle accept→commit p50 %.1f ms; cleaner: %d runs, %s payloads, %s attempts, %s keys",
		thousands(n), size.Accept.P50, size.Accept.P99, size.IdleAccept.P50, size.IdleAccept.P99, size.Ordered.EventsPerSec, size.MedianRoundPerSec, size.Idle.LatencyMS.P50, c.Runs,
		thousands(c.PayloadsPruned), thousands(c.AttemptsDeleted), thousands(c.KeysDeleted))
	return size, nil
}

// settle is what a long-lived ledger has had time for: vacuumed and
// analysed, its pages written out, so that neither lands on the traffic.
func (lb *ledgerBench) settle(ctx context.Context) error {
	if err := lb.exec(ctx, "vacuum the ledger", dbsqlc.LedgerVacuumAnalyze); err != nil {
		return err
	}
	return lb.exec(ctx, "checkpoint", dbsqlc.LedgerCheckpoint)
}

// traffic is the measured load on one size: warm-up, the ordered scenario
// in rounds, then the single key one event at a time.
func (lb *ledgerBench) traffic(ctx context.Context, r *runner) error {
	r.p.logf("warm-up: starts the ordered scenario's sequencers and the single key's")
	if _, err := r.burst(ctx, r.ordered, "w", r.cfg.Correlations); err != nil {
		return err
	}
	if _, err := r.burst(ctx, r.single, "w", 5); err != nil {
		return err
	}
	for round := 1; round <= r.cfg.Rounds; round++ {
		n := roundSize(r.cfg.Events, r.cfg.Rounds, round)
		res, err := r.burst(ctx, r.ordered, fmt.Sprintf("r%d", round), n)
		if err != nil {
			return err
		}
		res.Round = round
		r.ordered.rounds = append(r.ordered.rounds, res)
		a := percentiles(res.accepts)
		r.p.logf("%s round %d/%d: %d/%d delivered in %.1fs = %.1f events/s; accept p50 %.1f ms p99 %.1f ms", r.ordered.name, round, r.cfg.Rounds,
			res.Delivered, res.Events, res.Seconds, res.EventsPerSec, a.P50, a.P99)
	}
	if r.cfg.IdleEvents > 0 {
		r.p.logf("idle latency: %d single-key events, one at a time", r.cfg.IdleEvents)
		for i := 0; i < r.cfg.IdleEvents; i++ {
			if err := r.idleOne(ctx, r.single); err != nil {
				return err
			}
		}
	}
	return nil
}

// ledgerSizes are the ledger's relations' sizes in bytes; correlations
// counts every cursor, the lanes' too.
type ledgerSizes struct {
	eventsHeap, eventsIndexes, deliveries, attempts, correlations int64
}

func (s ledgerSizes) total() int64 {
	return s.eventsHeap + s.eventsIndexes + s.deliveries + s.attempts + s.correlations
}

func (lb *ledgerBench) sizes(ctx context.Context) (ledgerSizes, error) {
	var s ledgerSizes
	if err := lb.pool.QueryRow(ctx, dbsqlc.LedgerSizes).Scan(&s.eventsHeap, &s.eventsIndexes, &s.deliveries, &s.attempts, &s.correlations); err != nil {
		return s, fmt.Errorf("read the ledger's size: %w", err)
	}
	return s, nil
}

// cleanerWatch polls GET /v1/stats in the background and adds up the
// cleaner runs it sees.
type cleanerWatch struct {
	stopc chan struct{}
	done  chan LedgerCleaner
	once  sync.Once
	sum   LedgerCleaner
}

// watchCleaner starts polling every half cleaner interval, counting runs
// that end from now on.
func (lb *ledgerBench) watchCleaner(ctx context.Context) *cleanerWatch {
	w := &cleanerWatch{stopc: make(chan struct{}), done: make(chan LedgerCleaner, 1)}
	runs := newCleanerRuns(time.Now())
	go func() {
		t := time.NewTicker(LedgerCleanerInterval / 2)
		defer t.Stop()
		poll := func() {
			t0 := time.Now()
			run, err := lb.lastCleanerRun(ctx)
			runs.polled(time.Since(t0), err)
			if run != nil {
				runs.add(*run)
			}
		}
		for {
			select {
			case <-ctx.Done():
				w.done <- runs.summary()
				return
			case <-w.stopc:
				poll()
				w.done <- runs.summary()
				return
			case <-t.C:
				poll()
			}
		}
	}()
	return w
}

// stop polls once more and returns the sum; later calls return it again.
func (w *cleanerWatch) stop() LedgerCleaner {
	w.once.Do(func() {
		close(w.stopc)
		w.sum = <-w.done
	})
	return w.sum
}

// lastCleanerRun reads GET /v1/stats' cleaner: nil before the first run.
func (lb *ledgerBench) lastCleanerRun(ctx context.Context) (*store.CleanerRun, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lb.s.apiURL+"/v1/stats?top=0", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := lb.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/stats: status %d", resp.StatusCode)
	}
	var body struct {
		Cleaner *store.CleanerRun `json:"cleaner"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /v1/stats: %w", err)
	}
	return body.Cleaner, nil
}

// cleanerRuns adds up the distinct cleaner runs that GET /v1/stats showed
// (it shows the last one only, so it is polled more often than runs start).
type cleanerRuns struct {
	since time.Time
	seen  map[int64]bool
	sum   LedgerCleaner
	stats []time.Duration
}

func newCleanerRuns(since time.Time) *cleanerRuns {
	return &cleanerRuns{since: since, seen: map[int64]bool{}}
}

// add counts run once, if it ended after since.
func (c *cleanerRuns) add(run store.CleanerRun) {
	k := run.StartedAt.UnixNano()
	if c.seen[k] || run.FinishedAt.Before(c.since) {
		return
	}
	c.seen[k] = true
	c.sum.Runs++
	c.sum.PayloadsPruned += run.PayloadsPruned
	c.sum.AttemptsDeleted += run.AttemptsDeleted
	c.sum.KeysDeleted += run.KeysDeleted
	c.sum.LongestRunSec = max(c.sum.LongestRunSec, run.FinishedAt.Sub(run.StartedAt).Seconds())
	if run.Error != nil {
		c.sum.FailedRuns++
		c.sum.LastError = *run.Error
	}
}

// polled records one poll's duration; a failed poll's error is kept.
func (c *cleanerRuns) polled(took time.Duration, err error) {
	c.sum.Polls++
	if err != nil {
		c.sum.LastError = err.Error()
		return
	}
	c.stats = append(c.stats, took)
}

func (c *cleanerRuns) summary() LedgerCleaner {
	s := c.sum
	s.Stats = percentiles(c.stats)
	return s
}

// explain runs hookflow's statements under EXPLAIN (ANALYZE, BUFFERS), each
// in a transaction rolled back, and returns their timings.
func (lb *ledgerBench) explain(ctx context.Context, tag string) []StatementTiming {
	hash := sha256.Sum256([]byte(`{"amount":1}`))
	lease := 30.0
	stmts := []struct {
		name string
		sql  string
		args []any
	}{
		// As the API runs them, for the synthetic history's tenant (the
		// default, as each statement names it).
		{"EventInsertRouted (accept)", hookflowdb.EventInsertRouted, []any{tag + "-explain", tag + "-explain", int64(1), "bench.event", json.RawMessage(`{"amount":1}`), hash[:], store.DefaultTenant, nil, []string(nil), []string{lb.s.endpointID}}},
		{"StatsSummary (GET /v1/stats)", hookflowdb.StatsSummary, []any{store.DefaultTenant}},
		{"StatsBlockedCorrelations (GET /v1/stats)", hookflowdb.StatsBlockedCorrelations, []any{10, store.DefaultTenant, []string(nil)}},
		{"EventsQueuedClaim (sweep)", hookflowdb.EventsQueuedClaim, []any{100, lease}},
		{"LanesStuckHeadsClaim (sweep)", hookflowdb.LanesStuckHeadsClaim, []any{lease, 100}},
		{"EventsPrunePayloads (cleaner)", hookflowdb.EventsPrunePayloads, []any{lb.ret.payload.Seconds(), 1000}},
		{"AttemptsPrune (cleaner)", hookflowdb.AttemptsPrune, []any{lb.ret.attempt.Seconds(), 1000}},
		{"EventsPruneKeys (cleaner)", hookflowdb.EventsPruneKeys, []any{lb.ret.key.Seconds(), 1000}},
	}
	out := make([]StatementTiming, 0, len(stmts))
	for _, st := range stmts {
		t, err := lb.explainOne(ctx, st.sql, st.args)
		if err != nil {
			lb.p.logf("EXPLAIN %s: %v", st.name, err)
			t.Error = err.Error()
		}
		t.Name = st.name
		out = append(out, t)
	}
	return out
}

func (lb *ledgerBench) explainOne(ctx context.Context, sql string, args []any) (StatementTiming, error) {
	tx, err := lb.pool.Begin(ctx)
	if err != nil {
		return StatementTiming{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)\n"+sql, args...).Scan(&raw); err != nil {
		return StatementTiming{}, err
	}
	return parseExplain(raw)
}

// planNode is what the timings read of an EXPLAIN (FORMAT JSON) node.
type planNode struct {
	NodeType    string     `json:"Node Type"`
	Relation    string     `json:"Relation Name"`
	Index       string     `json:"Index Name"`
	ActualRows  float64    `json:"Actual Rows"`
	ActualLoops float64    `json:"Actual Loops"`
	SharedHit   int64      `json:"Shared Hit Blocks"`
	SharedRead  int64      `json:"Shared Read Blocks"`
	Plans       []planNode `json:"Plans"`
}

// parseExplain reads EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) output: the
// times, the top node's buffers (which include its children's) and rows,
// and every scan.
func parseExplain(raw []byte) (StatementTiming, error) {
	var out []struct {
		Plan          planNode `json:"Plan"`
		PlanningTime  float64  `json:"Planning Time"`
		ExecutionTime float64  `json:"Execution Time"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return StatementTiming{}, fmt.Errorf("read EXPLAIN output: %w", err)
	}
	if len(out) != 1 {
		return StatementTiming{}, fmt.Errorf("read EXPLAIN output: %d plans", len(out))
	}
	e := out[0]
	t := StatementTiming{ExecMS: e.ExecutionTime, PlanMS: e.PlanningTime, SharedHit: e.Plan.SharedHit, SharedRead: e.Plan.SharedRead,
		Rows: e.Plan.ActualRows, Plan: json.RawMessage(raw)}
	seen := map[string]bool{}
	var walk func(n planNode)
	walk = func(n planNode) {
		if strings.Contains(n.NodeType, "Scan") {
			s := n.NodeType
			switch {
			case n.Index != "":
				s += " using " + n.Index
			case n.Relation != "":
				s += " on " + n.Relation
			}
			if !seen[s] {
				seen[s] = true
				t.Scans = append(t.Scans, fmt.Sprintf("%s (%.0f rows)", s, n.ActualRows*max(n.ActualLoops, 1)))
			}
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(e.Plan)
	sort.Strings(t.Scans)
	return t, nil
}
