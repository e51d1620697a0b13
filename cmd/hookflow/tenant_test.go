//go:build !deploy

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/temporaltest"
	"github.com/hookflow/hookflow/schema"
)

// testAPI serves the API on a fresh, migrated database and the test's
// Temporal server until the test ends, and returns its URL, its
// configuration and its store (the unscoped one).
func testAPI(t *testing.T, ctx context.Context, token string) (string, config.Config, *store.Store, client.Client) {
	t.Helper()
	tmp := temporaltest.Server(t)
	cfg := config.Config{
		DatabaseURL: testenv.NewDatabase(t), TemporalAddress: tmp.Address(), TemporalNamespace: temporaltest.Namespace,
		TaskQueue: testenv.TaskQueue(t), APIAddr: "127.0.0.1:0", APIToken: token,
		RecoveryWindow: time.Minute, DeliveryTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20, AllowPrivate: true,
	}
	pool, err := app.ConnectPostgres(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
	pool.Close()
	st, err := app.ConnectStore(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	logger := testenv.Logger(t)
	c, err := app.TemporalClient(ctx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithCancel(ctx)
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- app.ServeAPI(ctx, cfg, st, c, logger, app.OnReady(func(a app.Addrs) { ready <- a.API }))
	}()
	select {
	case a := <-ready:
		t.Cleanup(func() { cancel(); <-done })
		return "http://" + a, cfg, st, c
	case err := <-done:
		cancel()
		t.Fatalf("api did not start: %v", err)
	}
	return "", cfg, st, c
}

// TestCLITenant: --tenant and HOOKFLOW_TENANT make status, dlq
// and keys act on a tenant through the real API; status with no tenant
// named lists the worst tenants to an operator, and not to a tenant's key;
// keys create --tenant issues a key confined to the tenant; a tenant that
// does not exist, or cannot, is one readable line and a non-zero exit.
func TestCLITenant(t *testing.T) {
	ctx := context.Background()
	const token = "cli-tenant-token-for-the-cli-test-0123456789"
	apiURL, _, _, _ := testAPI(t, ctx, token)
	call := func(method, path string, body any, out any) int {
		t.Helper()
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, method, apiURL+path, bytes.NewReader(raw))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if out != nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
		}
		return resp.StatusCode
	}
	// acme has an endpoint and an event waiting for it (no worker runs).
	require.Equal(t, http.StatusCreated, call(http.MethodPut, "/v1/tenants/acme", map[string]any{"name": "Acme"}, nil))
	var ep struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, call(http.MethodPost, "/v1/endpoints", map[string]any{"url": "http://127.0.0.1:9/hooks", "tenant_id": "acme"}, &ep))
	require.Equal(t, http.StatusAccepted, call(http.MethodPost, "/v1/events", map[string]any{"id": "e-1", "correlation_id": "order-1", "sequence": 1,
		"type": "order.created", "data": map[string]any{}, "tenant_id": "acme"}, nil))

	operator := map[string]string{"HOOKFLOW_API_URL": apiURL, "HOOKFLOW_API_TOKEN": token}
	withTenant := map[string]string{"HOOKFLOW_API_URL": apiURL, "HOOKFLOW_API_TOKEN": token, "HOOKFLOW_TENANT": "acme"}

	// No tenant named: default's figures (it has no endpoint), and the
	// worst tenants, acme with its waiting delivery.
	code, out, stderr := runWith(operator, "status")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, ep.ID, "default's figures: acme's endpoint is not default's")
	_, worst, ok := strings.Cut(out, "WORST TENANTS")
	require.True(t, ok, out)
	require.Contains(t, worst, "acme")

	// --tenant and HOOKFLOW_TENANT: acme's figures, no ranking.
	for _, run := range []func() (int, string, string){
		func() (int, string, string) { return runWith(operator, "status", "--tenant", "acme") },
		func() (int, string, string) { return runWith(withTenant, "status") },
	} {
		code, out, stderr = run()
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, ep.ID)
		require.NotContains(t, out, "WORST TENANTS")
	}
	code, out, stderr = runWith(withTenant, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var st struct {
		Tenant    string `json:"tenant"`
		Endpoints []struct {
			EndpointID string `json:"endpoint_id"`
			Waiting    int64  `json:"waiting"`
		} `json:"endpoints"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, "acme", st.Tenant)
	require.Len(t, st.Endpoints, 1)
	require.Equal(t, ep.ID, st.Endpoints[0].EndpointID)
	require.EqualValues(t, 1, st.Endpoints[0].Waiting)
	code, out, stderr = runWith(withTenant, "dlq", "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "0 dead letter(s)")

	// keys create --tenant: a key confined to acme.
	code, out, stderr = runWith(operator, "keys", "create", "--tenant", "acme", "--name", "acme-ops", "--scope", "events:read", "--json")
	require.Equal(t, 0, code, stderr)
	var key struct {
		ID       string `json:"id"`
		Key      string `json:"key"`
		TenantID string `json:"tenant_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &key), out)
	require.Equal(t, "acme", key.TenantID)
	code, out, stderr = runWith(withTenant, "keys", "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, key.ID)
	code, out, stderr = runWith(operator, "keys", "create", "--name", "ops", "--scope", "events:read", "--json")
	require.Equal(t, 0, code, stderr)
	var opKey struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &opKey), out)
	code, out, stderr = runWith(withTenant, "keys", "list")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, opKey.ID, "--tenant lists the tenant's keys only")
	code, _, stderr = runWith(withTenant, "keys", "revoke", opKey.ID)
	require.Equal(t, 1, code)
	require.Equal(t, "hookflow keys: key "+opKey.ID+" is an operator key, not tenant acme's: not revoked\n", stderr)

	// The tenant's key: its own figures; it sees no other tenant, so no
	// ranking; naming another tenant is the API's 404.
	asAcme := map[string]string{"HOOKFLOW_API_URL": apiURL, "HOOKFLOW_API_TOKEN": key.Key}
	code, out, stderr = runWith(asAcme, "status")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, ep.ID)
	require.NotContains(t, out, "WORST TENANTS")

	// A bad tenant: one readable line, a non-zero exit.
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{operator, []string{"status", "--tenant", "nosuch"}, "404 Not Found: no tenant nosuch"},
		{withTenant, []string{"dlq", "list", "--tenant", "nosuch"}, "no tenant nosuch"},
		{map[string]string{"HOOKFLOW_API_URL": apiURL, "HOOKFLOW_API_TOKEN": token, "HOOKFLOW_TENANT": "nosuch"}, []string{"dlq", "replay", "e-1"}, "no tenant nosuch"},
		{operator, []string{"keys", "create", "--tenant", "nosuch", "--name", "x", "--scope", "events:read"}, "nosuch"},
		{asAcme, []string{"status", "--tenant", "globex"}, "no tenant globex"},
		{operator, []string{"status", "--tenant", "a/b"}, "tenant_id"},
	} {
		code, out, stderr := runWith(c.env, c.args...)
		require.NotEqual(t, 0, code, "%v: %s", c.args, out)
		require.Contains(t, stderr, c.want, c.args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", c.args, stderr)
	}
}
