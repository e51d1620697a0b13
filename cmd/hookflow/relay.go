package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/kit/outbox"
	"github.com/hookflow/hookflow/services/relay"
)

// runRelay is hookflow relay: it moves the producer's outbox rows into
// hookflow until SIGTERM. `hookflow relay migrate` applies the outbox schema
// to the outbox database instead, and exits.
func runRelay(ctx context.Context, env *cliEnv, args []string) error {
	cfg, rest, err := loadConfig(env, "relay",
		"Move transactional-outbox rows into hookflow's ledger and start their workflows, until SIGTERM.\n"+
			"`hookflow relay migrate` applies the outbox table's migrations to the outbox database and exits.", args,
		concat(dbSettings, []string{"HOOKFLOW_OUTBOX_DATABASE_URL"}, temporalSettings,
			// The workflow input carries both: keep them equal to the API's.
			[]string{"HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_DELIVERY_TIMEOUT"},
			// Routed as the API routes: keep it equal to the API's.
			[]string{"HOOKFLOW_MAX_SUBSCRIBERS"}), nil)
	if err != nil {
		return err
	}
	migrate := false
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && rest[0] == "migrate":
		migrate = true
	default:
		return &config.UsageError{Msg: fmt.Sprintf("unexpected argument %q (hookflow relay [migrate])", rest[0])}
	}
	outboxURL := cmp.Or(cfg.OutboxDatabaseURL, cfg.DatabaseURL)
	if _, err := pgxpool.ParseConfig(outboxURL); err != nil {
		return &config.UsageError{Msg: "invalid HOOKFLOW_OUTBOX_DATABASE_URL: " + err.Error()}
	}
	logger := app.NewLogger(env.stderr)

	outboxPool, err := app.ConnectPostgres(ctx, outboxURL)
	if err != nil {
		return fmt.Errorf("outbox database: %w", err)
	}
	defer outboxPool.Close()
	if migrate {
		if err := outbox.Migrate(ctx, outboxPool); err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, "outbox schema is current")
		return nil
	}
	if err := outbox.CheckMigrations(ctx, outboxPool); err != nil {
		if errors.Is(err, outbox.ErrMigrationsPending) {
			return fmt.Errorf("%w: run `hookflow relay migrate` first", err)
		}
		return err
	}
	src, err := outbox.NewSource(outboxPool)
	if err != nil {
		return err
	}

	interceptors, stopTracing, err := startTracing(ctx, env, tracing.ServiceRelay, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	// Lazy: the relay runs (and keeps rows pending) while Temporal is down.
	c, err := app.TemporalClient(ctx, cfg, logger, app.Lazy(), app.WithInterceptors(interceptors...))
	if err != nil {
		return err
	}
	defer c.Close()
	strt, err := app.NewStarter(cfg, st, c, logger)
	if err != nil {
		return err
	}
	// The unscoped store: each outbox row goes into its own tenant's ledger.
	r, err := relay.New(relay.Config{MaxSubscribers: cfg.MaxSubscribers}, relay.Deps{Outbox: src, Ledgers: relay.StoreLedgers(st), Starter: strt, Logger: logger})
	if err != nil {
		return err
	}
	logger.Info("relay started", "task_queue", cfg.TaskQueue)
	err = r.Run(ctx)
	logger.Info("relay stopped")
	return err
}
