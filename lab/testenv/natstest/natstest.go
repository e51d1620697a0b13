// Package natstest runs a real NATS server with JetStream for the tests,
// the chaos run and the bench: the nats-server module's own main, built
// once from the version in go.mod and run as a process of its own, so that
// Kill is a real kill -9 (file store left as the crash left it) and Restart
// recovers from that same store on the same port. One code path serves
// every use; nothing here is a fake.
package natstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// module is the server's Go module; its version is the one go.mod requires.
const module = "github.com/nats-io/nats-server/v2"

// Username is the user every server knows. A client that gives no
// credentials is taken as it (no_auth_user), so that tests need none; a
// client that gives wrong ones is refused, as on a real deployment.
const Username = "hookflow"

// ReaderUsername is a user with Username's password that may use
// JetStream's API (read streams and their messages) but publish nowhere
// else: a destination's credentials that lack a permission.
const ReaderUsername = "reader"

// PublisherUsername is a user with Username's password that may publish
// anywhere but to JetStream's API: credentials that cannot find or read a
// stream.
const PublisherUsername = "publisher"

// Server is one nats-server process with JetStream, its store in a folder
// that outlives the process (Kill, Restart).
type Server struct {
	bin, dir string
	port     int
	password string
	caPEM    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start builds the server (once per machine and version, Binary) and runs
// it with its store, configuration and log in dir, on a free port of
// 127.0.0.1, and waits until JetStream answers.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pw := make([]byte, 12)
	if _, err := rand.Read(pw); err != nil {
		return nil, fmt.Errorf("make password: %w", err)
	}
	s := &Server{bin: bin, dir: dir, port: port, password: hex.EncodeToString(pw)}
	if s.caPEM, err = writeCertificate(dir); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.configFile(), []byte(s.config()), 0o600); err != nil {
		return nil, fmt.Errorf("write nats-server config: %w", err)
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// ForTest starts a server for this test in a temporary folder and stops it
// when the test ends. A server that cannot be built or started fails the
// test; it is never skipped.
func ForTest(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("natstest: %v", err)
		}
	})
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's client URL, without credentials.
func (s *Server) URL() string { return "nats://" + s.Addr() }

// TLSURL is the server's client URL for TLS. The server takes plain and
// TLS clients on the one port.
func (s *Server) TLSURL() string { return "tls://" + s.Addr() }

// CAPEM is the certificate (PEM) the server's TLS certificate is checked
// against: self-signed, for 127.0.0.1 and localhost.
func (s *Server) CAPEM() string { return s.caPEM }

// Password is the password of every user (Username, ReaderUsername,
// PublisherUsername), random per
// server.
func (s *Server) Password() string { return s.password }

// Dir is the folder of the server's store, configuration and log.
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

// Kill sends SIGKILL to the server and waits for it to exit: whatever it
// had not written stays unwritten, as in a crash. Its store is kept.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kill()
}

func (s *Server) kill() error {
	if s.cmd == nil {
		return nil
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill nats-server: %w", err)
	}
	<-s.done
	s.cmd = nil
	return nil
}

// Restart starts the server again on the same port and store (after Kill,
// or killing it first), and waits until JetStream answers.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.kill(); err != nil {
		return err
	}
	return s.runLocked(ctx)
}

// Close stops the server. Its folder is the caller's to remove.
func (s *Server) Close() error { return s.Kill() }

func (s *Server) run(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runLocked(ctx)
}

func (s *Server) runLocked(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "nats-server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open nats-server log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, "-c", s.configFile())
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that Kill takes it whole and a terminal's
	// signals do not; and it dies with whoever started it, so that a test
	// binary that crashes leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start nats-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	if err := s.ready(ctx, done); err != nil {
		_ = s.kill()
		return fmt.Errorf("nats-server on %s (log %s): %w", s.Addr(), filepath.Join(s.dir, "nats-server.log"), err)
	}
	return nil
}

// ready waits until a client can connect and JetStream answers for its
// account: after a kill, the store is recovered before that.
func (s *Server) ready(ctx context.Context, exited <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = s.ping(ctx); last == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func (s *Server) ping(ctx context.Context) error {
	nc, err := nats.Connect(s.URL(), nats.NoReconnect(), nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

func (s *Server) configFile() string { return filepath.Join(s.dir, "nats-server.conf") }

// config listens on loopback only; the password is hex, so it needs no
// quoting beyond the config's own.
func (s *Server) config() string {
	return fmt.Sprintf(`listen: %q
jetstream {
  store_dir: %q
}
authorization {
  users = [
    { user: %q, password: %q },
    { user: %q, password: %q, permissions: { publish: { allow: ["$JS.API.>"] }, subscribe: { allow: ["_INBOX.>"] } } },
    { user: %q, password: %q, permissions: { publish: { deny: ["$JS.API.>"] } } }
  ]
}
no_auth_user: %q
tls {
  cert_file: %q
  key_file: %q
}
allow_non_tls: true
`, s.Addr(), filepath.Join(s.dir, "jetstream"), Username, s.password, ReaderUsername, s.password, PublisherUsername, s.password, Username,
		filepath.Join(s.dir, certFile), filepath.Join(s.dir, keyFile))
}

// freePort is a port the kernel just had free on 127.0.0.1. Restart keeps
// it, so that clients find the server where it was.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var built struct {
	mu   sync.Mutex
	path string
}

// Binary returns the path of the nats-server built from the version go.mod
// requires. It is built once per machine and version, under the user's
// cache folder, so that every test binary and command after the first
// reuses it; the module comes from Go's module cache like any dependency.
// It must be called from within the hookflow module.
func Binary(ctx context.Context) (string, error) {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.path != "" {
		return built.path, nil
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("find %s's version (run within the hookflow module): %w", module, exitText(err))
	}
	version := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "hookflow")
	path := filepath.Join(dir, "nats-server-"+version)
	if _, err := os.Stat(path); err == nil {
		built.path = path
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make %s: %w", dir, err)
	}
	// Built beside its final name and renamed into place, so that two
	// binaries building at once never run a half-written file.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("make build folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tmp, "nats-server"), module)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s@%s: %w: %s", module, version, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), path); err != nil {
		return "", fmt.Errorf("install nats-server: %w", err)
	}
	built.path = path
	return path, nil
}

func exitText(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}

// CreateStream creates the stream a hookflow user would make for a NATS
// destination: limits retention (a lane's last message stays, which the
// exactly-once check reads), file storage, and direct get allowed (the
// lane's tail in one round trip). url may carry credentials.
func CreateStream(ctx context.Context, url, name string, subjects []string) error {
	return withJetStream(ctx, url, func(js jetstream.JetStream) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        name,
			Subjects:    subjects,
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			AllowDirect: true,
		})
		if err != nil {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
		return nil
	})
}

// DeleteStream deletes a stream, as a user who removes it by mistake would.
func DeleteStream(ctx context.Context, url, name string) error {
	return withJetStream(ctx, url, func(js jetstream.JetStream) error {
		if err := js.DeleteStream(ctx, name); err != nil {
			return fmt.Errorf("delete stream %s: %w", name, err)
		}
		return nil
	})
}

func withJetStream(ctx context.Context, url string, f func(jetstream.JetStream) error) error {
	nc, err := nats.Connect(url, nats.NoReconnect())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return f(js)
}

const (
	certFile = "server-cert.pem"
	keyFile  = "server-key.pem"
)

// writeCertificate writes a self-signed certificate for 127.0.0.1 and
// localhost, and its key, into dir, and returns the certificate's PEM.
func writeCertificate(dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("make tls key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "natstest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", fmt.Errorf("make tls certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("encode tls key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, certFile), certPEM, 0o600); err != nil {
		return "", fmt.Errorf("write tls certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", fmt.Errorf("write tls key: %w", err)
	}
	return string(certPEM), nil
}
