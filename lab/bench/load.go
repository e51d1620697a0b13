package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/internal/contract"
)

type kind int

const (
	kindBaseline kind = iota
	kindBaselineFast
	kindHookflow
)

// stallLimit is how long a round may go without a single new commit once
// every event is submitted before it is given up (and reported short).
const stallLimit = 2 * time.Minute

// eventSpec is one event to send.
type eventSpec struct {
	id   string
	corr string
	seq  int64
	// tenant is the event's tenant, named to the API; empty: the default
	// tenant, named by nothing.
	tenant string
}

// RoundResult is one burst of one scenario: its events/s and, unexported,
// what the scenario totals are summed from.
type RoundResult struct {
	Round     int `json:"round"`
	Events    int `json:"events"`
	Delivered int `json:"delivered"`
	// Deliveries is the webhooks the round delivered, counted in every
	// receiver of the scenario: Delivered times its fan-out when every
	// event reached every endpoint.
	Deliveries       int     `json:"deliveries"`
	Seconds          float64 `json:"seconds"`
	EventsPerSec     float64 `json:"events_per_sec"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`

	// latencies are accepted → receiver commit, one per delivery.
	latencies []time.Duration
	// accepts are the send → accepted times of the events the system
	// took (for hookflow: POST /v1/events until its 202, retries included).
	accepts  []time.Duration
	cpu      cpuSnapshot
	pg       pgSnapshot
	ids      []string
	rssStart float64
	rssEnd   float64
	rssMax   float64
}

// idleSample is one event sent on a quiet system.
type idleSample struct {
	id       string
	sent     time.Time
	accepted time.Time
	applied  time.Time
}

// scenario is one system under one load shape.
type scenario struct {
	name   string
	short  string // in event IDs
	kind   kind
	wfType string
	// corr gives the correlation of the n-th event; nil: its own ID.
	corr func(n int) string
	// key gives the index of the n-th event's correlation, which tenancy
	// maps to its tenant (tenant-spread scenarios only).
	key func(n int) int
	// tenancy spreads the correlations over tenants; nil: every event is
	// the default tenant's.
	tenancy *tenancy
	// evType is the events' type; routed posts them without an endpoint,
	// so that hookflow routes each to every endpoint subscribed to it,
	// rather than to the reference receiver's endpoint by name.
	evType string
	routed bool
	// sinks are the databases of the receivers its events go to, one per
	// endpoint: an event is delivered once every one has committed it, and
	// each commit is a delivery, which every per-delivery figure counts.
	sinks []*pgxpool.Pool
	// endpoint is the endpoint its events are posted to when not routed;
	// empty: the reference receiver's.
	endpoint string
	// ledger, when set, is the endpoint whose deliveries hookflow's own
	// ledger counts as landed, at their delivered_at, instead of sinks: a
	// broker has no receiver ledger, and the destinations comparison
	// times every type, webhooks included, by the same clock.
	ledger string
	// overlaps says another scenario's workflows run beside its bursts
	// (the rate limit's): a burst does not wait for every event workflow
	// to close, which would wait for those too.
	overlaps bool
	counter  int
	rounds   []RoundResult
	idle     []idleSample
}

type runner struct {
	cfg   Config
	s     *stack
	p     *progress
	tag   string
	hc    *http.Client
	seq   map[string]int64 // last sequence given per correlation
	began time.Time

	base, fast, ordered, single, fan *scenario
	// orderedTenants and fanTenants are the tenant-spread twins of ordered
	// and fan; nil unless Config.Tenants.
	orderedTenants, fanTenants *scenario
	// tenantEndpoint is each tenant's endpoint at the reference receiver.
	tenantEndpoint map[string]string
	rss            []RSSPoint
	background     Background
	lastRSS        time.Time
	// ownQueries counts the bench's own transactions on the receiver's
	// database, taken out of its per-event figures.
	ownQueries atomic.Int64
}

func newRunner(cfg Config, s *stack, p *progress) *runner {
	r := &runner{cfg: cfg, s: s, p: p, tag: newTag(), seq: map[string]int64{}, began: time.Now()}
	r.hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: cfg.Concurrency + 8, MaxIdleConnsPerHost: cfg.Concurrency + 8, IdleConnTimeout: time.Minute,
	}}
	one := []*pgxpool.Pool{s.receiverDB}
	r.base = &scenario{name: ScenarioBaseline, short: "base", kind: kindBaseline, wfType: BaselineWorkflowName, evType: benchEventType, sinks: one}
	r.fast = &scenario{name: ScenarioBaselineFast, short: "fast", kind: kindBaselineFast, wfType: BaselineFastWorkflowName, evType: benchEventType, sinks: one}
	r.ordered = &scenario{name: ScenarioOrdered, short: "ord", kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType, sinks: one,
		corr: func(n int) string { return fmt.Sprintf("%s-ord-%03d", r.tag, n%cfg.Correlations) }}
	single := r.tag + "-single"
	r.single = &scenario{name: ScenarioSingleKey, short: "one", kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType, sinks: one,
		corr: func(int) string { return single }}
	r.fan = &scenario{name: ScenarioFanOut, short: "fan", kind: kindHookflow, wfType: contract.EventWorkflow, evType: fanOutEventType, routed: true,
		sinks: s.fanDBs(), corr: func(n int) string { return fmt.Sprintf("%s-fan-%03d", r.tag, n%cfg.Correlations) }}
	if cfg.Tenants > 0 {
		// Both twins share the tenants; their correlations' names are
		// their own, as the one-tenant scenarios', so that the receivers'
		// ledgers (one per correlation) tell every lane apart.
		t := newTenancy(tenantIDs(r.tag, cfg.Tenants))
		key := func(n int) int { return n % cfg.Correlations }
		r.orderedTenants = &scenario{name: ScenarioOrderedTenants, short: "ordt", kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType,
			sinks: one, key: key, tenancy: t, corr: func(n int) string { return fmt.Sprintf("%s-ordt-%03d", r.tag, key(n)) }}
		r.fanTenants = &scenario{name: ScenarioFanOutTenants, short: "fant", kind: kindHookflow, wfType: contract.EventWorkflow, evType: fanOutEventType, routed: true,
			sinks: s.fanDBs(), key: key, tenancy: t, corr: func(n int) string { return fmt.Sprintf("%s-fant-%03d", r.tag, key(n)) }}
	}
	return r
}

// throughput lists the throughput scenarios in the order of an odd round;
// an even round runs them backwards. Each tenant-spread twin runs right
// after its one-tenant scenario (before it, in an even round), so that the
// two meet the same load from the rest of the machine.
func (r *runner) throughput() []*scenario {
	out := []*scenario{r.base, r.fast, r.ordered}
	if r.orderedTenants != nil {
		out = append(out, r.orderedTenants)
	}
	out = append(out, r.fan)
	if r.fanTenants != nil {
		out = append(out, r.fanTenants)
	}
	return append(out, r.single)
}

// run is the whole measurement: warm-up, interleaved rounds, idle latency.
func (r *runner) run(ctx context.Context) error {
	if r.orderedTenants != nil {
		if err := r.setUpTenants(ctx, r.orderedTenants.tenancy.ids); err != nil {
			return err
		}
	}
	r.p.logf("warm-up: starts every sequencer and every connection pool")
	for _, sc := range r.throughput() {
		n := r.cfg.Correlations
		switch sc {
		case r.base, r.fast:
			n = 10
		case r.single:
			n = 5
		}
		if _, err := r.burst(ctx, sc, "w", n); err != nil {
			return err
		}
	}
	if err := r.measureBackground(ctx, 10*time.Second); err != nil {
		return err
	}
	for round := 1; round <= r.cfg.Rounds; round++ {
		n := roundSize(r.cfg.Events, r.cfg.Rounds, round)
		order := r.throughput()
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, sc := range order {
			res, err := r.burst(ctx, sc, fmt.Sprintf("r%d", round), n)
			if err != nil {
				return err
			}
			res.Round = round
			sc.rounds = append(sc.rounds, res)
			r.p.logf("%s round %d/%d: %d/%d delivered in %.1fs = %.1f events/s", sc.name, round, r.cfg.Rounds,
				res.Delivered, res.Events, res.Seconds, res.EventsPerSec)
		}
	}
	if r.cfg.IdleEvents > 0 {
		r.p.logf("idle latency: %d events each for the baseline, the fast baseline and the single key, one at a time", r.cfg.IdleEvents)
		idle := []*scenario{r.base, r.fast, r.single}
		for i := 0; i < r.cfg.IdleEvents; i++ {
			// Rotate who goes first, so that none always follows the same one.
			for j := range idle {
				sc := idle[(i+j)%len(idle)]
				if err := r.idleOne(ctx, sc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (r *runner) spec(sc *scenario, part string) eventSpec {
	n := sc.counter
	sc.counter++
	id := fmt.Sprintf("%s-%s-%s-%06d", r.tag, sc.short, part, n)
	if sc.corr == nil {
		return eventSpec{id: id, corr: id, seq: 1}
	}
	corr := sc.corr(n)
	r.seq[corr]++
	e := eventSpec{id: id, corr: corr, seq: r.seq[corr]}
	if sc.tenancy != nil {
		e.tenant = sc.tenancy.ofKey(sc.key(n))
		sc.tenancy.record(e)
	}
	return e
}

// workflowID is the workflow of the scenario's event id: the baselines'
// own workflows are named by the event, hookflow's by its tenant and ID.
func (sc *scenario) workflowID(id string) string {
	if sc.kind == kindBaseline || sc.kind == kindBaselineFast {
		return id
	}
	return contract.EventWorkflowID(sc.eventTenant(id), id)
}

// workflowIDs are the workflows of the scenario's events.
func workflowIDs(sc *scenario) []string {
	out := ids(sc)
	for i, id := range out {
		out[i] = sc.workflowID(id)
	}
	return out
}

func (r *runner) send(ctx context.Context, sc *scenario, e eventSpec) error {
	switch sc.kind {
	case kindBaseline:
		return r.startBaseline(ctx, e)
	case kindBaselineFast:
		return r.startFast(ctx, e)
	}
	return r.post(ctx, sc, e)
}

// post sends the event to hookflow's API, addressed to the reference
// receiver's endpoint or, for a routed scenario, to no endpoint (hookflow
// routes it by type); transport errors and 5xx are retried (the
// idempotency key makes that safe).
func (r *runner) post(ctx context.Context, sc *scenario, e eventSpec) error {
	in := map[string]any{
		"id": e.id, "correlation_id": e.corr, "sequence": e.seq,
		"type": sc.evType, "data": map[string]int{"amount": 1},
	}
	if !sc.routed {
		in["endpoint_id"] = cmp.Or(sc.endpoint, r.tenantEndpoint[e.tenant], r.s.endpointID)
	}
	if e.tenant != "" {
		in["tenant_id"] = e.tenant
	}
	body, _ := json.Marshal(in)
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return err
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.s.apiURL+"/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode >= 500:
			last = fmt.Errorf("api answered %d: %s", resp.StatusCode, msg)
		default:
			return fmt.Errorf("api answered %d: %s", resp.StatusCode, msg)
		}
	}
	return fmt.Errorf("post event %s: %w", e.id, last)
}

// deliverInput is what both baselines deliver for the event.
func (r *runner) deliverInput(e eventSpec) contract.DeliverInput {
	return contract.DeliverInput{
		EventID: e.id, CorrelationID: e.corr, Sequence: e.seq, EndpointID: r.s.endpointID, Type: benchEventType,
		Timestamp: time.Now().UTC(), Data: json.RawMessage(`{"amount":1}`), Timeout: 15 * time.Second,
	}
}

// startBaseline starts the baseline workflow of the event; "accepted" is
// when the start returns, as for hookflow's API.
func (r *runner) startBaseline(ctx context.Context, e eventSpec) error {
	opts := client.StartWorkflowOptions{ID: e.id, TaskQueue: baselineTaskQueue}
	if _, err := r.s.temporal.ExecuteWorkflow(ctx, opts, BaselineWorkflowName, r.deliverInput(e)); err != nil {
		return fmt.Errorf("start baseline workflow %s: %w", e.id, err)
	}
	return nil
}

// startFast posts the event to the fast baseline's process, which starts its
// workflow eagerly on its own worker; "accepted" is when that call returns,
// as for hookflow's API. Like startBaseline, it is not retried.
func (r *runner) startFast(ctx context.Context, e eventSpec) error {
	body, err := json.Marshal(r.deliverInput(e))
	if err != nil {
		return fmt.Errorf("encode fast baseline event %s: %w", e.id, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.s.fastURL+fastStartPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("start fast baseline workflow %s: %w", e.id, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("start fast baseline workflow %s: status %d: %s", e.id, resp.StatusCode, msg)
	}
	return nil
}

// eagerStats asks the fast baseline's process how many of its starts ran
// eagerly.
func (r *runner) eagerStats(ctx context.Context) (EagerStats, error) {
	var st EagerStats
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.s.fastURL+fastStatsPath, nil)
	resp, err := r.hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("read eager start counts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("read eager start counts: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("read eager start counts: %w", err)
	}
	return st, nil
}

// burst submits n events of sc with the configured concurrency and waits
// until the receiver has committed all of them and their workflows closed.
func (r *runner) burst(ctx context.Context, sc *scenario, part string, n int) (RoundResult, error) {
	specs := make([]eventSpec, n)
	for i := range specs {
		specs[i] = r.spec(sc, part)
	}
	prefix := fmt.Sprintf("%s-%s-%s-", r.tag, sc.short, part)
	res := RoundResult{Events: n, rssStart: r.workerRSS(sc)}
	before := r.s.cpu()
	pgBefore, err := r.pgStats(ctx)
	if err != nil {
		return res, err
	}
	start := time.Now()

	accepted := make([]time.Time, n)
	took := make([]time.Duration, n)
	var sent, failed atomic.Int64
	var errOnce sync.Once
	var firstErr error
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < r.cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				if err := r.send(ctx, sc, specs[i]); err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
				} else {
					accepted[i] = time.Now()
					took[i] = accepted[i].Sub(t0)
				}
				sent.Add(1)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range specs {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	sendsDone := make(chan struct{})
	go func() { wg.Wait(); close(sendsDone) }()

	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastCommitted, lastChange, lastPrint := -1, time.Now(), time.Now()
	res.rssMax = res.rssStart
	for {
		select {
		case <-ctx.Done():
			<-sendsDone
			return res, ctx.Err()
		case <-tick.C:
		}
		committed, err := r.committed(ctx, sc, prefix)
		if err != nil {
			return res, err
		}
		if committed != lastCommitted {
			lastCommitted, lastChange = committed, time.Now()
		}
		done := closed(sendsDone)
		if done && committed >= int(sent.Load()-failed.Load()) {
			break
		}
		if done && time.Since(lastChange) > stallLimit {
			r.p.logf("%s %s: no commit for %s; giving up on %d events", sc.name, part, stallLimit, n-committed)
			break
		}
		if err := r.s.checkAlive(); err != nil {
			return res, err
		}
		res.rssMax = max(res.rssMax, r.sampleRSS(sc))
		if time.Since(lastPrint) >= 3*time.Second {
			lastPrint = time.Now()
			r.p.logf("%s %s: accepted %d/%d, committed %d/%d (%.1f/s)", sc.name, part,
				sent.Load()-failed.Load(), n, committed, n, float64(committed)/time.Since(start).Seconds())
		}
	}
	if f := failed.Load(); f > 0 {
		r.p.logf("%s %s: %d events were not accepted; first error: %v", sc.name, part, f, firstErr)
	}
	if !sc.overlaps {
		if err := r.waitClosed(ctx, sc.wfType, 60*time.Second); err != nil {
			r.p.logf("%s %s: %v", sc.name, part, err)
		}
	}
	// Backends report their statistics at most once a second.
	if err := sleep(ctx, 1100*time.Millisecond); err != nil {
		return res, err
	}
	res.cpu = r.s.cpu().sub(before)
	pgAfter, err := r.pgStats(ctx)
	if err != nil {
		return res, err
	}
	res.pg = pgAfter.sub(pgBefore)
	res.rssEnd = r.workerRSS(sc)
	res.rssMax = max(res.rssMax, res.rssEnd)

	applied, err := r.appliedTimes(ctx, sc, prefix)
	if err != nil {
		return res, err
	}
	for i := range specs {
		if !accepted[i].IsZero() {
			res.accepts = append(res.accepts, took[i])
		}
	}
	end := start
	for i, e := range specs {
		everywhere := true
		for _, sink := range applied {
			at, ok := sink[e.id]
			if !ok {
				everywhere = false
				continue
			}
			res.Deliveries++
			if at.After(end) {
				end = at
			}
			if !accepted[i].IsZero() {
				res.latencies = append(res.latencies, at.Sub(accepted[i]))
			}
		}
		if everywhere {
			res.Delivered++
			res.ids = append(res.ids, e.id)
		}
	}
	res.Seconds = end.Sub(start).Seconds()
	if res.Seconds > 0 {
		res.EventsPerSec = float64(res.Delivered) / res.Seconds
		res.DeliveriesPerSec = float64(res.Deliveries) / res.Seconds
	}
	return res, nil
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// committed counts the events of one round that every receiver of the
// scenario has committed (the fewest any one has).
func (r *runner) committed(ctx context.Context, sc *scenario, prefix string) (int, error) {
	if sc.ledger != "" {
		var n int
		err := r.s.hookflowDB.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND event_id LIKE $2 AND state = 'delivered'",
			sc.ledger, prefix+"%").Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count ledger deliveries: %w", err)
		}
		return n, nil
	}
	fewest := -1
	for _, db := range sc.sinks {
		var n int
		r.ownQueries.Add(1)
		if err := db.QueryRow(ctx, "SELECT count(*) FROM ledger_entries WHERE event_id LIKE $1", prefix+"%").Scan(&n); err != nil {
			return 0, fmt.Errorf("count receiver commits: %w", err)
		}
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return max(fewest, 0), nil
}

// appliedTimes returns, per receiver of the scenario, its applied_at (its
// transaction's time, on this machine's clock) of every committed event of
// one round; for a scenario counted from hookflow's ledger, the
// deliveries' delivered_at, as one sink.
func (r *runner) appliedTimes(ctx context.Context, sc *scenario, prefix string) ([]map[string]time.Time, error) {
	type source struct {
		db   *pgxpool.Pool
		sql  string
		args []any
	}
	var from []source
	if sc.ledger != "" {
		from = append(from, source{r.s.hookflowDB, "SELECT event_id, delivered_at FROM deliveries WHERE endpoint_id = $1 AND event_id LIKE $2 AND state = 'delivered'",
			[]any{sc.ledger, prefix + "%"}})
	} else {
		for _, db := range sc.sinks {
			r.ownQueries.Add(1)
			from = append(from, source{db, "SELECT event_id, applied_at FROM ledger_entries WHERE event_id LIKE $1", []any{prefix + "%"}})
		}
	}
	var out []map[string]time.Time
	for _, src := range from {
		rows, err := src.db.Query(ctx, src.sql, src.args...)
		if err != nil {
			return nil, fmt.Errorf("read receiver commits: %w", err)
		}
		sink := map[string]time.Time{}
		var id string
		var at time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error { sink[id] = at; return nil })
		if err != nil {
			return nil, fmt.Errorf("read receiver commits: %w", err)
		}
		out = append(out, sink)
	}
	return out, nil
}

// waitClosed waits until no workflow of the type runs, so that the CPU of
// a round includes the work after the receiver's commit (completion, the
// sequencer's done signal).
func (r *runner) waitClosed(ctx context.Context, wfType string, limit time.Duration) error {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", wfType)
	deadline := time.Now().Add(limit)
	for {
		resp, err := r.s.temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: q})
		if err == nil && resp.GetCount() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("count running %s: %w", wfType, err)
			}
			return fmt.Errorf("%d %s workflows still running after %s", resp.GetCount(), wfType, limit)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// idleOne sends one event on a quiet system and waits until its workflow
// has closed, then lets the system settle.
func (r *runner) idleOne(ctx context.Context, sc *scenario) error {
	e := r.spec(sc, "idle")
	sent := time.Now()
	if err := r.send(ctx, sc, e); err != nil {
		return err
	}
	accepted := time.Now()
	var applied time.Time
	deadline := time.Now().Add(time.Minute)
	for {
		err := r.s.receiverDB.QueryRow(ctx, "SELECT applied_at FROM ledger_entries WHERE event_id = $1", e.id).Scan(&applied)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read receiver commit: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: event %s not committed within a minute", sc.name, e.id)
		}
		// Coarse on purpose: the latency comes from applied_at, and a
		// tighter poll would load the machine being measured.
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		d, err := r.s.temporal.DescribeWorkflowExecution(ctx, sc.workflowID(e.id), "")
		if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			break
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	sc.idle = append(sc.idle, idleSample{id: e.id, sent: sent, accepted: accepted, applied: applied})
	return sleep(ctx, 200*time.Millisecond)
}

// workerRSS is the resident memory of the scenario's worker process.
func (r *runner) workerRSS(sc *scenario) float64 {
	name := procWorker
	switch sc.kind {
	case kindBaseline:
		name = procBaseline
	case kindBaselineFast:
		name = procBaselineFast
	}
	if c := r.s.byName[name]; c != nil {
		return rssMB(c.pid())
	}
	return 0
}

// sampleRSS records the hookflow worker's RSS about once a second for the
// whole run (the "flat over a long run" check) and returns the scenario's
// worker RSS now.
func (r *runner) sampleRSS(sc *scenario) float64 {
	if time.Since(r.lastRSS) >= time.Second {
		r.lastRSS = time.Now()
		if c := r.s.byName[procWorker]; c != nil {
			r.rss = append(r.rss, RSSPoint{Seconds: time.Since(r.began).Seconds(), MB: rssMB(c.pid())})
		}
	}
	return r.workerRSS(sc)
}

// The databases whose activity is counted: Temporal's persistence and
// visibility, hookflow's ledger, the receivers' (the fan-out receivers'
// databases, named hookflow_receiver_fan…, are counted as hookflow_receiver).
var pgDatabases = []string{"temporal", "temporal_visibility", "hookflow", "hookflow_receiver"}

// pgCounters is what pg_stat_database says about one database.
type pgCounters struct {
	commits float64 // committed transactions (≈ round trips that write or read)
	rows    float64 // rows inserted, updated and deleted
}

// pgSnapshot is pgCounters per database.
type pgSnapshot map[string]pgCounters

func (s pgSnapshot) sub(before pgSnapshot) pgSnapshot {
	out := pgSnapshot{}
	for k, v := range s {
		b := before[k]
		out[k] = pgCounters{commits: v.commits - b.commits, rows: v.rows - b.rows}
	}
	return out
}

// pgStats reads pg_stat_database; the bench's own transactions on the
// receiver's database (this one included) are taken out.
func (r *runner) pgStats(ctx context.Context) (pgSnapshot, error) {
	own := r.ownQueries.Add(1)
	names := append([]string(nil), pgDatabases...)
	for _, f := range r.s.fanOut {
		names = append(names, f.database)
	}
	rows, err := r.s.receiverDB.Query(ctx,
		"SELECT datname, xact_commit, tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = ANY($1)", names)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_database: %w", err)
	}
	snap := pgSnapshot{}
	var name string
	var commits, written int64
	_, err = pgx.ForEachRow(rows, []any{&name, &commits, &written}, func() error {
		if strings.HasPrefix(name, "hookflow_receiver") {
			name = "hookflow_receiver"
		}
		c := snap[name]
		snap[name] = pgCounters{commits: c.commits + float64(commits), rows: c.rows + float64(written)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_database: %w", err)
	}
	if c, ok := snap["hookflow_receiver"]; ok {
		c.commits -= float64(own)
		snap["hookflow_receiver"] = c
	}
	return snap, nil
}

// measureBackground records what the idle stack spends per second (pollers,
// Temporal's queue readers, membership heartbeats), so per-event figures of
// short rounds can be read against it.
func (r *runner) measureBackground(ctx context.Context, d time.Duration) error {
	r.p.logf("measuring the idle stack's background load for %s", d)
	cpu0 := r.s.cpu()
	pg0, err := r.pgStats(ctx)
	if err != nil {
		return err
	}
	if err := sleep(ctx, d); err != nil {
		return err
	}
	cpu := r.s.cpu().sub(cpu0)
	pg1, err := r.pgStats(ctx)
	if err != nil {
		return err
	}
	pg := pg1.sub(pg0)
	r.background = Background{Seconds: d.Seconds(), CPUPerSec: map[string]float64{}, PostgresPerSec: map[string]PGPerEvent{}}
	for k, v := range cpu {
		r.background.CPUPerSec[k] = v / d.Seconds()
	}
	for k, v := range pg {
		r.background.PostgresPerSec[k] = PGPerEvent{Transactions: v.commits / d.Seconds(), RowsWritten: v.rows / d.Seconds()}
	}
	return nil
}

// roundSize is how many of events the given round (1-based) of rounds sends:
// an equal share, the last round taking the remainder.
func roundSize(events, rounds, round int) int {
	per := events / rounds
	if round == rounds {
		return events - per*(rounds-1)
	}
	return per
}
