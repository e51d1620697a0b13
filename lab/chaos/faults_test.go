package chaos

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kill takes place only when the process runs: one that has exited (and
// is not restarted yet) is no fault.
func TestProcKillOnlyWhatRuns(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep binary: %v", err)
	}
	dir := t.TempDir()
	p := newProc("sleeper", sleep, []string{"60"}, nil, filepath.Join(dir, "sleeper.log"))
	if p.kill() {
		t.Fatal("kill of a process never started reported true")
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(time.Second) })
	if !p.kill() {
		t.Fatal("kill of a running process reported false")
	}
	if p.running() {
		t.Fatal("still running after kill")
	}
	if p.kill() {
		t.Fatal("kill of a process that is not running (no supervisor restarted it) reported true")
	}

	// With its supervisor, the next incarnation is killable again.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	go p.supervise(ctx, func(name, how string) { t.Errorf("unexpected exit of %s: %s", name, how) })
	starts := p.startCount()
	if !p.kill() {
		t.Fatal("kill of the running incarnation reported false")
	}
	if err := p.waitNextStart(ctx, starts, "", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.kill() {
		t.Fatal("kill of the restarted incarnation reported false")
	}
}

// Only the faults that took place are counted; the skipped ones and a
// restart that did not come back are shown apart.
func TestTallyCountsWhatTookPlace(t *testing.T) {
	t.Parallel()
	tl := newTally()
	tl.add(KindKillWorker, injected)
	tl.add(KindKillWorker, skipped)
	tl.add(KindKillWorker, injected)
	tl.add(KindRestartPostgres, failed)
	tl.add(KindRestartTemporal, injected)
	tl.add(KindResetSequencer, skipped)
	tl.add(KindKillBroker, injected)
	tl.add(KindKillBroker+":"+BrokerRedis, injected)
	if n := tl.injected(); n != 4 {
		t.Errorf("injected %d, want 4", n)
	}
	for kind, want := range map[string]string{
		KindKillWorker:      "worker_kills=2 (skipped 1)",
		KindRestartPostgres: "postgres_restarts=0 postgres_restart_failures=1",
		KindRestartTemporal: "temporal_restarts=1 temporal_restart_failures=0",
		KindResetSequencer:  "reset_sequencers=0 (skipped 1)",
		KindTerminateEvent:  "terminated_events=0",
		KindKillBroker:      "broker_kills=1 (nats 0, redis 1) broker_kill_failures=0",
	} {
		if got := tl.field(kind); got != want {
			t.Errorf("field(%s) = %q, want %q", kind, got, want)
		}
	}
	for kind := range faultLabels {
		if !strings.Contains(tl.field(kind), "=") {
			t.Errorf("field(%s) = %q", kind, tl.field(kind))
		}
	}
}
