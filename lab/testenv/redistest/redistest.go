// Package redistest runs a real Redis server (Debian's redis-server) for
// tests and for long-running lab commands (chaos, bench): a process of its
// own on a free port of 127.0.0.1, persisting to a folder with AOF fsynced
// at every write, as the redis transport asks of a production server, and
// with the default user switched off, so that every client shows
// credentials. Kill is a SIGKILL that keeps the data, and Restart starts the
// server again on the same folder and port, so that a test can prove what
// survives a crash.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/hookflow/hookflow/kit/localpg"
)

// User is the ACL user the server accepts (with Password); the default
// user is off.
const User = "hookflow"

// startTimeout bounds ForTest's start: a server that is not answering by
// then will not.
const startTimeout = time.Minute

// Server is one redis-server process and the folder it persists to.
type Server struct {
	bin, dir, password string
	port               int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Binary returns the redis-server binary to run: REDIS_SERVER if set, else
// the one on PATH, else Debian's. A missing one is an error naming the
// package to install.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("redis-server not found: install Debian's redis-server (scripts/deps.sh --brokers) or set REDIS_SERVER")
}

// Start starts a server persisting to dir (created if missing) on a free
// port of 127.0.0.1, with a new random password for User, and returns once
// it answers PING with those credentials.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create redis dir: %w", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve redis dir: %w", err)
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, fmt.Errorf("make password: %w", err)
	}
	s := &Server{bin: bin, dir: dir, password: hex.EncodeToString(pw)}
	// The ACL file is the server's only source of users: the default user
	// is off, so a client without credentials is refused as it would be in
	// production. It keeps its permissions all the same: Redis (7.0.15,
	// and every release before a late-2025 fix) replays an AOF's
	// MULTI/EXEC blocks (what a script that writes twice is logged as) as
	// the default user and re-checks its ACL at EXEC, so a default user
	// without them silently drops those writes at restart.
	acl := "user default off ~* &* +@all\nuser " + User + " on >" + s.password + " ~* &* +@all\n"
	if err := os.WriteFile(filepath.Join(dir, "users.acl"), []byte(acl), 0o600); err != nil {
		return nil, fmt.Errorf("write redis acl file: %w", err)
	}
	// A port chosen between processes can be taken before the server binds
	// it: a few tries with fresh ports cover that race.
	for range 3 {
		// Below the ephemeral range, so that Restart finds the port free
		// again rather than held by some outgoing connection.
		if s.port, err = localpg.FreeLowPort(); err != nil {
			return nil, err
		}
		if err = s.run(ctx); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// ForTest starts a server for this test in a folder of its own, stopped when
// the test ends. A server that cannot start fails the test; it is never
// skipped.
func ForTest(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("redistest: %v", err)
		}
	})
	return s
}

// run starts the process on s's port and folder and waits for it to answer.
func (s *Server) run(ctx context.Context) error {
	logFile := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--aclfile", filepath.Join(s.dir, "users.acl"),
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--save", "",
		"--daemonize", "no",
		"--logfile", logFile,
	)
	cmd.Dir = s.dir
	// A group of its own, so that a Ctrl-C meant for a lab command's
	// terminal does not stop the server before the command decides to.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitReady(ctx, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis-server on %s: %w (log: %s)", s.Addr(), err, lastLine(logFile))
	}
	return nil
}

// waitReady polls PING with the credentials until the server answers. A
// server loading its AOF answers LOADING until it is done, so PONG means
// every acknowledged write is back.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	c := s.Client()
	defer c.Close()
	for {
		err := s.ping(ctx, c)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before answering")
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping checks the server accepts TCP, then answers PING. The accept comes
// first because go-redis logs every dial that fails, and the server takes
// a moment to listen.
func (s *Server) ping(ctx context.Context, c *redis.Client) error {
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	_ = conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's address as a redis:// URL, without credentials.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Dir is the folder the server persists to (its AOF, ACL file and log).
func (s *Server) Dir() string { return s.dir }

// Pid is the server process's id (the bench reads its CPU time from
// /proc), or 0 while it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Password is User's password.
func (s *Server) Password() string { return s.password }

// Credentials are User's credentials as a redis destination takes them.
func (s *Server) Credentials() map[string]string {
	return map[string]string{"username": User, "password": s.password}
}

// Config is a redis destination's config for this server (plain TCP, db
// 0) and stream prefix.
func (s *Server) Config(prefix string) []byte {
	return fmt.Appendf(nil, `{"addr":%q,"stream":%q,"tls":false}`, s.Addr(), prefix)
}

// Client is a client of the server as User, for a test's own setup and
// inspection; the caller closes it. It never retries, so that a test sees
// what the server did.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     s.Addr(),
		Username:                 User,
		Password:                 s.password,
		MaxRetries:               -1,
		DialerRetries:            1,
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// CreateStream creates the index stream of a redis destination with stream
// prefix prefix, as its user does before creating the endpoint (the
// transport's Check refuses a prefix whose stream is missing): a consumer
// group named group, reading from the start, on a new empty stream.
func (s *Server) CreateStream(ctx context.Context, prefix, group string) error {
	c := s.Client()
	defer c.Close()
	return CreateStream(ctx, c, prefix, group)
}

// CreateStream creates, through c, the index stream of stream prefix prefix
// with a consumer group named group reading from its start. It is what a
// consumer of a redis destination runs once: an existing group is kept.
func CreateStream(ctx context.Context, c redis.Cmdable, prefix, group string) error {
	err := c.XGroupCreateMkStream(ctx, "{"+prefix+"}", group, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("create stream {%s}: %w", prefix, err)
	}
	return nil
}

// Kill ends the server with SIGKILL, as a crash would: no shutdown, the
// folder as the last fsync left it.
func (s *Server) Kill() error {
	return s.stop(0)
}

// Restart starts the server again on the same folder and port (after Kill,
// or killing it first) and returns once it has loaded its data.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.run(ctx)
}

// Close stops the server (SIGTERM, so that it flushes and exits cleanly;
// SIGKILL if it has not within 10 s). The folder is left as is.
func (s *Server) Close() error {
	return s.stop(10 * time.Second)
}

// stop ends the running process, if any: SIGTERM first when grace is set,
// SIGKILL once grace is over (at once when it is zero).
func (s *Server) stop(grace time.Duration) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if grace > 0 {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			return nil
		case <-time.After(grace):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill redis-server: %w", err)
	}
	<-done
	if grace > 0 {
		return fmt.Errorf("redis-server did not stop within %s of SIGTERM; killed", grace)
	}
	return nil
}

// lastLine is the last line of the server's log, the reason a start
// failed.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
