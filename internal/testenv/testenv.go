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
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/devstack"
	"github.com/hookflow/hookflow/schema"
)

// env holds the package's services. Tests share it through the helpers
// below; it is the one piece of package-level state, set once per test binary.
var env struct {
	mu     sync.Mutex
	dir    string
	pg     *devstack.Postgres
	pgErr  error
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
	if env.pg != nil {
		env.pg.Stop()
	}
	if env.dir != "" {
		_ = os.RemoveAll(env.dir)
	}
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

func postgres(t testing.TB) *devstack.Postgres {
	t.Helper()
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.pg == nil && env.pgErr == nil {
		env.pg, env.pgErr = startPostgres()
	}
	if env.pgErr != nil {
		t.Fatalf("testenv: postgres: %v", env.pgErr)
	}
	return env.pg
}

func startPostgres() (*devstack.Postgres, error) {
	dir, err := os.MkdirTemp("", "hookflow-test-")
	if err != nil {
		return nil, err
	}
	// The server runs as the postgres user when we are root; it must be able
	// to reach its data folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	env.dir = dir
	port, err := devstack.FreePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return devstack.StartPostgres(ctx, devstack.PostgresConfig{
		DataDir: filepath.Join(dir, "postgres"),
		Port:    port,
		Fast:    true,
	}, slog.New(slog.DiscardHandler))
}

// OnExit registers f to run when the package's tests are done, before
// Postgres stops (package temporaltest stops its server this way).
func OnExit(f func()) {
	env.mu.Lock()
	defer env.mu.Unlock()
	env.onExit = append(env.onExit, f)
}

// Dir is the package's temporary folder (logs of the services live there).
func Dir(t testing.TB) string {
	postgres(t)
	return env.dir
}

// Postgres returns the package's cluster, starting it on first use.
func Postgres(t testing.TB) *devstack.Postgres { return postgres(t) }

// NewDatabase creates an empty database for this test and returns its URL.
// It is dropped when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	pg := postgres(t)
	name := "t_" + randomHex(6)
	ctx := context.Background()
	if err := pg.EnsureDatabase(ctx, name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, pg.AdminURL("postgres"))
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return pg.AdminURL(name)
}

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
