package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process of the run: a hookflow subcommand in its own
// process group (so SIGKILL takes all of it and a Ctrl-C at the terminal
// reaches only the chaos command), its output appended to a log file. While
// it is wanted, a supervisor restarts it whenever it exits, whether the run
// killed it or it died on its own, and tells the run of the latter.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
	logOffset int64
	wanted    bool
	killing   bool // the next exit is one the run caused
	// downFor is how long the supervisor leaves the process down after the
	// exit the run caused (killFor): an outage rather than a crash.
	downFor  time.Duration
	starts   int
	exited   bool // the current incarnation has exited
	lastExit string
	cpu      time.Duration // user+system time of every incarnation that has exited
	// onExit, when set (before the first start), is called as each
	// incarnation exits, under mu, before anyone waiting on it is told:
	// what pointed at the incarnation stops pointing at it before a new
	// one can start.
	onExit func()
}

func newProc(name, bin string, args, env []string, logPath string) *proc {
	return &proc{name: name, bin: bin, args: args, env: env, logPath: logPath}
}

// start launches the process once. The supervisor (supervise) restarts it.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

func (p *proc) startLocked() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	off, _ := logf.Seek(0, 2)
	fmt.Fprintf(logf, "---- chaos: start %d of %s at %s\n", p.starts+1, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: should the chaos command itself die hard, its children
	// die with it instead of holding ports and databases.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.logOffset = cmd, done, off
	p.starts++
	p.exited = false
	p.wanted = true
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		if err != nil {
			p.lastExit = err.Error()
		} else {
			p.lastExit = "exit status 0"
		}
		if st := cmd.ProcessState; st != nil {
			p.cpu += st.UserTime() + st.SystemTime()
		}
		p.exited = true
		if p.onExit != nil {
			p.onExit()
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// supervise restarts the process after every exit while it is wanted,
// until ctx ends. onUnexpected is told about exits the run did not cause;
// those restarts back off (up to 5 s) so a process that cannot start does
// not spin.
func (p *proc) supervise(ctx context.Context, onUnexpected func(name, how string)) {
	backoff := time.Second
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		began := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-done:
		}
		p.mu.Lock()
		caused, wanted, how, down := p.killing, p.wanted, p.lastExit, p.downFor
		p.killing, p.downFor = false, 0
		p.mu.Unlock()
		if !wanted {
			return
		}
		delay := max(200*time.Millisecond, down)
		if !caused {
			onUnexpected(p.name, how)
			if time.Since(began) > 30*time.Second {
				backoff = time.Second
			}
			delay, backoff = backoff, min(2*backoff, 5*time.Second)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			p.mu.Lock()
			if !p.wanted {
				p.mu.Unlock()
				return
			}
			err := p.startLocked()
			p.mu.Unlock()
			if err == nil {
				break
			}
			onUnexpected(p.name, "restart failed: "+err.Error())
			delay = 5 * time.Second
		}
	}
}

// kill sends SIGKILL to the process group and waits for the process to
// exit. The supervisor then starts it again. It reports false, and does
// nothing, when no incarnation is running (it exited and its supervisor
// has not started the next one yet): there is nothing to kill, and the
// fault did not take place.
func (p *proc) kill() bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return false
	}
	select {
	case <-done:
		p.mu.Unlock()
		return false
	default:
	}
	p.killing = true
	p.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return true
}

// killFor kills the process as kill does and has its supervisor leave it
// down for d before it starts it again: an outage of what it serves.
func (p *proc) killFor(d time.Duration) bool {
	p.mu.Lock()
	p.downFor = d
	p.mu.Unlock()
	if !p.kill() {
		p.mu.Lock()
		p.downFor = 0
		p.mu.Unlock()
		return false
	}
	return true
}

// stop ends the process for good: SIGTERM to its group, SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	p.wanted = false
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	// Anything the process group left behind goes too.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// running reports whether the current incarnation is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// waitLog waits until the current incarnation writes want to its log, and
// fails early when it exits first.
func (p *proc) waitLog(ctx context.Context, want string, timeout time.Duration) error {
	_, _, err := p.waitLine(ctx, func(line []byte) (string, bool) { return "", bytes.Contains(line, []byte(want)) }, timeout)
	return err
}

// waitLine waits until the current incarnation writes a line to its log
// that match accepts, and returns what match made of it and which
// incarnation (the start count) wrote it. It fails early when that
// incarnation exits first.
func (p *proc) waitLine(ctx context.Context, match func(line []byte) (string, bool), timeout time.Duration) (string, int, error) {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		off, done, starts := p.logOffset, p.done, p.starts
		p.mu.Unlock()
		b, _ := os.ReadFile(p.logPath)
		if int64(len(b)) > off {
			for line := range bytes.SplitSeq(b[off:], []byte("\n")) {
				if v, ok := match(line); ok {
					return v, starts, nil
				}
			}
		}
		select {
		case <-done:
			return "", 0, fmt.Errorf("%s exited during start-up: %s; log %s ends: %s", p.name, p.lastExitText(), p.logPath, tail(p.logPath, 3))
		case <-ctx.Done():
			return "", 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", 0, fmt.Errorf("%s not ready within %s; log %s ends: %s", p.name, timeout, p.logPath, tail(p.logPath, 3))
		}
	}
}

// ifCurrent calls f, under mu, if incarnation starts (a start count) is
// the current one and has not exited: what f points at it cannot outlive
// it, since onExit runs under mu too.
func (p *proc) ifCurrent(starts int, f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.starts != starts || p.exited || p.done == nil {
		return false
	}
	f()
	return true
}

// cpuTime is the CPU time of the incarnations that have exited.
func (p *proc) cpuTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cpu
}

func (p *proc) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// waitNextStart waits for an incarnation after the one counted by starts,
// then for want in its log.
func (p *proc) waitNextStart(ctx context.Context, starts int, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for p.startCount() <= starts {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not started again within %s", p.name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return p.waitLog(ctx, want, time.Until(deadline))
}

func (p *proc) lastExitText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastExit
}

// runOnce runs a one-shot command (migrate) to completion.
func runOnce(ctx context.Context, name, bin string, args, env []string, logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w; log %s ends: %s", name, err, logPath, tail(logPath, 3))
	}
	return nil
}

// tail returns the last n lines of a file, on one line.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// childEnv is the environment of every child: this process's, without any
// HOOKFLOW_ setting (a developer's shell must not redirect the run), plus
// the given ones.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOOKFLOW_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}
