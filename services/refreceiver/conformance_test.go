package refreceiver_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/conformance"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/services/refreceiver"
)

// TestConformance: the reference receiver passes every case of the kit's
// conformance checker.
func TestConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, refreceiver.Migrate(ctx, pool))

	current, err := webhook.NewSecret()
	require.NoError(t, err)
	previous, err := webhook.NewSecret()
	require.NoError(t, err)
	server, err := refreceiver.New(refreceiver.Config{Secrets: []string{current, previous}}, refreceiver.Deps{Pool: pool, Logger: testenv.Logger(t)})
	require.NoError(t, err)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)

	report, err := conformance.Run(ctx, conformance.Config{URL: srv.URL + "/webhook", Secrets: []string{current}})
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, report.Print(&out))
	t.Log("\n" + out.String())
	require.Len(t, report.Results, 15)
	for _, res := range report.Results {
		require.True(t, res.Passed, "%s: %s", res.Name, res.Detail)
		require.Contains(t, out.String(), res.Name)
	}
	require.True(t, report.OK())
	require.Contains(t, out.String(), "15/15 cases passed")
}
