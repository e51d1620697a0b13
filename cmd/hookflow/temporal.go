//go:build !deploy

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/temporaldev"
	"github.com/hookflow/hookflow/kit/localpg"
)

// runTemporal runs only the embedded Temporal server (and its UI) on an
// existing local Postgres, as its own process: chaos and bench restart it
// and measure its CPU apart from hookflow's.
func runTemporal(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "temporal", "Run only the embedded Temporal server with its Web UI, persisting to the local Postgres on HOOKFLOW_DEV_POSTGRES_PORT (superuser postgres, trust auth), until SIGTERM.", args,
		[]string{"HOOKFLOW_TEMPORAL_NAMESPACE", "HOOKFLOW_DATA_DIR", "HOOKFLOW_DEV_TEMPORAL_PORT", "HOOKFLOW_DEV_UI_PORT", "HOOKFLOW_DEV_POSTGRES_PORT", "HOOKFLOW_DEV_TEMPORAL_RETENTION"}, nil)
	if err != nil {
		return err
	}
	logger := app.NewLogger(env.stderr)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create HOOKFLOW_DATA_DIR: %w", err)
	}
	srv, err := temporaldev.Start(ctx, temporaldev.Config{
		Postgres: localpg.Attach(cfg.DevPostgresPort), Port: cfg.DevTemporalPort, UIPort: cfg.DevUIPort,
		Namespace: cfg.TemporalNamespace, LogFile: filepath.Join(cfg.DataDir, "temporal.log"), Retention: cfg.DevTemporalRetention,
	}, logger)
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	logger.Info("temporal server running", "address", srv.Address(), "ui", srv.UIURL())
	<-ctx.Done()
	srv.Stop()
	return nil
}
