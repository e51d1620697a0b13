package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func unusedClient() (*client, error) {
	return &client{rdb: goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})}, nil
}

// isClosed tells a closed client without dialling: a cancelled command on
// a closed one fails on the closed pool first.
func isClosed(c *client) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return errors.Is(c.rdb.Ping(ctx).Err(), goredis.ErrClosed)
}

// TestClientsEvictLeastRecent: beyond the bound, the least recently used
// client leaves the cache, and is closed only once the Send using it is
// done; its key then gets a new client.
func TestClientsEvictLeastRecent(t *testing.T) {
	t.Parallel()
	p := newClients(2, time.Hour)
	a, releaseA, err := p.get("a", unusedClient)
	require.NoError(t, err)
	for _, k := range []string{"b", "c"} {
		_, release, err := p.get(k, unusedClient)
		require.NoError(t, err)
		release()
	}
	require.False(t, isClosed(a))
	releaseA()
	require.True(t, isClosed(a))

	again, release, err := p.get("a", unusedClient)
	require.NoError(t, err)
	release()
	require.NotSame(t, a, again)
	require.NoError(t, p.close())
	_, _, err = p.get("a", unusedClient)
	require.ErrorIs(t, err, errClosed)
}

// TestClientsCloseIdle: a client unused for the idle time is closed at
// the next use of the cache.
func TestClientsCloseIdle(t *testing.T) {
	t.Parallel()
	p := newClients(10, time.Millisecond)
	a, release, err := p.get("a", unusedClient)
	require.NoError(t, err)
	release()
	time.Sleep(5 * time.Millisecond)
	_, release, err = p.get("b", unusedClient)
	require.NoError(t, err)
	release()
	require.True(t, isClosed(a))
	require.NoError(t, p.close())
}
