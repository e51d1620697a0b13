//go:build !deploy

package main

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/temporaltest"
	"github.com/hookflow/hookflow/services/refreceiver"
)

// TestDemoAgainstDevStack runs `hookflow demo` against what `hookflow dev`
// runs (API, worker, reference receiver with the dev endpoint), on real
// Temporal and Postgres.
func TestDemoAgainstDevStack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := testenv.Logger(t)

	// The reference receiver on its own database.
	rpool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(rpool.Close)
	require.NoError(t, refreceiver.Migrate(ctx, rpool))
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	rsrv, err := refreceiver.New(refreceiver.Config{Secrets: []string{secret}}, refreceiver.Deps{Pool: rpool, Logger: logger})
	require.NoError(t, err)
	rhs := httptest.NewServer(rsrv.Handler())
	t.Cleanup(rhs.Close)

	apiURL, cfg, st, c := testAPI(t, ctx, "demo-token-for-the-cli-test-0123456789")
	st = st.Tenant(store.DefaultTenant)
	require.NoError(t, ensureDevEndpoint(ctx, st, rhs.URL+"/webhook", secret))
	w, err := app.StartWorker(cfg, st, c, logger)
	require.NoError(t, err)
	t.Cleanup(w.Stop)

	code, out, stderr := runWith(map[string]string{"HOOKFLOW_API_URL": apiURL, "HOOKFLOW_API_TOKEN": cfg.APIToken},
		"demo", "--receiver-url", rhs.URL, "--namespace", temporaltest.Namespace, "--wait", "60s")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr: %s", out, stderr)
	t.Log(out)
	for _, want := range []string{
		"-1, ", "(last sequence 3", // applied in order
		"dead letter ", "401", "last delivered 0, parked [2 3], held by 1 (dead_lettered)",
		"last delivered 3, parked []", // the healthy lane never waited
		"last delivered 0, parked [3], held by 2 (dead_lettered)",
		"EndpointIds%3D%22ep_",
		"/namespaces/" + temporaltest.Namespace + "/workflows?query=CorrelationId%3D%22demo-",
		"/namespaces/" + temporaltest.Namespace + "/workflows/" + url.PathEscape(contract.EventWorkflowID(contract.DefaultTenant, "demo-")),
	} {
		require.Contains(t, out, want)
	}
}
