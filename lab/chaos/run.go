package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// run is one chaos run: the stack it started and the parts that act on it
// and watch it. Each part keeps its own state; run only wires them
// together and runs the phases: start the stack, post the workload under
// the fault schedule, wait for quiet, check.
type run struct {
	cfg      Config
	wl       *Workload
	progress *progress
	stack    *stack
	producer *producer
	operator *operator
	faults   *injector
	observer *observer
	// breaker is what the checks read of the flapping endpoint's breaker
	// (nil: no endpoint flapped), for the faults line; sit what they read
	// of the situations.
	breaker *BreakerObserved
	sit     *SituationsObserved
}

// Run starts the stack, runs the workload under the fault schedule, waits for
// quiet and checks the invariants. The error is for a run that could not be
// carried out (a service that would not start); broken invariants are in
// the Result's Verdict.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := validate(&cfg); err != nil {
		return Result{}, err
	}
	out := &progress{w: cfg.Stderr, began: time.Now()}
	dir, logs, logger, closeLog, err := openRunDir(cfg.DataDir)
	if err != nil {
		return Result{}, err
	}
	defer closeLog()

	wl, err := NewWorkload(WorkloadConfig{
		Seed: cfg.Seed, Events: cfg.Events, Correlations: cfg.Correlations, DuplicateRate: cfg.DuplicateRate, Reorder: 5,
		Voids: max(1, cfg.Correlations/16), Tenants: cfg.tenantList(),
	})
	if err != nil {
		return Result{}, err
	}
	// C (paid orders and invoices) is down from the start until its lanes'
	// heads have dead-lettered; A and B go on meanwhile. B (every order)
	// flaps during the fault phase. A (every type), neither of those, is
	// paused for a while; S is slow and D deleted mid-run. The calm run
	// keeps the situations: they are an operator's and a producer's doing,
	// not faults, and its lanes need the voids.
	// Each tenant has all five (ForTenants); the faults and situations act
	// on the first tenant's, whose indexes are these, and the other
	// tenants' lanes must go on beside them, their own order kept, sharing
	// the receivers.
	wl.Subscribers = ForTenants(append(ChaosSubscribers(), SituationSubscribers()...), wl.Tenants)
	cfg.Subscribers, cfg.Down, cfg.Flapping = wl.Subscribers, 2, 1
	cfg.Situations = &Situations{Paused: 0, Slow: 3, Deleted: 4}
	if cfg.Calm {
		cfg.Down = -1
	}

	st := newStack(cfg, dir, logs, logger, out)
	var torn sync.Once
	tearDown := func() { torn.Do(st.stop) }
	defer tearDown()
	if err := st.start(ctx); err != nil {
		return Result{}, err
	}
	out.printf("stack up in %s: postgres, temporal, api (%s, token in %s), %d workers, %d tenants (%s), %d receivers, %d endpoints (%s), fault proxy, %d broker destinations (%s); logs in %s",
		time.Since(out.began).Round(100*time.Millisecond), st.client.BaseURL(), st.tokenFile, cfg.Workers, len(wl.Tenants), strings.Join(wl.Tenants, ", "),
		len(st.receivers), len(st.recv), subscriberLine(wl.Subscribers[:len(wl.Subscribers)/len(wl.Tenants)]), len(st.brokers.ids()), brokerLine(cfg.Brokers), logs)

	r := newRun(cfg, wl, st, logger, out)
	if err := r.exercise(ctx); err != nil {
		return Result{}, err
	}
	v, err := r.check(ctx)
	if err != nil {
		return Result{}, err
	}
	res := r.result(v)
	tearDown()
	out.printf("%s", st.cpuLine(len(wl.Events)))
	fmt.Fprintln(cfg.Stdout, res.Faults)
	fmt.Fprintln(cfg.Stdout, res.Tenants)
	fmt.Fprintln(cfg.Stdout, res.Summary)
	if !v.OK() {
		for _, d := range v.Details {
			fmt.Fprintln(cfg.Stderr, "chaos: violation: "+d)
		}
		fmt.Fprintf(cfg.Stderr, "chaos: logs are in %s\n", logs)
	}
	return res, nil
}

// newRun puts the parts that act on a started stack together.
func newRun(cfg Config, wl *Workload, st *stack, logger *slog.Logger, out *progress) *run {
	op := newOperator(st, wl, logger, out)
	return &run{
		cfg: cfg, wl: wl, progress: out, stack: st,
		producer: newProducer(st.tenantAPI, wl, cfg.Posters, logger),
		operator: op,
		faults:   newInjector(st, op, logger, out),
		observer: newObserver(st, wl, logger, out),
	}
}

// exercise posts the workload under the fault schedule, then stops the
// faults and waits for quiet.
func (r *run) exercise(ctx context.Context) error {
	cfg := r.cfg
	phase0 := time.Now()
	phaseEnd := phase0.Add(cfg.FaultPhase)
	pc := PlanConfig{Seed: cfg.Seed, Phase: cfg.FaultPhase, Workers: cfg.Workers,
		KillEvery: cfg.KillEvery, BurstEvery: cfg.BurstEvery, OperatorEvery: cfg.OperatorEvery, Flap: cfg.Flapping >= 0}
	if cfg.Brokers {
		pc.Brokers, pc.BrokerEvery = brokerKinds, cfg.BrokerEvery
	}
	plan := Plan(pc)
	if cfg.Calm {
		plan = nil
		r.stack.proxy.SetFaults(false)
		r.operator.heal(ctx, phase0)
	}

	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBG(); wg.Wait() }()
	spawn := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }

	postsDone := make(chan struct{})
	spawn(func() {
		defer close(postsDone)
		r.producer.postAll(bg, time.Duration(float64(cfg.FaultPhase)*0.7), phaseEnd.Add(cfg.QuietTimeout/2))
	})
	spawn(func() { r.faults.run(bg, phase0, plan) })
	if !cfg.Calm {
		spawn(func() { r.operator.healDown(bg, phase0, cfg.RecoveryWindow, phaseEnd.Add(cfg.QuietTimeout/2)) })
	}
	spawn(func() { r.operator.replayEvery(bg, max(cfg.RecoveryWindow, 10*time.Second)) })
	spawn(func() { r.situations(bg, phase0) })
	spawn(func() { r.progressLoop(bg) })

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(phaseEnd)):
	}
	// The timed faults end here; the per-request ones (held requests, lost
	// acks) go on until quiet, so every delivery of the run is exposed to
	// them however slowly the machine works through the backlog.
	r.progress.printf("fault phase over: no more kills, restarts, bursts or operator's actions; waiting for the last posts")
	r.stack.proxy.SetBurst(false, false)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-postsDone:
	}
	// The down endpoint stays down (healDown) until its heads have
	// dead-lettered, even past the fault phase on a slow machine.
	return r.waitQuiet(ctx)
}

// situations carries out the run's situations at fixed points of the fault
// phase, one after another, while events are still posted: the pause at
// 20 % (so that events of the paused endpoint's types arrive while it is
// disabled), the delete at 45 % (with part of the deleted endpoint's events
// still to come, and some of its deliveries in flight), the voids at 55 %
// (with the lost sequences' successors waiting on them), each voided
// sequence then posted again.
func (r *run) situations(ctx context.Context, phase0 time.Time) {
	sit := r.cfg.situations()
	at := func(frac float64) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(phase0.Add(time.Duration(frac * float64(r.cfg.FaultPhase))))):
			return true
		}
	}
	if sit.Paused >= 0 && at(0.20) {
		r.operator.pause(ctx, sit.Paused, pauseFor)
	}
	if sit.Deleted >= 0 && at(0.45) {
		r.operator.deleteEndpoint(ctx, sit.Deleted, r.producer.acceptedSoFar())
	}
	if len(r.wl.Voided) > 0 && at(0.55) {
		for _, corr := range slices.Sorted(maps.Keys(r.wl.Voided)) {
			r.operator.void(ctx, corr, r.wl.Voided[corr])
		}
	}
}

// waitQuiet waits until every event is delivered or skipped (nothing in
// flight, no dead letter open, none dead-lettered with a replay or skip
// claimed but not carried out), replaying what dead-letters meanwhile, or
// until QuietTimeout. It also ends when nothing has moved for a while:
// longer than a Temporal recovery, a recovery window, and a few rounds of
// the API's repair sweep (which looks at a head after it has not moved for
// StuckAfter), so that whatever is still stuck then is what the checks
// report stranded, not a timeout.
func (r *run) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.QuietTimeout)
	stall := max(3*time.Minute, 4*r.cfg.RecoveryWindow, 4*(apiStuckAfter+apiSweepInterval))
	lastReplay, lastMove, lastSeen := time.Time{}, time.Now(), ""
	r.progress.printf("waiting for quiet (at most %s, or %s without progress)", r.cfg.QuietTimeout, stall)
	for {
		states, open, err := r.observer.counts(ctx)
		if err == nil && pending(states) == 0 && open == 0 && states[stateDeadLettered] == 0 {
			r.progress.printf("quiet after %s: %d delivered, %d skipped", time.Since(r.progress.began).Round(time.Second), states[stateDelivered], states[stateSkipped])
			break
		}
		if err == nil {
			if seen := fmt.Sprint(states, open); seen != lastSeen {
				lastSeen, lastMove = seen, time.Now()
			}
		}
		if err == nil && open > 0 && time.Since(lastReplay) > 5*time.Second {
			r.operator.replayAll(ctx)
			lastReplay = time.Now()
		}
		if time.Now().After(deadline) {
			r.progress.printf("no quiet within %s; checking what there is", r.cfg.QuietTimeout)
			break
		}
		if time.Since(lastMove) > stall {
			if probe := r.nextProbe(ctx); probe.After(lastMove) {
				// A circuit that backed off (up to five minutes for a flapper)
				// holds its lanes until its probe: that is the wait it was
				// built for, so the probe, not the stall, is the last move.
				lastMove = probe
				r.progress.printf("nothing moved for %s, but a circuit probes at %s; waiting for it", stall, probe.Format(time.TimeOnly))
				continue
			}
			r.progress.printf("nothing moved for %s; checking what there is", stall)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	// Requests the proxy still holds may yet reach the receiver.
	r.stack.proxy.Wait(r.cfg.DeliveryTimeout + 15*time.Second)
	return nil
}

// nextProbe is the latest next probe of the endpoints' open circuits, as
// the API shows them; zero when none is open or it cannot tell.
func (r *run) nextProbe(ctx context.Context) time.Time {
	var latest time.Time
	for _, ep := range append(slices.Clone(r.operator.st.endpoints.ids), r.operator.st.brokers.ids()...) {
		sr, err := r.operator.st.apiFor(ep).EndpointStatsWithResponse(ctx, ep, nil)
		if err != nil || sr.JSON200.Circuit.State == "closed" {
			continue
		}
		h := sr.JSON200
		if h.Circuit.NextProbeAt.After(latest) {
			latest = h.Circuit.NextProbeAt
		}
	}
	return latest
}

// The API's repair sweep, as the stack runs it (starter.Config defaults):
// a head that has not moved for apiStuckAfter is looked at on the next
// sweep.
const (
	apiStuckAfter    = 30 * time.Second
	apiSweepInterval = time.Second
)

func (r *run) progressLoop(ctx context.Context) {
	last, lastAt := -1, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		last, lastAt = r.progressLine(ctx, last, lastAt)
	}
}

// progressLine prints one line; last and lastAt are the delivered count at
// the previous line, for the rate.
func (r *run) progressLine(ctx context.Context, last int, lastAt time.Time) (int, time.Time) {
	line := fmt.Sprintf("posted %d/%d (accepted %d/%d)", r.producer.posted.Load(), len(r.wl.Posts), r.producer.acceptedCount(), len(r.wl.Events))
	states, open, err := r.observer.counts(ctx)
	if err != nil {
		line += " | hookflow db unavailable"
	} else {
		d := states[stateDelivered]
		rate := ""
		if last >= 0 {
			rate = fmt.Sprintf(" (%.1f/s)", float64(d-last)/time.Since(lastAt).Seconds())
		}
		line += fmt.Sprintf(" | deliveries: delivered %d%s in-flight %d dead-lettered %d (open %d) skipped %d", d, rate, pending(states), states[stateDeadLettered], open, states[stateSkipped])
		last, lastAt = d, time.Now()
		if open > 0 {
			r.observer.noteStrayDeadLetters(ctx)
		}
	}
	r.progress.printf("%s | faults %d", line, r.faults.total())
	return last, lastAt
}

// check puts together what the run's parts saw (the producer's accepted
// and rejected posts, the operator's skips and double claims, the restarts
// that did not come back) with what the observer reads once quiet, and
// holds it all against the invariants.
func (r *run) check(ctx context.Context) (Verdict, error) {
	o := Observed{PostgresRestartFailures: r.faults.tally.count(KindRestartPostgres, failed), Unverified: r.stack.unverified(),
		BrokerKillFailures: r.faults.tally.count(KindKillBroker, failed)}
	o.Accepted, o.Rejected = r.producer.results()
	var leftOpen []LeftOpen
	o.Skipped, o.DoubleClaims, leftOpen = r.operator.results()
	if err := r.observer.read(ctx, &o); err != nil {
		return Verdict{}, err
	}
	if o.Breaker != nil {
		o.Breaker.LeftOpen = leftOpen
	}
	r.breaker = o.Breaker
	if err := r.readSituations(ctx, &o); err != nil {
		return Verdict{}, err
	}
	if r.observer.downDeadLetters() == 0 && !r.cfg.Calm {
		r.progress.printf("warning: no delivery to the down endpoint dead-lettered; that fault did not happen in this run")
	}
	return Check(r.wl, o), nil
}

// readSituations puts together what the operator, the producer, the proxy
// and the ledger say of the situations.
func (r *run) readSituations(ctx context.Context, o *Observed) error {
	sit := r.cfg.situations()
	s := r.operator.situations()
	s.Paused, s.Slow, s.Deleted = sit.Paused, sit.Slow, sit.Deleted
	if s.DeleteDone {
		s.PostedAfter = r.producer.firstTriedAfter(s.DeletedAt)
	}
	s.SkippedSeen = r.stack.proxy.SkippedSeen()
	s.SlowHeld, s.SlowMost = r.stack.proxy.SlowStats()
	s.SlowInFlight = slowInFlight
	if sit.Paused >= 0 {
		var err error
		if s.PauseDeadLetters, s.PauseResumed, err = r.observer.pauseDeadLetters(ctx, r.stack.endpoints.ids[sit.Paused]); err != nil {
			return err
		}
	}
	r.sit = &s
	o.Situations = &s
	return nil
}

// result makes the two lines a run prints: the faults that took place and
// the verdict.
func (r *run) result(v Verdict) Result {
	total := r.faults.total()
	ps := r.stack.proxy.Stats()
	breakdown := r.faults.line() + fmt.Sprintf(" | dead letters on the down endpoint=%d, replays=%d, open dead letters seen of deliveries not dead-lettered=%d"+
		" | posts=%d (duplicates %d; tries %d, unanswered %d, 5xx %d) | deliveries through the proxy=%d, parked answers=%d, refused for double clicks=%d",
		r.observer.downDeadLetters(), r.operator.replays(), r.observer.strays(), len(r.wl.Posts), r.wl.Duplicates,
		r.producer.tries.Load(), r.producer.unanswered.Load(), r.producer.answered5xx.Load(), ps.Requests, ps.Parked, ps.Refused)
	if b := r.breaker; b != nil {
		breakdown += fmt.Sprintf(" | flapping endpoint %s: outages=%d (in flight as each began %v), circuit opened=%d closed=%d, attempts while down=%d"+
			" (an unbroken retry schedule: at least %d), auto-replayed=%d, left open for the operator=%d, circuit once quiet %s",
			r.wl.Subscribers[r.cfg.Flapping].Name, len(b.Outages), b.HeadsAtOutage, b.Opens, len(b.Spells), b.AttemptsWhileDown,
			b.Unbroken(), b.AutoReplayed, len(b.LeftOpen), b.FinalState)
	}
	sit := r.cfg.situations()
	names := func(ep int) string {
		if ep < 0 {
			return "none"
		}
		return r.wl.Subscribers[ep].Name
	}
	if s := r.sit; s != nil {
		breakdown += fmt.Sprintf(" | situations: paused %s for %s (its dead letters of the pause=%d, replayed by hookflow=%d, the enabling answered %d, left open=%d)"+
			", slow %s (max_in_flight %d; requests held=%d, most at once=%d), deleted %s at %s (sent before=%d, skipped dead letters=%d, then GET %d; delivered=%d skipped=%d never routed=%d)"+
			", voided %d (posted again: 409 %d)",
			names(sit.Paused), s.PausedFor.Round(100*time.Millisecond), s.PauseDeadLetters, s.PauseResumed, s.PauseResumedAnswer, len(s.PauseLeftOpen),
			names(sit.Slow), s.SlowInFlight, s.SlowHeld, s.SlowMost,
			names(sit.Deleted), s.DeletedAt.Format(time.TimeOnly), len(s.SentBefore), s.DeleteSkippedDeadLetters, s.GoneStatus, v.DeletedDelivered, v.DeletedSkipped, v.DeletedUnrouted,
			v.Voids, v.Void409s)
	}
	wall := time.Since(r.progress.began).Round(time.Second)
	tenants, passed := tenantLine(v.Tenants)
	summary := fmt.Sprintf("tenants=%d correlations_passed=%d/%d cross_tenant=%d events=%d deliveries=%d lanes=%d applied=%d dead_lettered=%d lost=%d duplicates=%d order_violations=%d faults=%d stuck=%d mismatches=%d not_accepted=%d"+
		" skipped=%d stranded=%d double_claims=%d breaker=%d breaker_opens=%d breaker_closes=%d attempts_while_down=%d unbroken_retries=%d postgres_restart_failures=%d unverified=%d"+
		" situations=%d paused=%s pauses=%d pause_dead_letters=%d pause_resumed=%d voids=%d void_409s=%d deleted=%s deletes=%d deleted_delivered=%d deleted_skipped=%d deleted_unrouted=%d slow=%s slow_held=%d"+
		" broker_destinations=%d broker_lanes=%d broker_delivered=%d broker_failed_attempts=%d broker_dead_lettered=%d broker_missing=%d broker_repeated=%d broker_out_of_order=%d"+
		" broker_chain_breaks=%d broker_bad_signatures=%d broker_unfinished=%d broker_kills=%d broker_kill_failures=%d"+
		" filtered_endpoints=%d filtered_out=%d filtered_delivered=%d filtered_violations=%d"+
		" seed=%d wall=%s",
		len(v.Tenants), passed, len(r.wl.Correlations), v.CrossTenant, v.Events, v.Deliveries, v.Lanes, v.Applied, v.DeadLettered, v.Lost, v.Duplicates, v.OrderViolations, total, v.Stuck, v.Mismatches, v.NotAccepted,
		v.Skipped, v.Stranded, v.DoubleClaims, v.Breaker, v.BreakerOpens, v.BreakerCloses, v.AttemptsWhileDown, v.Unbroken, v.PostgresRestartFailures, v.Unverified,
		v.Situations, names(sit.Paused), v.Pauses, v.PauseDeadLetters, v.PauseResumed, v.Voids, v.Void409s, names(sit.Deleted), v.Deletes, v.DeletedDelivered, v.DeletedSkipped, v.DeletedUnrouted,
		names(sit.Slow), v.SlowHeld,
		len(r.stack.brokers.ids()), v.BrokerLanes, v.BrokerDelivered, v.BrokerFailedAttempts, v.BrokerDeadLettered, v.BrokerMissing, v.BrokerRepeated, v.BrokerOutOfOrder,
		v.BrokerChainBreaks, v.BrokerBadSignatures, v.BrokerUnfinished, r.faults.tally.count(KindKillBroker, injected), v.BrokerKillFailures,
		v.FilteredEndpoints, v.FilteredOut, v.FilteredDelivered, v.FilteredViolations,
		r.cfg.Seed, wall)
	return Result{Verdict: v, Faults: breakdown, Tenants: tenants, Summary: summary, Wall: wall}
}

// tenantLine says, per tenant, how many of its correlations (sequences
// of events) and lanes passed every check, and how many deliveries its
// receivers' lanes applied; and how many correlations passed in all.
func tenantLine(tvs []TenantVerdict) (string, int) {
	parts := make([]string, len(tvs))
	passed := 0
	for i, t := range tvs {
		parts[i] = fmt.Sprintf("%s: correlations passed %d/%d, lanes passed %d/%d, applied %d", t.Tenant, t.Passed, t.Correlations, t.LanesPassed, t.Lanes, t.Applied)
		passed += t.Passed
	}
	return "per tenant: " + strings.Join(parts, " | "), passed
}

// subscriberLine names the endpoints and what they subscribe to:
// "A [*], B [order.*], …".
func subscriberLine(subs []Subscriber) string {
	parts := make([]string, len(subs))
	for i, s := range subs {
		parts[i] = fmt.Sprintf("%s %v", s.Name, s.EventTypes)
		if s.Filter != nil {
			parts[i] += fmt.Sprintf(" filter %s", s.Filter.JSON())
		}
	}
	return strings.Join(parts, ", ")
}

// brokerLine names each tenant's broker destinations and what they
// subscribe to: "nats [order.created], …", or "none".
func brokerLine(on bool) string {
	if !on {
		return "none"
	}
	var parts []string
	for _, b := range BrokerSubscribers() {
		parts = append(parts, fmt.Sprintf("%s %v", b.Kind, b.EventTypes))
	}
	return strings.Join(parts, ", ") + " per tenant"
}

// progress writes the run's progress lines to Config.Stderr, each stamped
// with the time since the run began. The parts of the run write from
// several goroutines; the lock keeps their lines whole.
type progress struct {
	w     io.Writer
	began time.Time
	mu    sync.Mutex
}

func (p *progress) printf(format string, args ...any) {
	el := time.Since(p.began).Round(time.Second)
	line := fmt.Sprintf("chaos %s: %s\n", el, fmt.Sprintf(format, args...))
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.w, line)
}

// openRunDir prepares the data folder (prepareDir) and opens the run's own
// log, chaos.log in its logs folder; closeLog closes it.
func openRunDir(dataDir string) (dir, logs string, logger *slog.Logger, closeLog func(), err error) {
	dir, logs, err = prepareDir(dataDir)
	if err != nil {
		return "", "", nil, nil, err
	}
	logf, err := os.OpenFile(filepath.Join(logs, "chaos.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", "", nil, nil, err
	}
	return dir, logs, slog.New(slog.NewTextHandler(logf, nil)), func() { _ = logf.Close() }, nil
}
