// Package temporaldev runs an embedded Temporal server (every service in
// this process, Postgres persistence through the postgres12 plugin) with its
// Web UI, for hookflow dev and the integration tests. It is apart from
// package localpg so that code needing only Postgres does not link the
// Temporal server.
package temporaldev

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // registers the postgres12 plugin
	"go.temporal.io/server/temporal"
	toolschema "go.temporal.io/server/tools/common/schema"
	toolsql "go.temporal.io/server/tools/sql"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/localpg"
)

// searchAttributes are the custom search attributes hookflow's workflows set
// (package contract names them), registered on every namespace so the Web
// UI can filter by them.
func searchAttributes() map[string]enumspb.IndexedValueType {
	out := map[string]enumspb.IndexedValueType{}
	for _, k := range []sdktemporal.SearchAttributeKey{contract.TenantIDKey, contract.CorrelationIDKey, contract.SequenceKey, contract.DeliveryStateKey, contract.EndpointIDsKey, contract.DeadLetteredEndpointIDsKey} {
		out[k.GetName()] = k.GetValueType()
	}
	return out
}

// Config describes the embedded Temporal server.
type Config struct {
	// Postgres is the cluster that stores Temporal's persistence and visibility.
	Postgres *localpg.Cluster
	// DatabasePrefix names the two databases: <prefix> and <prefix>_visibility.
	DatabasePrefix string
	// Port is the frontend gRPC port on 127.0.0.1.
	Port int
	// UIPort serves the Web UI on 127.0.0.1; 0 means no UI.
	UIPort int
	// Namespace is registered (with the search attributes) at start.
	Namespace string
	// LogFile receives the server's own log (warnings and errors).
	LogFile string
	// NumHistoryShards is fixed at the first start of a database.
	NumHistoryShards int32
	// Retention is how long the namespace keeps closed workflows (default,
	// and minimum, one day); set again at every start.
	Retention time.Duration
}

// Server is a running embedded Temporal server.
type Server struct {
	cfg    Config
	server temporal.Server
	ui     *uiserver.Server
}

// Start sets up (or upgrades) the schema in the given Postgres and
// starts a Temporal server with every service in this process.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if cfg.DatabasePrefix == "" {
		cfg.DatabasePrefix = "temporal"
	}
	if cfg.NumHistoryShards == 0 {
		cfg.NumHistoryShards = 4
	}
	if cfg.Port >= 32768 {
		return nil, fmt.Errorf("temporal port %d: must be below 32768 (Temporal stores ports as smallint)", cfg.Port)
	}
	if err := localpg.PortFree(cfg.Port); err != nil {
		return nil, err
	}
	if cfg.UIPort != 0 {
		if err := localpg.PortFree(cfg.UIPort); err != nil {
			return nil, err
		}
	}
	tl := tlog.NewZapLogger(tlog.BuildZapLogger(tlog.Config{Level: "warn", Format: "json", OutputFile: cfg.LogFile}))

	mainDB := cfg.sqlConfig(cfg.DatabasePrefix)
	visDB := cfg.sqlConfig(cfg.DatabasePrefix + "_visibility")
	if err := setupSchema(ctx, cfg.Postgres, mainDB, "postgresql/v12/temporal", tl); err != nil {
		return nil, err
	}
	if err := setupSchema(ctx, cfg.Postgres, visDB, "postgresql/v12/visibility", tl); err != nil {
		return nil, err
	}
	if err := forgetMembers(ctx, cfg.Postgres, cfg.DatabasePrefix); err != nil {
		return nil, err
	}

	conf, err := cfg.serverConfig(mainDB, visDB)
	if err != nil {
		return nil, err
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		dynamicconfig.EnableEagerWorkflowStart.Key():                true,
		// One partition per task queue, as the Temporal CLI's dev server
		// does: a single-node stack with a handful of pollers gains nothing
		// from four, and loses time forwarding tasks and polls between them.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(tl),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("build temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	t := &Server{cfg: cfg, server: srv}
	if err := t.prepareNamespace(ctx); err != nil {
		t.Stop()
		return nil, err
	}
	if cfg.UIPort != 0 {
		t.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
			Host:                "127.0.0.1",
			Port:                cfg.UIPort,
			TemporalGRPCAddress: t.Address(),
			EnableUI:            true,
			DefaultNamespace:    cfg.Namespace,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			HideLogs:            true,
		}))
		go func() {
			if err := t.ui.Start(); err != nil && !errors.Is(err, net.ErrClosed) {
				logger.Error("temporal web ui stopped", "error", err)
			}
		}()
	}
	return t, nil
}

// Address is the frontend's host:port.
func (t *Server) Address() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.cfg.Port))
}

// UIURL is the Web UI's base URL, or "" without a UI.
func (t *Server) UIURL() string {
	if t.cfg.UIPort == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", t.cfg.UIPort)
}

// Stop stops the UI and the server.
func (t *Server) Stop() {
	if t.ui != nil {
		t.ui.Stop()
	}
	_ = t.server.Stop()
}

func (cfg Config) sqlConfig(db string) *config.SQL {
	return &config.SQL{
		PluginName:      "postgres12",
		DatabaseName:    db,
		ConnectAddr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Postgres.Port())),
		ConnectProtocol: "tcp",
		User:            "postgres",
		MaxConns:        20,
		MaxIdleConns:    20,
		MaxConnLifetime: time.Hour,
	}
}

// forgetMembers clears the membership rows a previous run left behind. All
// services run in this one process on fresh ports, so every stored member is
// gone; left in place, the ring keeps routing to them ("Not enough hosts to
// serve the request") until they expire, about 40 s after a restart.
func forgetMembers(ctx context.Context, pg *localpg.Cluster, db string) error {
	conn, err := pgx.Connect(ctx, pg.AdminURL(db))
	if err != nil {
		return fmt.Errorf("connect %s: %w", db, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DELETE FROM cluster_membership"); err != nil {
		return fmt.Errorf("clear stale cluster membership: %w", err)
	}
	return nil
}

// setupSchema creates the database and brings its schema to the version this
// server build ships, the way temporal-sql-tool setup-schema/update-schema do.
func setupSchema(ctx context.Context, pg *localpg.Cluster, sqlCfg *config.SQL, schemaName string, tl tlog.Logger) error {
	if err := pg.EnsureDatabase(ctx, sqlCfg.DatabaseName); err != nil {
		return err
	}
	conn, err := toolsql.NewConnection(sqlCfg, tl)
	if err != nil {
		return fmt.Errorf("connect %s: %w", sqlCfg.DatabaseName, err)
	}
	defer conn.Close()
	if _, err := conn.ReadSchemaVersion(); err != nil {
		setup := toolschema.NewSetupSchemaTask(conn, &toolschema.SetupConfig{InitialVersion: "0.0"}, tl)
		if err := setup.Run(); err != nil {
			return fmt.Errorf("set up temporal schema in %s: %w", sqlCfg.DatabaseName, err)
		}
	}
	update := toolschema.NewUpdateSchemaTask(conn, &toolschema.UpdateConfig{DBName: sqlCfg.DatabaseName, SchemaName: schemaName}, tl)
	if err := update.Run(); err != nil {
		return fmt.Errorf("update temporal schema in %s: %w", sqlCfg.DatabaseName, err)
	}
	return nil
}

func (cfg Config) serverConfig(mainDB, visDB *config.SQL) (*config.Config, error) {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = "127.0.0.1"
	conf.Persistence.DefaultStore = "default"
	conf.Persistence.VisibilityStore = "visibility"
	conf.Persistence.NumHistoryShards = cfg.NumHistoryShards
	conf.Persistence.DataStores = map[string]config.DataStore{
		"default":    {SQL: mainDB},
		"visibility": {SQL: visDB},
	}
	conf.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        "active",
		CurrentClusterName:       "active",
		ClusterInformation: map[string]cluster.ClusterInformation{
			"active": {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)),
				ClusterID:              "hookflow-dev",
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range []string{"frontend", "history", "matching", "worker"} {
		var svc config.Service
		if name == "frontend" {
			svc.RPC.GRPCPort = cfg.Port
			svc.RPC.BindOnIP = "127.0.0.1"
		} else {
			p, err := localpg.FreeLowPort()
			if err != nil {
				return nil, err
			}
			svc.RPC.GRPCPort = p
			svc.RPC.BindOnLocalHost = true
		}
		mp, err := localpg.FreeLowPort()
		if err != nil {
			return nil, err
		}
		svc.RPC.MembershipPort = mp
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	return &conf, nil
}

// prepareNamespace registers the namespace and hookflow's search attributes;
// both are no-ops when they already exist (a warm start).
func (t *Server) prepareNamespace(ctx context.Context) error {
	c, err := client.Dial(client.Options{HostPort: t.Address(), Logger: nopLogger{}})
	if err != nil {
		return fmt.Errorf("dial embedded temporal: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	retention := max(t.cfg.Retention, 24*time.Hour)
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        t.cfg.Namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if errors.As(err, &exists) {
		// A warm start: the retention may have been changed since.
		_, err = c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
			Namespace: t.cfg.Namespace,
			Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(retention)},
		})
	}
	if err != nil {
		return fmt.Errorf("register namespace %s: %w", t.cfg.Namespace, err)
	}
	// A namespace just registered reaches the frontend's cache a moment later.
	for {
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        t.cfg.Namespace,
			SearchAttributes: searchAttributes(),
		})
		var already *serviceerror.AlreadyExists
		if err == nil || errors.As(err, &already) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register search attributes: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	// Wait until the namespace serves reads, so callers can start at once.
	for {
		_, err = c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: t.cfg.Namespace, PageSize: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not ready: %w", t.cfg.Namespace, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// nopLogger silences the SDK client used for set-up.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
