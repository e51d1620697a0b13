package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"

	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/schema"
)

var (
	dbSettings       = []string{"HOOKFLOW_DATABASE_URL"}
	temporalSettings = []string{"HOOKFLOW_TEMPORAL_ADDRESS", "HOOKFLOW_TEMPORAL_NAMESPACE", "HOOKFLOW_TASK_QUEUE"}
	// HOOKFLOW_EVENT_MAX_HISTORY is here, not the API's alone: a worker's
	// starter starts event workflows too (a terminated event restarted
	// when a release reaches it), and they must continue as new alike.
	deliverySettings = []string{"HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_DELIVERY_TIMEOUT", "HOOKFLOW_PRIVATE_TARGET_ALLOWLIST", "HOOKFLOW_CIRCUIT_CLOSE_SUCCESSES", "HOOKFLOW_EVENT_MAX_HISTORY"}
	apiSettings      = []string{"HOOKFLOW_API_ADDR", "HOOKFLOW_API_TOKEN", "HOOKFLOW_MAX_BODY_BYTES", "HOOKFLOW_REPAIR_AFTER", "HOOKFLOW_STATEMENT_TIMEOUT", "HOOKFLOW_EVENTS_RATE_LIMIT", "HOOKFLOW_READS_RATE_LIMIT", "HOOKFLOW_METRICS_ADDR",
		"HOOKFLOW_MAX_ENDPOINTS", "HOOKFLOW_MAX_SUBSCRIBERS",
		"HOOKFLOW_PORTAL_BASE_URL",
		"HOOKFLOW_PAYLOAD_RETENTION", "HOOKFLOW_ATTEMPT_RETENTION", "HOOKFLOW_KEY_RETENTION", "HOOKFLOW_CLEANER_INTERVAL"}
)

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func runMigrate(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "migrate", "Apply pending migrations to hookflow's database (idempotent).", args, dbSettings, nil)
	if err != nil {
		return err
	}
	pool, err := app.ConnectPostgres(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := schema.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(env.stdout, "schema is current; nothing to apply")
		return nil
	}
	fmt.Fprintf(env.stdout, "applied: %s\n", strings.Join(applied, ", "))
	return nil
}

func runAPICommand(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "api", "Serve the REST API. Accepted events are stored, then their workflows started.", args,
		concat(dbSettings, temporalSettings, deliverySettings, apiSettings), nil)
	if err != nil {
		return err
	}
	// Before anything connects: a weak token is a setting to fix.
	if err := api.CheckToken(cfg.APIToken, false); err != nil {
		return &config.UsageError{Msg: err.Error()}
	}
	logger := app.NewLogger(env.stderr)
	interceptors, stopTracing, err := startTracing(ctx, env, tracing.ServiceAPI, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	st, reqPool, err := app.ConnectAPIStore(ctx, cfg.DatabaseURL, cfg.StatementTimeout)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	defer reqPool.Close()
	c, err := app.TemporalClient(ctx, cfg, logger, app.Lazy(), app.WithInterceptors(interceptors...))
	if err != nil {
		return err
	}
	defer c.Close()
	return app.ServeAPI(ctx, cfg, st, c, logger, app.WithRequestPool(reqPool), app.OnReady(func(a app.Addrs) { logger.Info("api listening", "addr", a.API, "metrics_addr", a.Metrics) }))
}

func runWorkerCommand(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "worker", "Run a worker on the task queue until SIGTERM, then drain.", args,
		// No HOOKFLOW_API_TOKEN: a worker never calls the API, and it is the
		// process that talks to untrusted hosts.
		concat(dbSettings, temporalSettings, deliverySettings, []string{"HOOKFLOW_METRICS_ADDR"}), nil)
	if err != nil {
		return err
	}
	logger := app.NewLogger(env.stderr)
	interceptors, stopTracing, err := startTracing(ctx, env, tracing.ServiceWorker, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	var m *metrics.Metrics // nil records nothing
	if cfg.MetricsAddr != "" {
		if m, err = app.NewMetrics(logger); err != nil {
			return err
		}
	}
	c, err := app.TemporalClient(ctx, cfg, logger, app.WithMetrics(m), app.WithInterceptors(interceptors...))
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := app.StartWorker(cfg, st, c, logger, app.WithMetrics(m))
	if err != nil {
		return err
	}
	logger.Info("worker started", "task_queue", cfg.TaskQueue)
	metricsDone := make(chan error, 1)
	if m != nil {
		go func() {
			metricsDone <- app.ServeMetrics(ctx, cfg.MetricsAddr, m, func(addr string) { logger.Info("worker metrics", "url", "http://"+addr+"/metrics") })
		}()
	} else {
		metricsDone <- nil
	}
	select {
	case <-ctx.Done():
	case err := <-metricsDone:
		if err != nil {
			w.Stop()
			return err
		}
		<-ctx.Done()
	}
	w.Stop()
	logger.Info("worker stopped")
	return nil
}
