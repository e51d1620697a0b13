package app_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/lab/testenv"
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

// TestAPIPoolsShareThePoolSize: an API process's two pools together hold
// the pool_max_conns its DSN gives, each at least its floor, so
// max_connections sized from the DSNs holds them.
func TestAPIPoolsShareThePoolSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ total, base, requests int32 }{
		{app.DefaultMaxConns, 8, 24},
		{64, 16, 48},
		{12, 8, 4},
		{4, 8, 4},
	} {
		base, requests := app.APIConns(c.total)
		require.Equal(t, [2]int32{c.base, c.requests}, [2]int32{base, requests}, "pool_max_conns=%d", c.total)
	}
}

// TestAPIStoreSplitsThePoolAndTimesRequestsOut: ConnectAPIStore's pools
// share the DSN's pool_max_conns, and the request pool's sessions carry
// the statement timeout and plan each statement for its arguments (the
// lists' optional filters are index conditions only in such a plan),
// while the store's sessions keep the server's defaults.
func TestAPIStoreSplitsThePoolAndTimesRequestsOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.MigratedPool(t).Config().ConnString()
	st, reqPool, err := app.ConnectAPIStore(ctx, url+"&pool_max_conns=32", 1500*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	t.Cleanup(reqPool.Close)
	require.EqualValues(t, 32, st.Pool().Config().MaxConns+reqPool.Config().MaxConns)
	show := func(p *pgxpool.Pool, setting string) string {
		var v string
		require.NoError(t, p.QueryRow(ctx, "SHOW "+setting).Scan(&v))
		return v
	}
	require.Equal(t, "1500ms", show(reqPool, "statement_timeout"))
	require.Equal(t, "force_custom_plan", show(reqPool, "plan_cache_mode"))
	require.Equal(t, "0", show(st.Pool(), "statement_timeout"))
	require.Equal(t, "auto", show(st.Pool(), "plan_cache_mode"))
}
