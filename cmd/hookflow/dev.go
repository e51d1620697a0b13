//go:build !deploy

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/webhook"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/natsdev"
	"github.com/hookflow/hookflow/internal/temporaldev"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/schema"
	"github.com/hookflow/hookflow/services/refreceiver"
)

var devSettings = []string{"HOOKFLOW_DATA_DIR", "HOOKFLOW_DEV_TEMPORAL_PORT", "HOOKFLOW_DEV_UI_PORT", "HOOKFLOW_DEV_POSTGRES_PORT", "HOOKFLOW_DEV_WORKERS",
	"HOOKFLOW_DEV_NATS_PORT", "HOOKFLOW_DEV_TEMPORAL_RETENTION", "HOOKFLOW_RECEIVER_ADDR", "HOOKFLOW_RECEIVER_RETENTION", "HOOKFLOW_RECEIVER_START"}

// runDev starts the whole stack in the foreground and stops it, in reverse
// order, on Ctrl-C. Everything persists under HOOKFLOW_DATA_DIR, so a second
// start resumes where the first stopped.
func runDev(ctx context.Context, env *cliEnv, args []string) error {
	cfg, _, err := loadConfig(env, "dev", "Run everything on this machine without Docker: Postgres from the local server binaries, an embedded Temporal server with its Web UI, migrations, the API, workers and the reference receiver.", args,
		concat([]string{"HOOKFLOW_TEMPORAL_NAMESPACE", "HOOKFLOW_TASK_QUEUE"}, deliverySettings, apiSettings, devSettings),
		map[string]string{"HOOKFLOW_API_TOKEN": devToken, "HOOKFLOW_METRICS_ADDR": "127.0.0.1:9090"})
	if err != nil {
		return err
	}
	// The dev stack's receivers listen on loopback, and so will yours; its
	// token is the well-known dev-token.
	cfg.AllowPrivate, cfg.Dev = true, true
	logger := app.NewLogger(env.stderr)
	began := time.Now()
	interceptors, stopTracing, err := startTracing(ctx, env, tracing.ServiceDev, logger)
	if err != nil {
		return err
	}
	defer stopTracing()

	// Check every port first: a clash should cost one line, not a half-started stack.
	for _, p := range []struct {
		name string
		addr string
	}{
		{"HOOKFLOW_DEV_POSTGRES_PORT", hostPort(cfg.DevPostgresPort)},
		{"HOOKFLOW_DEV_TEMPORAL_PORT", hostPort(cfg.DevTemporalPort)},
		{"HOOKFLOW_DEV_UI_PORT", hostPort(cfg.DevUIPort)},
		{"HOOKFLOW_DEV_NATS_PORT", hostPort(cfg.DevNATSPort)},
		{"HOOKFLOW_API_ADDR", cfg.APIAddr},
		{"HOOKFLOW_METRICS_ADDR", cfg.MetricsAddr},
		{"HOOKFLOW_RECEIVER_ADDR", cfg.ReceiverAddr},
	} {
		if p.addr == hostPort(0) {
			continue // not served
		}
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s: %s is in use (pick another with %s)", p.name, p.addr, p.name)
		}
		ln.Close()
	}

	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("resolve HOOKFLOW_DATA_DIR: %w", err)
	}
	// 0755: as root, Postgres runs as the postgres user and must reach its folder.
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create HOOKFLOW_DATA_DIR: %w", err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil {
		return fmt.Errorf("chmod HOOKFLOW_DATA_DIR: %w", err)
	}

	// As root, Postgres runs as the postgres user; a clone under a 0700
	// /root is out of its reach, so the cluster then lives under
	// localpg.SharedDataHome (the banner says where).
	pgData, _, err := localpg.DataDirFor(filepath.Join(dataDir, "postgres"))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	pg, err := localpg.Start(ctx, localpg.Config{
		DataDir: pgData, Port: cfg.DevPostgresPort, LogFile: filepath.Join(dataDir, "postgres.log"),
	}, logger)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer pg.Stop()
	for _, db := range []string{"hookflow", "hookflow_receiver"} {
		if err := pg.EnsureDatabase(ctx, db); err != nil {
			return err
		}
	}
	cfg.DatabaseURL = pg.AdminURL("hookflow")

	tmp, err := temporaldev.Start(ctx, temporaldev.Config{
		Postgres: pg, Port: cfg.DevTemporalPort, UIPort: cfg.DevUIPort, Namespace: cfg.TemporalNamespace,
		LogFile: filepath.Join(dataDir, "temporal.log"), Retention: cfg.DevTemporalRetention,
	}, logger)
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	defer tmp.Stop()
	cfg.TemporalAddress = tmp.Address()

	// A broker to try broker destinations with, as the reference receiver
	// is a webhook receiver to try webhooks with.
	natsURL := ""
	if cfg.DevNATSPort != 0 {
		ns, err := natsdev.Start(ctx, filepath.Join(dataDir, "nats"), cfg.DevNATSPort)
		if err != nil {
			return err
		}
		defer ns.Stop()
		natsURL = ns.URL()
	}

	pool, err := app.ConnectPostgres(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	applied, err := schema.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		logger.Info("migrations applied", "names", applied)
	}
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	// One registry: the API's /metrics shows the in-process workers too.
	m, err := app.NewMetrics(logger)
	if err != nil {
		return err
	}
	c, err := app.TemporalClient(ctx, cfg, logger, app.WithMetrics(m), app.WithInterceptors(interceptors...))
	if err != nil {
		return err
	}
	defer c.Close()

	var workers []sdkworker.Worker
	defer func() {
		for _, w := range workers {
			w.Stop()
		}
	}()
	for i := 0; i < cfg.DevWorkers; i++ {
		w, err := app.StartWorker(cfg, st, c, logger, app.WithMetrics(m))
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}

	// The reference receiver, with a dev endpoint pointing at it, so a
	// newcomer can post events and watch them land without writing anything.
	secret, err := devReceiverSecret(filepath.Join(dataDir, "receiver-secret"))
	if err != nil {
		return err
	}
	receiverURL := "http://" + cfg.ReceiverAddr + "/webhook"
	if err := ensureDevEndpoint(ctx, st.Tenant(store.DefaultTenant), receiverURL, secret); err != nil {
		return err
	}
	rctx, stopReceiver := context.WithCancel(ctx)
	receiverDone := make(chan error, 1)
	go func() {
		receiverDone <- serveReceiver(rctx, pg.AdminURL("hookflow_receiver"), cfg.ReceiverAddr,
			refreceiver.Config{Secrets: []string{secret}, Retention: cfg.ReceiverRetention, StartPosition: cfg.ReceiverStart}, logger)
	}()
	defer func() { stopReceiver(); <-receiverDone }()

	return app.ServeAPI(ctx, cfg, st, c, logger, app.WithMetrics(m), app.OnReady(func(a app.Addrs) {
		printBanner(env, cfg, a, tmp, pg, receiverURL, natsURL, time.Since(began))
		printPortalLink(ctx, env, cfg, a)
	}))
}

// devReceiverSecret returns the dev receiver's secret, made once and kept
// in the data folder so the endpoint and the receiver agree across restarts.
func devReceiverSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	}
	s, err := webhook.NewSecret()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save dev receiver secret: %w", err)
	}
	return s, nil
}

func ensureDevEndpoint(ctx context.Context, st *store.Store, url, secret string) error {
	ep, err := st.EndpointGet(ctx, devEndpointID)
	if errors.Is(err, store.ErrNotFound) {
		_, err = st.EndpointInsert(ctx, devEndpointID, url, secret, nil)
		return err
	}
	if err != nil {
		return err
	}
	if ep.URL != url {
		// The dev receiver moved with this run's port: the headers set on
		// it are for it still, and go with it (sent again, as a change of
		// origin must).
		headers := ep.Settings.Headers
		_, err = st.EndpointUpdate(ctx, devEndpointID, store.EndpointChange{URL: &url, Headers: &headers,
			By: store.Actor{ID: "hookflow-dev", Name: "hookflow dev"}})
	}
	return err
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func printBanner(env *cliEnv, cfg config.Config, addrs app.Addrs, tmp *temporaldev.Server, pg *localpg.Cluster, receiverURL, natsURL string, took time.Duration) {
	w := env.stdout
	fmt.Fprintf(w, "\nhookflow dev is up (%.1fs). Ctrl-C stops everything.\n\n", took.Seconds())
	fmt.Fprintf(w, "  API            http://%s   (Authorization: Bearer %s)\n", addrs.API, cfg.APIToken)
	if addrs.Metrics != "" {
		fmt.Fprintf(w, "  Metrics        http://%s/metrics\n", addrs.Metrics)
	}
	if ui := tmp.UIURL(); ui != "" {
		fmt.Fprintf(w, "  Temporal UI    %s/namespaces/%s/workflows\n", ui, cfg.TemporalNamespace)
	} else {
		fmt.Fprintf(w, "  Temporal UI    off (HOOKFLOW_DEV_UI_PORT=0)\n")
	}
	fmt.Fprintf(w, "  Temporal       %s   namespace %s, task queue %s\n", tmp.Address(), cfg.TemporalNamespace, cfg.TaskQueue)
	fmt.Fprintf(w, "  Postgres       %s\n", pg.AdminURL("hookflow"))
	fmt.Fprintf(w, "  Workers        %s in-process\n", strconv.Itoa(cfg.DevWorkers))
	fmt.Fprintf(w, "  Receiver       %s   (reference ledger; GET %s/correlations/{id})\n", receiverURL, strings.TrimSuffix(receiverURL, "/webhook"))
	fmt.Fprintf(w, "  Dev endpoint   %s   (points at the receiver; use it as endpoint_id)\n", devEndpointID)
	if natsURL != "" {
		fmt.Fprintf(w, "  NATS           %s   (JetStream; stream %s captures %s: a nats endpoint's subject goes under dev.)\n", natsURL, natsdev.Stream, natsdev.Subjects)
	}
	fmt.Fprintf(w, "  Data           %s\n", cfg.DataDir)
	if abs, _ := filepath.Abs(cfg.DataDir); !strings.HasPrefix(pg.DataDir(), abs+string(filepath.Separator)) {
		fmt.Fprintf(w, "  Postgres data  %s   (the postgres user cannot reach the data folder)\n", pg.DataDir())
	}
	fmt.Fprintln(w)
}

// printPortalLink opens a customer portal session of the default tenant
// through the API that just started, and prints its link, so a newcomer
// sees the page in the first minute. The link is good once, within a
// minute, as every portal link is; the line after it says how to get
// another.
func printPortalLink(ctx context.Context, env *cliEnv, cfg config.Config, addrs app.Addrs) {
	w := env.stdout
	api := "http://" + addrs.API
	link, err := devPortalLink(ctx, api, cfg.APIToken)
	if err != nil {
		fmt.Fprintf(w, "  Portal         not opened: %v\n\n", err)
		return
	}
	fmt.Fprintf(w, "  Portal         %s\n", link)
	fmt.Fprintf(w, "                 (the default tenant's customer portal, every capability; open it within a minute, once. Another:\n")
	fmt.Fprintf(w, "                 curl -s -XPOST %s/v1/tenants/default/portal-sessions -H 'Authorization: Bearer %s' \\\n", api, cfg.APIToken)
	fmt.Fprintf(w, "                   -H 'Content-Type: application/json' -d '{\"actor\":\"you\",\"capabilities\":[\"endpoints:manage\",\"endpoints:secret\",\"dead-letters:write\"]}')\n\n")
}

// devPortalLink opens the default tenant's portal session, with every
// capability, for the dev user.
func devPortalLink(ctx context.Context, api, token string) (string, error) {
	c, err := client.New(api, token, client.WithUserAgent("hookflow-dev"))
	if err != nil {
		return "", fmt.Errorf("api client: %w", err)
	}
	r, err := c.PortalSessionCreateWithResponse(ctx, store.DefaultTenant, client.PortalSessionCreate{Actor: "dev@localhost",
		Capabilities: []client.PortalCapability{client.PortalCapabilityEndpointsManage, client.PortalCapabilityEndpointsSecret,
			client.PortalCapabilityDeadLettersWrite}})
	if err != nil {
		return "", fmt.Errorf("open portal session: %w", err)
	}
	return r.JSON201.URL, nil
}
