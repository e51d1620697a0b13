package chaos

import (
	"context"
	"fmt"
	"log/slog"
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
	KindFlap: "flaps", KindKillBroker: "broker_kills",
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
	for kind, c := range t.n {
		if strings.Contains(kind, ":") {
			continue // a breakdown of a kind ("kill_broker:nats"), counted in the kind
		}
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
	if kind == KindKillBroker {
		var each []string
		for _, b := range brokerKinds {
			each = append(each, fmt.Sprintf("%s %d", b, t.count(kind+":"+b, injected)))
		}
		f += " (" + strings.Join(each, ", ") + ")"
	}
	if kind == KindRestartPostgres || kind == KindRestartTemporal || kind == KindKillBroker {
		f += fmt.Sprintf(" %s_failures=%d", strings.TrimSuffix(label, "s"), t.count(kind, failed))
	}
	return f
}

// injector carries out the timed fault schedule: it kills and restarts the
// stack's processes, switches the proxy's 5xx bursts and the flapping
// endpoint's outages, and has the operator
// press its buttons at the planned times. It tallies what became of each
// fault, and makes the faults line from the tally and what the proxy, the
// operator and the stack counted.
type injector struct {
	st       *stack
	op       *operator
	tally    *tally
	logger   *slog.Logger
	progress *progress
}

func newInjector(st *stack, op *operator, logger *slog.Logger, out *progress) *injector {
	return &injector{st: st, op: op, tally: newTally(), logger: logger, progress: out}
}

// run carries out the timed schedule, its times counted from phase0. The
// faults that wait for something (a Temporal server coming back, a dead
// letter to click on, a Temporal call during its restart) go on in the
// background, so the schedule keeps its times; it returns when they are
// all over.
func (f *injector) run(ctx context.Context, phase0 time.Time, plan []Action) {
	for _, a := range plan {
		f.logger.Info("planned fault", "at", a.At.Round(100*time.Millisecond).String(), "fault", a.String())
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, a := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(phase0.Add(a.At))):
		}
		switch a.Kind {
		case KindKillWorker, KindBurst, KindFlap, KindRestartPostgres:
			o, note := f.inject(ctx, a)
			f.record(phase0, a, o, note)
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, note := f.inject(ctx, a)
				f.record(phase0, a, o, note)
			}()
		}
	}
}

// inject carries out one fault and says what became of it, and how.
func (f *injector) inject(ctx context.Context, a Action) (outcome, string) {
	t0 := time.Now()
	switch a.Kind {
	case KindKillWorker:
		if !f.st.workers[a.Worker].kill() {
			return skipped, "it was not running (between a crash and its restart)"
		}
		return injected, ""
	case KindRestartPostgres:
		how, err := f.st.pg.restart(ctx)
		if err != nil {
			return failed, err.Error()
		}
		return injected, fmt.Sprintf("%s, back in %s", how, time.Since(t0).Round(100*time.Millisecond))
	case KindRestartTemporal:
		temporal := f.st.temporal
		starts := temporal.startCount()
		if !temporal.killFor(a.For) {
			return skipped, "it was not running"
		}
		// The supervisor starts it again on the same ports, after a.For.
		if err := temporal.waitNextStart(ctx, starts, "temporal server running", 3*time.Minute); err != nil {
			if ctx.Err() != nil {
				return injected, "the run ended before it was back"
			}
			return failed, err.Error()
		}
		return injected, fmt.Sprintf("SIGKILL, down %s, back in %s", a.For.Round(100*time.Millisecond), time.Since(t0).Round(100*time.Millisecond))
	case KindBurst:
		proxy := f.st.proxy
		proxy.SetBurst(true, a.RetryAfter)
		time.AfterFunc(a.For, func() { proxy.SetBurst(false, false) })
		return injected, ""
	case KindFlap:
		proxy := f.st.proxy
		proxy.SetFlapDown(true)
		time.AfterFunc(a.For, func() { proxy.SetFlapDown(false) })
		return injected, ""
	case KindKillBroker:
		return f.killBroker(ctx, a)
	case KindDoubleClick:
		return f.op.doubleClick(ctx, a)
	case KindTerminateEvent, KindResetEvent:
		id, err := f.op.pickEvent(ctx, a.Pick)
		if err != nil {
			return skipped, err.Error()
		}
		if a.Kind == KindTerminateEvent {
			return f.op.terminate(ctx, id)
		}
		return f.op.reset(ctx, id, a.Pick)
	case KindTerminateSequencer, KindResetSequencer:
		id, err := f.op.pickSequencer(ctx, a.Pick)
		if err != nil {
			return skipped, err.Error()
		}
		if a.Kind == KindTerminateSequencer {
			return f.op.terminate(ctx, id)
		}
		return f.op.reset(ctx, id, a.Pick)
	}
	return skipped, "unknown fault"
}

// record counts a fault and says what became of it: in the log always, in
// the progress when it did not take place or there is something to say of
// it (how long a restart took, what an operator's action hit).
func (f *injector) record(phase0 time.Time, a Action, o outcome, note string) {
	f.tally.add(a.Kind, o)
	if a.Kind == KindKillBroker {
		f.tally.add(a.Kind+":"+a.Broker, o) // each broker's kills, for the line
	}
	at := time.Since(phase0).Round(100 * time.Millisecond).String()
	switch o {
	case injected:
		f.logger.Info("fault injected", "fault", a.String(), "at", at, "note", note)
		if note != "" {
			f.progress.printf("%s: %s", a, note)
		}
	case skipped:
		f.logger.Info("fault skipped", "fault", a.String(), "at", at, "why", note)
		f.progress.printf("%s skipped (not counted): %s", a, note)
	case failed:
		f.logger.Error("fault failed", "fault", a.String(), "at", at, "error", note)
		f.progress.printf("%s FAILED: %s", a, note)
	}
}

// total returns the number of faults that took place: those of the
// schedule and the proxy's per-request ones.
func (f *injector) total() int {
	ps := f.st.proxy.Stats()
	return f.tally.injected() + int(ps.Burst503+ps.Latency+ps.LostAcks+ps.DownAnswers+ps.FlapAnswers)
}

// line is the breakdown of the faults that took place, the operator's
// buttons among them, and of the processes that exited on their own.
func (f *injector) line() string {
	ps := f.st.proxy.Stats()
	t := f.tally
	c := f.op.clickCounts()
	exits, who := f.st.unexpectedExits()
	b := fmt.Sprintf("faults: %s %s %s %s (503s=%d) held_past_timeout=%d lost_acks=%d down_endpoint_answers=%d %s (answers while down=%d)"+
		" %s | operator: %s [replay+skip %d; 202+409 %d, both 202 %d, skips won %d] %s %s %s %s | unexpected_exits=%d %s",
		t.field(KindKillWorker), t.field(KindRestartPostgres), t.field(KindRestartTemporal), t.field(KindBurst), ps.Burst503,
		ps.Latency, ps.LostAcks, ps.DownAnswers, t.field(KindFlap), ps.FlapAnswers, t.field(KindKillBroker),
		t.field(KindDoubleClick), c.withSkip, c.oneWon, c.bothWon, c.skipsWon,
		t.field(KindTerminateEvent), t.field(KindTerminateSequencer), t.field(KindResetEvent), t.field(KindResetSequencer),
		exits, who)
	return strings.TrimSpace(b)
}
