// Package temporaltest gives integration tests a real Temporal server: one
// embedded server per test package, persisting to the package's testenv
// Postgres, started on first use and stopped by testenv.Main.
package temporaltest

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookflow/hookflow/internal/temporaldev"
	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/lab/testenv"
)

// Namespace is the namespace the test server registers.
const Namespace = "default"

// server is the package's one Temporal server, shared by its tests.
var server struct {
	mu  sync.Mutex
	srv *temporaldev.Server
	err error
}

// Server returns the package's Temporal server, starting it on first use. A
// server that cannot start fails the test; it is never skipped.
func Server(t testing.TB) *temporaldev.Server {
	t.Helper()
	pg := testenv.Postgres(t)
	dir := testenv.Dir(t)
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.srv == nil && server.err == nil {
		server.srv, server.err = start(pg, dir)
		if server.err == nil {
			testenv.OnExit(server.srv.Stop)
		}
	}
	if server.err != nil {
		t.Fatalf("temporaltest: %v", server.err)
	}
	return server.srv
}

func start(pg *localpg.Cluster, dir string) (*temporaldev.Server, error) {
	port, err := localpg.FreeLowPort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return temporaldev.Start(ctx, temporaldev.Config{
		Postgres:  pg,
		Port:      port,
		Namespace: Namespace,
		LogFile:   filepath.Join(dir, "temporal.log"),
	}, slog.New(slog.DiscardHandler))
}
