package chaos

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChaosShort builds hookflow and runs `hookflow chaos --short`: the
// whole stack as real processes (Postgres, the Temporal server, the API,
// three workers, a reference receiver per kind of endpoint) under the fault
// schedule and the operator's buttons, events fanned out to three
// endpoints, and asserts that the run found, in every (correlation,
// endpoint) lane, nothing lost, nothing applied twice, no sequence out of
// order and nothing stranded, while the flapping endpoint's circuit breaker
// opened and closed and held its attempts far below an unbroken retry
// schedule's, and the situations went as promised: a paused endpoint lost
// nothing, a slow one's lanes completed, voided sequences held no lane and
// were refused when posted again, and a deleted endpoint's lanes ended;
// and each tenant's NATS JetStream and Redis Streams destinations, read
// back from the brokers, hold every delivered event once and in order
// although each broker was SIGKILLed and restarted mid-run.
func TestChaosShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBudget(t))
	defer cancel()
	// The run stops waiting for quiet after 3 minutes without progress; on
	// a loaded machine it is slower, not wrong, so its overall cap is what
	// the budget leaves after start-up, the fault phase and the posts
	// (about 5 minutes there), and a slow run still ends with a verdict
	// rather than a kill.
	quiet := 20 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		quiet = min(quiet, max(2*time.Minute, time.Until(dl)-5*time.Minute))
	}
	stdout, wall, err := runChaosCommand(ctx, t, "--short", "--quiet-timeout", quiet.Round(time.Second).String())
	var summary, faults, tenants string
	for _, line := range strings.Split(stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "tenants="):
			summary = line
		case strings.HasPrefix(line, "faults:"):
			faults = line
		case strings.HasPrefix(line, "per tenant:"):
			tenants = line
		}
	}
	t.Log(faults)
	t.Log(tenants)
	t.Logf("summary (%s): %s", wall, summary)
	if err != nil {
		t.Fatalf("hookflow chaos --short: %v (ctx: %v)", err, ctx.Err())
	}
	if summary == "" {
		t.Fatalf("no summary line in the output:\n%s", stdout)
	}
	for _, want := range []string{"tenants=3 ", " correlations_passed=50/50 ", " cross_tenant=0 ", " lost=0 ", " duplicates=0 ", " order_violations=0 ", " stuck=0 ", " stranded=0 ", " double_claims=0 ", " unverified=0 ", " breaker=0 ", " situations=0 ", " pauses=1 ", " deletes=1 ",
		" broker_destinations=6 ", " broker_missing=0 ", " broker_repeated=0 ", " broker_out_of_order=0 ", " broker_chain_breaks=0 ",
		" broker_bad_signatures=0 ", " broker_unfinished=0 ", " broker_kill_failures=0 ", " filtered_endpoints=3 ", " filtered_violations=0 "} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q", strings.TrimSpace(want))
		}
	}
	// The filtered endpoints' filters left events out, and delivered the
	// rest.
	if m := regexp.MustCompile(` filtered_out=(\d+) filtered_delivered=(\d+) `).FindStringSubmatch(summary); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("summary shows no event left out by a filter, or none delivered past one: %v", m)
	}
	// The brokers took a share of every tenant's events, and each was
	// killed and came back at least once while they did.
	if m := regexp.MustCompile(` broker_lanes=(\d+) broker_delivered=(\d+) `).FindStringSubmatch(summary); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("summary shows no broker lane delivered into: %v", m)
	}
	if m := regexp.MustCompile(`broker_kills=\d+ \(nats (\d+), redis (\d+)\)`).FindStringSubmatch(faults); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("faults line shows a broker never killed: %v", m)
	}
}

// runChaosCommand builds hookflow and runs `hookflow chaos` with args and a
// data folder of its own (kept, with its logs, when the test fails), its
// progress logged as it comes. It returns the run's stdout, how long the
// run took, and how it ended.
func runChaosCommand(ctx context.Context, t *testing.T, args ...string) (string, time.Duration, error) {
	t.Helper()
	root := moduleRoot(t)
	dir, err := os.MkdirTemp("", "hookflow-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	// As root Postgres runs as the postgres user, which must reach the folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	t.Cleanup(func() {
		KillStalePostgres(data) // only if the run itself was killed
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("logs kept in %s", filepath.Join(data, "logs"))
		}
	})

	bin := filepath.Join(dir, "hookflow")
	began := time.Now()
	build := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/hookflow")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built hookflow in %s", time.Since(began).Round(time.Second))

	began = time.Now()
	cmd := exec.CommandContext(ctx, bin, append([]string{"chaos", "--data-dir", data}, args...)...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its own process group, killed whole when the budget runs out; and it
	// dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	progress := make(chan struct{})
	go func() {
		defer close(progress)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
		}
	}()
	<-progress
	err = cmd.Wait()
	return stdout.String(), time.Since(began).Round(time.Second), err
}

// testBudget is how long the build and the run may take: 20 minutes, less
// when go test's own deadline is nearer. On a quiet 2-core machine the run
// takes about 4 minutes.
func testBudget(t *testing.T) time.Duration {
	budget := 20 * time.Minute
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 30*time.Second; left < budget {
			budget = left
		}
	}
	return budget
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not inside the module")
	}
	return filepath.Dir(gomod)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// go test puts GOROOT in its test binaries' environment.
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}
