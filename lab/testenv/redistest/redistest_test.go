package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/lab/testenv/redistest"
)

// TestKillKeepsScriptWrites: what a script wrote in two commands (logged as
// one MULTI/EXEC block) is back after a SIGKILL and a restart on the same
// folder and port, and the server still wants credentials.
func TestKillKeepsScriptWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := srv.Client()
	defer c.Close()
	require.NoError(t, c.Eval(ctx, `redis.call('XADD', KEYS[1], '1-0', 'f', 'v'); redis.call('XADD', KEYS[2], '*', 'f', 'v'); return 1`, []string{"{p}:lane", "{p}"}).Err())
	addr := srv.Addr()

	require.NoError(t, srv.Kill())
	require.Error(t, c.Ping(ctx).Err())
	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, addr, srv.Addr())
	n, err := c.Exists(ctx, "{p}:lane", "{p}").Result()
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	anonymous := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer anonymous.Close()
	require.True(t, redis.IsAuthError(anonymous.Ping(ctx).Err()))
}
