package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// outcome is what became of one fault of the schedule. Only the faults
// that took place count as injected.
type outcome int

const (
	// injected: the fault took place.
	injected outcome = iota
	// skipped: there was nothing to act on (a worker that was not running,
	// no dead letter to double-click, a workflow that had ended), so the
	// fault did not take place.
	skipped
	// failed: the fault was begun and the stack did not come back from it
	// (a Postgres that would not start again).
	failed
)

// faultLabels name the kinds in the faults line.
var faultLabels = map[string]string{
	KindKillWorker: "worker_kills", KindRestartPostgres: "postgres_restarts", KindRestartTemporal: "temporal_restarts",
	KindBurst: "5xx_bursts", KindDoubleClick: "double_clicks", KindTerminateEvent: "terminated_events",
	KindTerminateSequencer: "terminated_sequencers", KindResetEvent: "reset_events", KindResetSequencer: "reset_sequencers",
}

// tally counts the faults of the schedule by kind and outcome.
type tally struct {
	mu sync.Mutex
	n  map[string]*[3]int // kind → count by outcome
}

func newTally() *tally { return &tally{n: map[string]*[3]int{}} }

func (t *tally) add(kind string, o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[kind] == nil {
		t.n[kind] = &[3]int{}
	}
	t.n[kind][o]++
}

func (t *tally) count(kind string, o outcome) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.n[kind]; c != nil {
		return c[o]
	}
	return 0
}

// injected returns how many faults took place.
func (t *tally) injected() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	for _, c := range t.n {
		total += c[injected]
	}
	return total
}

// field is a kind's part of the faults line: "worker_kills=8", with
// " (skipped 1)" when some did not take place, and a restart's failures,
// which are always shown.
func (t *tally) field(kind string) string {
	label := faultLabels[kind]
	f := fmt.Sprintf("%s=%d", label, t.count(kind, injected))
	if n := t.count(kind, skipped); n > 0 {
		f += fmt.Sprintf(" (skipped %d)", n)
	}
	if kind == KindRestartPostgres || kind == KindRestartTemporal {
		f += fmt.Sprintf(" %s_failures=%d", strings.TrimSuffix(label, "s"), t.count(kind, failed))
	}
	return f
}

// runFaults carries out the timed schedule. The faults that wait for
// something (a Temporal server coming back, a dead letter to click on, a
// Temporal call during its restart) go on in the background, so the
// schedule keeps its times; it returns when they are all over.
func (r *run) runFaults(ctx context.Context, plan []Action) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, a := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(r.phase0.Add(a.At))):
		}
		switch a.Kind {
		case KindKillWorker, KindBurst, KindRestartPostgres:
			o, note := r.inject(ctx, a)
			r.record(a, o, note)
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, note := r.inject(ctx, a)
				r.record(a, o, note)
			}()
		}
	}
}

// inject carries out one fault and says what became of it, and how.
func (r *run) inject(ctx context.Context, a Action) (outcome, string) {
	t0 := time.Now()
	switch a.Kind {
	case KindKillWorker:
		if !r.workers[a.Worker].kill() {
			return skipped, "it was not running (between a crash and its restart)"
		}
		return injected, ""
	case KindRestartPostgres:
		how, err := r.pg.restart(ctx)
		if err != nil {
			return failed, err.Error()
		}
		return injected, fmt.Sprintf("%s, back in %s", how, time.Since(t0).Round(100*time.Millisecond))
	case KindRestartTemporal:
		starts := r.temporal.startCount()
		if !r.temporal.kill() {
			return skipped, "it was not running"
		}
		// The supervisor starts it again on the same ports.
		if err := r.temporal.waitNextStart(ctx, starts, "temporal server running", 3*time.Minute); err != nil {
			if ctx.Err() != nil {
				return injected, "the run ended before it was back"
			}
			return failed, err.Error()
		}
		return injected, fmt.Sprintf("SIGKILL, back in %s", time.Since(t0).Round(100*time.Millisecond))
	case KindBurst:
		r.proxy.SetBurst(true, a.RetryAfter)
		time.AfterFunc(a.For, func() { r.proxy.SetBurst(false, false) })
		return injected, ""
	case KindDoubleClick:
		return r.doubleClick(ctx, a)
	case KindTerminateEvent, KindResetEvent:
		id, err := r.pickEvent(ctx, a.Pick)
		if err != nil {
			return skipped, err.Error()
		}
		if a.Kind == KindTerminateEvent {
			return r.terminate(ctx, id)
		}
		return r.reset(ctx, id, a.Pick)
	case KindTerminateSequencer, KindResetSequencer:
		id, err := r.pickSequencer(ctx, a.Pick)
		if err != nil {
			return skipped, err.Error()
		}
		if a.Kind == KindTerminateSequencer {
			return r.terminate(ctx, id)
		}
		return r.reset(ctx, id, a.Pick)
	}
	return skipped, "unknown fault"
}

// record counts a fault and says what became of it: in the log always, in
// the progress when it did not take place or there is something to say of
// it (how long a restart took, what an operator's action hit).
func (r *run) record(a Action, o outcome, note string) {
	r.faults.add(a.Kind, o)
	at := time.Since(r.phase0).Round(100 * time.Millisecond).String()
	switch o {
	case injected:
		r.logger.Info("fault injected", "fault", a.String(), "at", at, "note", note)
		if note != "" {
			r.progressf("%s: %s", a, note)
		}
	case skipped:
		r.logger.Info("fault skipped", "fault", a.String(), "at", at, "why", note)
		r.progressf("%s skipped (not counted): %s", a, note)
	case failed:
		r.logger.Error("fault failed", "fault", a.String(), "at", at, "error", note)
		r.progressf("%s FAILED: %s", a, note)
	}
}

// faultTotals returns the number of faults that took place and their
// breakdown.
func (r *run) faultTotals() (int, string) {
	ps := r.proxy.Stats()
	t := r.faults
	total := t.injected() + int(ps.Burst503+ps.Latency+ps.LostAcks+ps.DownAnswers)
	r.mu.Lock()
	defer r.mu.Unlock()
	var unexpected []string
	exits := 0
	for name, n := range r.unexpected {
		unexpected = append(unexpected, fmt.Sprintf("%s:%d", name, n))
		exits += n
	}
	sort.Strings(unexpected)
	c := r.clicks
	b := fmt.Sprintf("faults: %s %s %s %s (503s=%d) held_past_timeout=%d lost_acks=%d down_endpoint_answers=%d"+
		" | operator: %s [replay+skip %d; 202+409 %d, both 202 %d, skips won %d] %s %s %s %s | unexpected_exits=%d %s",
		t.field(KindKillWorker), t.field(KindRestartPostgres), t.field(KindRestartTemporal), t.field(KindBurst), ps.Burst503,
		ps.Latency, ps.LostAcks, ps.DownAnswers,
		t.field(KindDoubleClick), c.withSkip, c.oneWon, c.bothWon, c.skipsWon,
		t.field(KindTerminateEvent), t.field(KindTerminateSequencer), t.field(KindResetEvent), t.field(KindResetSequencer),
		exits, strings.Join(unexpected, ","))
	return total, strings.TrimSpace(b)
}

// healDown keeps the down endpoint down until every down correlation's head
// has dead-lettered (so at least one recovery window), or until deadline.
func (r *run) healDown(ctx context.Context, deadline time.Time) {
	earliest := r.phase0.Add(r.cfg.RecoveryWindow + 5*time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if time.Now().Before(earliest) {
			continue
		}
		dls, err := r.deadLetters(ctx, r.downEp)
		if err != nil {
			continue
		}
		heads := map[string]bool{}
		for _, d := range dls {
			if d.Sequence == 1 {
				heads[d.CorrelationID] = true
			}
		}
		if len(heads) >= len(r.wl.Down) {
			break
		}
	}
	if ctx.Err() == nil {
		r.heal(ctx)
	}
}

// heal ends the down endpoint's outage and replays its dead letters, as an
// operator would once the receiver is fixed.
func (r *run) heal(ctx context.Context) {
	if r.downHeal.Swap(true) {
		return
	}
	r.proxy.SetDown(false)
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		dls, _ := r.deadLetters(ctx, r.downEp)
		ids, err := r.replay(ctx, r.downEp)
		if err == nil {
			r.noteReplayed(ids)
			r.progressf("down endpoint healed after %s: %d dead letters, %d replayed", time.Since(r.phase0).Round(time.Second), len(dls), len(ids))
			return
		}
		r.logger.Warn("replay of the down endpoint failed; trying again", "error", err)
		time.Sleep(2 * time.Second)
	}
}
