package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/kit/conformance"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/services/refreceiver"
)

var receiverSettings = []string{"HOOKFLOW_RECEIVER_ADDR", "HOOKFLOW_RECEIVER_SECRET", "HOOKFLOW_RECEIVER_DATABASE_URL", "HOOKFLOW_RECEIVER_RETENTION", "HOOKFLOW_RECEIVER_START"}

// parseSecrets splits a space-separated list and checks each secret.
func parseSecrets(list string) ([]string, error) {
	secrets := strings.Fields(list)
	if len(secrets) == 0 {
		return nil, &config.UsageError{Msg: "HOOKFLOW_RECEIVER_SECRET is required: the endpoint's whsec_ secret(s), space separated"}
	}
	for _, s := range secrets {
		if _, err := webhook.DecodeSecret(s); err != nil {
			return nil, &config.UsageError{Msg: "invalid HOOKFLOW_RECEIVER_SECRET: " + err.Error()}
		}
	}
	return secrets, nil
}

func runReceiverCommand(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "receiver", "Run the reference receiver: a small ledger (data.amount added to a balance per correlation) built on the receiver kit. POST /webhook, GET /correlations/{id}. Applies its own migrations at start, and prunes processed_events below each correlation's cursor after HOOKFLOW_RECEIVER_RETENTION. HOOKFLOW_RECEIVER_START=mid-stream takes up lanes it has never seen wherever they stand (an endpoint re-pointed at a fresh receiver).", args, receiverSettings, nil)
	if err != nil {
		return err
	}
	secrets, err := parseSecrets(cfg.ReceiverSecrets)
	if err != nil {
		return err
	}
	logger := app.NewLogger(env.stderr)
	_, stopTracing, err := startTracing(ctx, env, tracing.ServiceReceiver, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	rcfg := refreceiver.Config{Secrets: secrets, Retention: cfg.ReceiverRetention, StartPosition: cfg.ReceiverStart}
	return serveReceiver(ctx, cfg.ReceiverDatabase, cfg.ReceiverAddr, rcfg, logger)
}

// serveReceiver migrates the receiver's database and serves cfg until ctx
// ends. The receiver logs where it listens once it is bound ("reference
// receiver listening"), not before: the address asked for may be port 0,
// or taken.
func serveReceiver(ctx context.Context, dsn, addr string, cfg refreceiver.Config, logger *slog.Logger) error {
	pool, err := app.ConnectPostgres(ctx, dsn)
	if err != nil {
		return fmt.Errorf("receiver database: %w", err)
	}
	defer pool.Close()
	if err := refreceiver.Migrate(ctx, pool); err != nil {
		return err
	}
	srv, err := refreceiver.New(cfg, refreceiver.Deps{Pool: pool, Logger: logger})
	if err != nil {
		return err
	}
	if err := srv.Run(ctx, addr); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("receiver on %s (HOOKFLOW_RECEIVER_ADDR): %w", addr, err)
	}
	return nil
}

// checkDestination reads the broker destination of endpoint id and
// compares it with the ledger (app.CheckDestination). Exit 1 when it breaks
// its type's promise.
func checkDestination(ctx context.Context, env *cliEnv, cfg config.Config, id string, verbose bool) error {
	report, err := app.CheckDestination(ctx, cfg, id)
	if errors.Is(err, store.ErrNotFound) {
		return &config.UsageError{Msg: "no endpoint " + id}
	}
	if errors.Is(err, app.ErrNotABroker) {
		return &config.UsageError{Msg: err.Error() + " (check a webhook receiver with its URL)"}
	}
	if err != nil {
		return err
	}
	if err := report.Print(env.stdout, verbose); err != nil {
		return err
	}
	if !report.OK() {
		return errors.New("the destination breaks its promise (see the table above)")
	}
	return nil
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runConformance(ctx context.Context, env *cliEnv, args []string) error {
	var secrets stringList
	var timeout time.Duration
	var destination string
	var verbose bool
	cfg, rest, err := config.LoadWithFlags("conformance", "Fire the wire contract's hard cases at a receiver URL and print a pass/fail table:\n  hookflow conformance <url> --secret whsec_… [--secret whsec_old…]\nThe first secret is the endpoint's current one. Exit 1 on any failure.\n"+
		"Or read what a broker destination holds and compare it with the ledger, lane by lane (missing, repeated, out of order, badly chained or signed):\n  hookflow conformance --destination ep_… (with HOOKFLOW_DATABASE_URL)",
		concat(dbSettings, []string{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST"}), args, env.getenv, nil, env.stdout, func(fs *flag.FlagSet) {
			fs.Var(&secrets, "secret", "the endpoint's whsec_ secret (repeat for a rotation; first = current)")
			fs.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
			fs.StringVar(&destination, "destination", "", "a broker endpoint's id: check what its destination holds")
			fs.BoolVar(&verbose, "verbose", false, "with --destination: a line for every lane, not only those with a finding")
		})
	if err != nil {
		return err
	}
	if destination != "" {
		if len(rest) != 0 || len(secrets) != 0 {
			return &config.UsageError{Msg: "conformance --destination takes no URL and no --secret: it reads both from the ledger"}
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return checkDestination(ctx, env, cfg, destination, verbose)
	}
	if len(rest) != 1 {
		return &config.UsageError{Msg: "conformance takes one receiver URL: hookflow conformance <url> --secret whsec_…"}
	}
	if len(secrets) == 0 {
		return &config.UsageError{Msg: "conformance needs --secret whsec_… (the endpoint's signing secret)"}
	}
	for _, s := range secrets {
		if _, err := webhook.DecodeSecret(s); err != nil {
			return &config.UsageError{Msg: "invalid --secret: " + err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	report, err := conformance.Run(ctx, conformance.Config{URL: rest[0], Secrets: secrets})
	if err != nil {
		if strings.HasPrefix(err.Error(), "conformance config") {
			return &config.UsageError{Msg: err.Error()}
		}
		return err
	}
	if err := report.Print(env.stdout); err != nil {
		return err
	}
	if !report.OK() {
		return errors.New("the receiver breaks the contract (see the table above)")
	}
	return nil
}
