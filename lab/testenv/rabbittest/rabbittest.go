// Package rabbittest runs the real RabbitMQ broker (Debian's
// rabbitmq-server) as a private node for tests and for long-running
// commands (chaos, bench): its own node name, ports, epmd, data, logs and
// cookie under one folder, so that it shares nothing with a system broker
// or another test's node. Kill is a real crash (SIGKILL of the node's
// process group) and Restart brings the node back on the same folder and
// ports, so that durable exchanges and queues and persistent messages
// survive as they would on a server.
package rabbittest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/lab/testenv"
)

// Binary is the broker's start script. The Debian package's
// /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq
// user and the system's folders; the script it wraps honours the
// RABBITMQ_* settings a private node needs.
const Binary = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// ctlBinary is the broker's control tool, run against the node with its
// cookie and epmd (the node's environment).
const ctlBinary = "/usr/lib/rabbitmq/bin/rabbitmqctl"

// epmdBinary is Erlang's port mapper. Each node runs its own, on a port of
// its own, so that Close leaves no daemon behind and nodes never see each
// other.
const epmdBinary = "epmd"

// Username is the node's one user; its password is random per node.
const Username = "hookflow"

// startTimeout bounds a node's start: 5–10 s on two busy cores, more after
// a crash (the node recovers its message store).
const startTimeout = 2 * time.Minute

// Server is one private RabbitMQ node.
type Server struct {
	dir      string
	node     string
	password string
	port     int
	distPort int
	epmdPort int

	mu   sync.Mutex
	epmd *exec.Cmd
	// epmdExited is closed when epmd has exited.
	epmdExited chan struct{}
	cmd        *exec.Cmd
	// exited is closed when cmd has exited (its Wait returned).
	exited chan struct{}
}

// Start starts a node whose data, logs and configuration live under dir
// (created if missing), on free ports, and returns once it takes AMQP
// connections.
func Start(ctx context.Context, dir string) (*Server, error) {
	if _, err := os.Stat(Binary); err != nil {
		return nil, fmt.Errorf("find rabbitmq-server (apt-get install rabbitmq-server): %w", err)
	}
	if _, err := exec.LookPath(epmdBinary); err != nil {
		return nil, fmt.Errorf("find epmd (apt-get install erlang-base): %w", err)
	}
	s := &Server{dir: dir, node: "hf" + randomHex(6) + "@localhost", password: randomHex(12)}
	for _, p := range []*int{&s.port, &s.distPort, &s.epmdPort} {
		port, err := freePort(s.port, s.distPort, s.epmdPort)
		if err != nil {
			return nil, err
		}
		*p = port
	}
	if err := s.writeFiles(); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// freePort returns a free port below the ephemeral range (so that an
// outgoing connection does not take it between a Kill and a Restart) and
// unlike taken.
func freePort(taken ...int) (int, error) {
	for range 20 {
		p, err := localpg.FreeLowPort()
		if err != nil {
			return 0, err
		}
		if !slices.Contains(taken, p) {
			return p, nil
		}
	}
	return 0, errors.New("no free port")
}

func (s *Server) writeFiles() error {
	for _, d := range []string{"home", "mnesia", "log"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			return fmt.Errorf("create node folder: %w", err)
		}
	}
	conf := strings.Join([]string{
		"listeners.tcp.default = 127.0.0.1:" + strconv.Itoa(s.port),
		"default_user = " + Username,
		"default_pass = " + s.password,
		"default_vhost = /",
		// Every client of a test node dials it over loopback: no user
		// is held to it, nor kept from it.
		"loopback_users = none",
		// The machine is shared: what others use of it must not raise
		// an alarm that blocks publishers mid-test (SetMemoryAlarm
		// raises one on purpose).
		"vm_memory_high_watermark.absolute = 2GB",
		"disk_free_limit.absolute = 10MB",
		"log.console = false",
		"log.file.level = warning",
	}, "\n") + "\n"
	files := map[string]string{
		"rabbitmq.conf":       conf,
		"enabled_plugins":     "[].\n",
		"rabbitmq-env.conf":   "",
		"home/.erlang.cookie": randomHex(16),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o600); err != nil {
			return fmt.Errorf("write node file: %w", err)
		}
	}
	return nil
}

func (s *Server) env() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"HOME=" + filepath.Join(s.dir, "home"),
		"RABBITMQ_NODENAME=" + s.node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(s.port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(s.distPort),
		"ERL_EPMD_PORT=" + strconv.Itoa(s.epmdPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_BASE=" + s.dir,
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(s.dir, "log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(s.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(s.dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(s.dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(s.dir, "enabled_plugins"),
		// The script then execs the Erlang VM rather than running it as
		// a child: the VM is the process started here, so that its
		// parent-death signal stops it with the test binary (a child
		// of a killed script would live on, and restart an epmd of its
		// own). Its input stays unread (-noinput, below).
		"RABBITMQ_ALLOW_INPUT=true",
		// The node must use this node's epmd, started beforehand, and
		// never start a daemon of its own that would outlive Close; its
		// distribution port listens on loopback only, like the rest.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-noinput -start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
	}
}

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epmd == nil {
		epmd := exec.Command(epmdBinary, "-port", strconv.Itoa(s.epmdPort), "-address", "127.0.0.1")
		epmd.Env = s.env()
		epmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := epmd.Start(); err != nil {
			return fmt.Errorf("start epmd: %w", err)
		}
		s.epmd = epmd
		s.epmdExited = make(chan struct{})
		go func(done chan struct{}) {
			_ = epmd.Wait()
			close(done)
		}(s.epmdExited)
		if err := waitListening(ctx, s.epmdPort); err != nil {
			return fmt.Errorf("start epmd: %w", err)
		}
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open node log: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(Binary)
	cmd.Dir = s.dir
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: Kill takes the Erlang VM and its helpers at
	// once, as kill -9 of a server would. Pdeathsig stops the node if the
	// test binary dies without running its cleanup (a timeout's panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start rabbitmq-server: %w", err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		conn, err := s.dial()
		if err == nil {
			return conn.Close()
		}
		select {
		case <-exited:
			return fmt.Errorf("rabbitmq-server exited while starting (see %s): %w", filepath.Join(s.dir, "log"), err)
		case <-ctx.Done():
			return fmt.Errorf("wait for rabbitmq-server (see %s): %w", filepath.Join(s.dir, "log"), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitListening(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addr is the node's AMQP address, host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// EPMDAddr is the address of the node's own epmd, host:port.
func (s *Server) EPMDAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.epmdPort))
}

// URL is the node's AMQP URL with its default vhost and no credentials,
// as a destination's config holds it.
func (s *Server) URL() string { return "amqp://" + s.Addr() + "/" }

// Password is the password of Username.
func (s *Server) Password() string { return s.password }

// Credentials are a destination's credentials for the node.
func (s *Server) Credentials() map[string]string {
	return map[string]string{"username": Username, "password": s.password}
}

// Dir is the node's folder (its logs are under log/).
func (s *Server) Dir() string { return s.dir }

// dial connects as the node's user, straight (no egress policy): the
// harness side of a test.
func (s *Server) dial() (*amqp.Connection, error) {
	u := url.URL{Scheme: "amqp", User: url.UserPassword(Username, s.password), Host: s.Addr(), Path: "/"}
	return amqp.DialConfig(u.String(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
}

// Kill crashes the node: SIGKILL of its process group, as kill -9 of a
// server. What it had written to disk stays for Restart. Its epmd, a
// service of the machine rather than of the node, keeps running.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

// Pid is the node's process (the Erlang VM), for the bench's CPU
// accounting; 0 while it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) killLocked() error {
	if s.cmd == nil {
		return nil
	}
	err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	<-s.exited
	s.cmd = nil
	if err != nil {
		return fmt.Errorf("kill rabbitmq-server: %w", err)
	}
	return nil
}

// Pause freezes the node (SIGSTOP of its process group): it keeps its
// connections open and answers nothing, as a server stalled on a disk or
// a swap storm would, until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume lets a paused node run again (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("signal rabbitmq-server: it is not running")
	}
	pgid := s.cmd.Process.Pid
	if err := syscall.Kill(-pgid, sig); err != nil {
		return fmt.Errorf("signal rabbitmq-server: %w", err)
	}
	if sig != syscall.SIGSTOP {
		return nil
	}
	// A stop takes effect when each thread is next scheduled, which on a
	// busy machine is later than kill returns: Pause returns once the
	// node can no longer answer.
	deadline := time.Now().Add(10 * time.Second)
	for !groupStopped(pgid) {
		if time.Now().After(deadline) {
			return errors.New("pause rabbitmq-server: it did not stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// groupStopped says whether every process of group pgid is stopped (or
// dead), from /proc/<pid>/stat: "pid (comm) state ppid pgrp ...".
func groupStopped(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if f[0] != "T" && f[0] != "t" && f[0] != "Z" {
			return false
		}
	}
	return true
}

// SetMemoryAlarm raises (on) or clears the node's memory alarm by
// lowering its memory limit below what it uses, or setting it back:
// while it is raised the broker blocks every publishing connection, as a
// server short of memory does.
func (s *Server) SetMemoryAlarm(ctx context.Context, on bool) error {
	limit := "2GB"
	if on {
		limit = "1"
	}
	cmd := exec.CommandContext(ctx, ctlBinary, "set_vm_memory_high_watermark", "absolute", limit)
	cmd.Env = s.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl set_vm_memory_high_watermark: %w: %s", err, out)
	}
	return nil
}

// Restart kills the node if it runs and starts it again on the same
// folder and ports, returning once it takes connections.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.start(ctx)
}

// Close stops the node and its epmd, leaving nothing running. The folder
// stays (the caller made it).
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.killLocked()
	if s.epmd != nil {
		_ = syscall.Kill(-s.epmd.Process.Pid, syscall.SIGKILL)
		<-s.epmdExited
		s.epmd = nil
	}
	return err
}

// ForTest starts a node of the test's own under t.TempDir, closed when the
// test ends. Use it where a test kills or restarts the node; other tests
// share the package's node (Shared). A node that cannot start (the
// binary missing included) fails the test; it never skips.
func ForTest(t testing.TB) *Server {
	t.Helper()
	s, err := Start(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("rabbittest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// shared is the package's one node, started on first use: a node takes
// seconds to start on two cores, so the tests of a package share it,
// each with exchanges and queues of its own.
var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Shared returns the test package's node, starting it on first use; it is
// closed by testenv.Main (use it from TestMain). A node that cannot start
// fails the test; it never skips.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "hookflow-rabbit-")
		if err == nil {
			shared.srv, err = Start(context.Background(), dir)
		}
		shared.err = err
		if err == nil {
			srv := shared.srv
			testenv.OnExit(func() {
				_ = srv.Close()
				_ = os.RemoveAll(dir)
			})
		}
	}
	if shared.err != nil {
		t.Fatalf("rabbittest: %v", shared.err)
	}
	return shared.srv
}

// Declare sets up what a destination's user would: a durable topic
// exchange, and, when queue is not empty, a durable queue bound to it for
// every routing key ("#"), which keeps every message published to the
// exchange (the audit queue a conformance check drains).
func (s *Server) Declare(ctx context.Context, exchange, queue string) error {
	return s.with(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange: %w", err)
		}
		if queue == "" {
			return nil
		}
		if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare queue: %w", err)
		}
		if err := ch.QueueBind(queue, "#", exchange, false, nil); err != nil {
			return fmt.Errorf("bind queue: %w", err)
		}
		return nil
	})
}

// DeleteExchange deletes exchange (a destination whose exchange was
// removed).
func (s *Server) DeleteExchange(ctx context.Context, exchange string) error {
	return s.with(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDelete(exchange, false, false); err != nil {
			return fmt.Errorf("delete exchange: %w", err)
		}
		return nil
	})
}

// Publish publishes msg to exchange with routing key, as another writer
// than hookflow would (or an attempt whose confirm was lost), and waits
// for the broker's confirm.
func (s *Server) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	return s.with(ctx, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return fmt.Errorf("confirm mode: %w", err)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("wait for confirm: %w", err)
		}
		if !ok {
			return errors.New("publish: the broker nacked it")
		}
		return nil
	})
}

// with runs f on a channel of a connection of its own.
func (s *Server) with(ctx context.Context, f func(*amqp.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := s.dial()
	if err != nil {
		return fmt.Errorf("dial rabbitmq: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	return f(ch)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
