// Package testenv starts the real services integration tests run against: a
// PostgreSQL cluster from the local server binaries, and (package
// temporaltest) an embedded Temporal server persisting to it. Each test package gets its own cluster (started
// lazily, on free ports, under a temporary folder) and each test its own
// database or namespace. A service that cannot start fails the test loudly; it
// is never skipped.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/schema"
)

// env holds the package's services. Tests share it through the helpers
// below; it is the one piece of package-level state, set once per test binary.
var env struct {
	pg     localpg.Suite
	mu     sync.Mutex
	onExit []func()
}

// Main runs the package's tests and stops whatever they started. Use it from
// TestMain: func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	env.mu.Lock()
	defer env.mu.Unlock()
	for i := len(env.onExit) - 1; i >= 0; i-- {
		env.onExit[i]()
	}
	env.pg.Close()
	return code
}

// Logger returns a logger that writes through t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// OnExit registers f to run when the package's tests are done, before
// Postgres stops (package temporaltest stops its server this way).
func OnExit(f func()) {
	env.mu.Lock()
	defer env.mu.Unlock()
	env.onExit = append(env.onExit, f)
}

// Dir is the package's temporary folder (logs of the services live there).
func Dir(t testing.TB) string { return env.pg.Dir(t) }

// Postgres returns the package's cluster, starting it on first use.
func Postgres(t testing.TB) *localpg.Cluster { return env.pg.Cluster(t) }

// NewDatabase creates an empty database for this test and returns its URL.
// It is dropped when the test ends.
func NewDatabase(t testing.TB) string { return env.pg.NewDatabase(t) }

// MigratedPool is a pool on a new database (NewDatabase) with hookflow's
// schema applied, closed when the test ends.
func MigratedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, NewDatabase(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := schema.Migrate(ctx, pool); err != nil {
		t.Fatalf("testenv: migrate: %v", err)
	}
	return pool
}

// TaskQueue returns a task queue name unique to this test, so tests sharing a
// server never pick up each other's work.
func TaskQueue(t testing.TB) string {
	return fmt.Sprintf("test-%s", randomHex(6))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
