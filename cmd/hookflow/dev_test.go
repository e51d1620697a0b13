package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/schema"
)

// TestEnsureDevEndpointMovesWithItsHeaders: hookflow dev's receiver
// listens on another port each run. Its endpoint follows it, with the
// custom headers set on it (a change of origin must send them again, and
// this one does), and the move is recorded as hookflow dev's.
func TestEnsureDevEndpointMovesWithItsHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.NewDatabase(t)
	pool, err := app.ConnectPostgres(ctx, dsn)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
	pool.Close()
	st, err := app.ConnectStore(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	st = st.Tenant(store.DefaultTenant)

	require.NoError(t, ensureDevEndpoint(ctx, st, "http://127.0.0.1:8091/webhook", "whsec_dev"))
	h := map[string]string{"X-Tenant": "dev-tenant"}
	_, err = st.EndpointUpdate(ctx, devEndpointID, store.EndpointChange{Headers: &h})
	require.NoError(t, err)
	require.NoError(t, ensureDevEndpoint(ctx, st, "http://127.0.0.1:8092/webhook", "whsec_dev"))
	ep, err := st.EndpointGet(ctx, devEndpointID)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:8092/webhook", ep.URL)
	require.Equal(t, h, ep.Settings.Headers)
	changes, err := st.EndpointURLChanges(ctx, devEndpointID, 10)
	require.NoError(t, err)
	require.Len(t, changes, 1)
	require.Equal(t, "hookflow dev", changes[0].By.Name)
}
