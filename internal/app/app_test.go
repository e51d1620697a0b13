package app_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/app"
	"github.com/hookflow/hookflow/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestPoolSizeHonoursTheDSN: pool_max_conns in the DSN sets the pool's
// size (a deployment sizes its processes against max_connections); without
// it the pool gets DefaultMaxConns.
func TestPoolSizeHonoursTheDSN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	pool, err := app.ConnectPostgres(ctx, url+"&pool_max_conns=5")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.EqualValues(t, 5, pool.Config().MaxConns)
	pool2, err := app.ConnectPostgres(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool2.Close)
	require.EqualValues(t, app.DefaultMaxConns, pool2.Config().MaxConns)
}
