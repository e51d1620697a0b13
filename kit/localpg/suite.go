package localpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Suite is the cluster of one test binary: started on first use, on a free
// port under a temporary folder, with fsync off, and given each test a
// database of its own. A cluster that cannot start fails the test; it is
// never skipped. Declare one per test package and Close it from TestMain:
//
//	var pg localpg.Suite
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pg.Close()
//		os.Exit(code)
//	}
type Suite struct {
	mu      sync.Mutex
	dir     string
	cluster *Cluster
	err     error
}

// Cluster returns the suite's cluster, starting it on first use.
func (s *Suite) Cluster(t testing.TB) *Cluster {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cluster == nil && s.err == nil {
		s.cluster, s.err = s.start()
	}
	if s.err != nil {
		t.Fatalf("localpg: %v", s.err)
	}
	return s.cluster
}

// Dir is the suite's temporary folder; the server's log is there, and a
// test may keep other services' files beside it.
func (s *Suite) Dir(t testing.TB) string {
	t.Helper()
	s.Cluster(t)
	return s.dir
}

func (s *Suite) start() (*Cluster, error) {
	dir, err := os.MkdirTemp("", "hookflow-test-")
	if err != nil {
		return nil, err
	}
	// As root the server runs as the postgres user, which must reach its
	// data folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	s.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A port below the kernel's ephemeral range: one from the range, free
	// when asked, can be taken before the server binds it by any outgoing
	// connection of the packages testing beside this one. Another package
	// may still draw the same low port: then another is drawn.
	for attempt := 1; ; attempt++ {
		port, err := FreeLowPort()
		if err != nil {
			return nil, err
		}
		c, err := Start(ctx, Config{DataDir: filepath.Join(dir, "postgres"), Port: port, Fast: true}, slog.New(slog.DiscardHandler))
		if !errors.Is(err, ErrPortInUse) || attempt == suitePortAttempts {
			return c, err
		}
	}
}

// suitePortAttempts bounds the ports a package's cluster tries.
const suitePortAttempts = 5

// NewDatabase creates an empty database for this test and returns its URL.
// It is dropped when the test ends.
func (s *Suite) NewDatabase(t testing.TB) string {
	t.Helper()
	c := s.Cluster(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	ctx := context.Background()
	if err := c.EnsureDatabase(ctx, name); err != nil {
		t.Fatalf("localpg: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, c.AdminURL("postgres"))
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return c.AdminURL(name)
}

// Close stops the cluster and removes its folder.
func (s *Suite) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cluster != nil {
		s.cluster.Stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
