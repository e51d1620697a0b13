package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
	"github.com/hookflow/hookflow/internal/transport/redis"
	standard "github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv/redistest"
)

const (
	prefix   = "orders"
	lane     = "{orders}:order-1"
	index    = "{orders}"
	endpoint = "ep_redis"
)

// bundle is one test's server, transport and destination.
type bundle struct {
	srv *redistest.Server
	tr  *redis.Transport
	d   transport.Destination
	rdb *goredis.Client // the test's own view of the server
}

// setup starts a server for the test with the destination's index stream
// made, as its user would before creating the endpoint.
func setup(t *testing.T) *bundle {
	t.Helper()
	b := setupBare(t)
	require.NoError(t, b.srv.CreateStream(context.Background(), prefix, "consumers"))
	return b
}

// setupBare is setup without the index stream.
func setupBare(t *testing.T) *bundle {
	t.Helper()
	srv := redistest.ForTest(t)
	secret, err := standard.NewSecret()
	require.NoError(t, err)
	tr := redis.New(egress.Policy{AllowPrivate: true})
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	rdb := srv.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	d := transport.Destination{EndpointID: endpoint, Config: srv.Config(prefix), Credentials: srv.Credentials(), Secrets: []string{secret}}
	d.URL, err = tr.Address(context.Background(), d)
	require.NoError(t, err)
	return &bundle{srv: srv, tr: tr, d: d, rdb: rdb}
}

// msg is event n of the lane order-1, following previous.
func msg(n, previous int64, skipped ...int64) transport.Message {
	return transport.Message{
		EventID:       fmt.Sprintf("evt_%d", n),
		Body:          fmt.Appendf(nil, `{"id":"evt_%d","sequence":%d}`, n, n),
		At:            time.Now(),
		CorrelationID: "order-1",
		Sequence:      n,
		Attempt:       1,
		Previous:      previous,
		Skipped:       skipped,
		Type:          "order.updated",
	}
}

func (b *bundle) send(t *testing.T, m transport.Message) transport.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := b.tr.Send(ctx, b.d, m)
	require.NoError(t, err)
	return res
}

func (b *bundle) requireDelivered(t *testing.T, m transport.Message) {
	t.Helper()
	res := b.send(t, m)
	require.Equal(t, transport.Delivered, res.Outcome, res.Detail)
}

// read returns what the destination holds, through Read.
func (b *bundle) read(t *testing.T) []transport.Stored {
	t.Helper()
	var got []transport.Stored
	require.NoError(t, b.tr.Read(context.Background(), b.d, func(s transport.Stored) error {
		got = append(got, s)
		return nil
	}))
	return got
}

// sequences are the lane's stored sequences, in stream order.
func (b *bundle) sequences(t *testing.T) []int64 {
	t.Helper()
	var seqs []int64
	for _, s := range b.read(t) {
		seqs = append(seqs, s.Sequence)
	}
	return seqs
}

func (b *bundle) xlen(t *testing.T, key string) int64 {
	t.Helper()
	n, err := b.rdb.XLen(context.Background(), key).Result()
	require.NoError(t, err)
	return n
}

// TestSendWritesLaneAndIndex: each message lands once, in order, in its
// lane's stream with entry ID <sequence>-0 and in the index, and reads
// back with a signature that verifies.
func TestSendWritesLaneAndIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(1, 0))
	b.requireDelivered(t, msg(2, 1))
	b.requireDelivered(t, msg(4, 2, 3))

	got := b.read(t)
	require.Len(t, got, 3)
	for i, want := range []transport.Message{msg(1, 0), msg(2, 1), msg(4, 2, 3)} {
		s := got[i]
		require.Equal(t, want.Sequence, s.Sequence)
		require.Equal(t, want.Previous, s.Previous)
		require.Equal(t, want.Skipped, s.Skipped)
		require.Equal(t, "order-1", s.Lane)
		require.Equal(t, endpoint, s.EndpointID)
		require.Equal(t, want.EventID, s.EventID)
		require.JSONEq(t, string(want.Body), string(s.Body))
		require.NoError(t, standard.Verify(b.d.Secrets, s.EventID, strconv.FormatInt(s.Timestamp, 10), s.Signature, s.Body, time.Now(), 0))
	}
	ids, err := b.rdb.XRange(context.Background(), lane, "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"1-0", "2-0", "4-0"}, []string{ids[0].ID, ids[1].ID, ids[2].ID})
	notes, err := b.rdb.XRange(context.Background(), index, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, notes, 3)
	require.Equal(t, map[string]any{"lane": "order-1", "sequence": "4", "webhook-id": "evt_4", "hookflow-endpoint-id": endpoint}, notes[2].Values)
}

// TestSendAgainIsDelivered: the same message again (a retry after a lost
// answer) is delivered and not written twice.
func TestSendAgainIsDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(1, 0))
	b.requireDelivered(t, msg(1, 0))
	require.Equal(t, int64(1), b.xlen(t, lane))
	require.Equal(t, int64(1), b.xlen(t, index))
}

// TestSendBeforeTailIsPermanent: a message whose sequence the lane is
// already past, or whose place another event holds, is refused for good.
func TestSendBeforeTailIsPermanent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(2, 0))

	res := b.send(t, msg(1, 0))
	require.Equal(t, transport.Permanent, res.Outcome)
	require.Contains(t, res.Detail, "already holds sequence 2")
	require.False(t, res.Outage)

	other := msg(2, 0)
	other.EventID = "evt_other"
	res = b.send(t, other)
	require.Equal(t, transport.Permanent, res.Outcome)
	require.Equal(t, []int64{2}, b.sequences(t))
}

// TestLostAnswer: a write that landed but whose answer never came (made
// here by writing the entry directly) is delivered on the next attempt,
// with nothing written again; so is one a consumer has since deleted.
func TestLostAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m := msg(1, 0)
	h, err := transport.Headers(b.d, m)
	require.NoError(t, err)
	values := []any{redis.FieldEnvelope, m.Body}
	for k, v := range h {
		values = append(values, k, v)
	}
	require.NoError(t, b.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: lane, ID: "1-0", Values: values}).Err())

	b.requireDelivered(t, m)
	require.Equal(t, []int64{1}, b.sequences(t))

	// A consumer that deletes what it processed leaves the lane's last
	// ID: the retry still finds its message written.
	b.requireDelivered(t, msg(2, 1))
	require.NoError(t, b.rdb.XDel(ctx, lane, "2-0").Err())
	b.requireDelivered(t, msg(2, 1))
	require.Equal(t, []int64{1}, b.sequences(t))
	b.requireDelivered(t, msg(3, 2))
	require.Equal(t, []int64{1, 3}, b.sequences(t))
}

// TestConcurrentSends: attempts racing with the same message (a timed-out
// attempt still running beside its retry) store it once.
func TestConcurrentSends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(1, 0))
	var wg sync.WaitGroup
	results := make([]transport.Result, 8)
	for i := range results {
		wg.Go(func() { results[i] = b.send(t, msg(2, 1)) })
	}
	wg.Wait()
	for _, res := range results {
		require.Equal(t, transport.Delivered, res.Outcome, res.Detail)
	}
	require.Equal(t, []int64{1, 2}, b.sequences(t))
	require.Equal(t, int64(2), b.xlen(t, index))
}

// TestWrittenThenSkippedTail: an event the ledger ended skipped that
// reached the lane anyway stays, and the next one follows it, listing it
// as skipped.
func TestWrittenThenSkippedTail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(1, 0))
	b.requireDelivered(t, msg(2, 1)) // its answer lost, then dead-lettered and skipped
	b.requireDelivered(t, msg(3, 1, 2))
	got := b.read(t)
	require.Len(t, got, 3)
	require.Equal(t, int64(3), got[2].Sequence)
	require.Equal(t, []int64{2}, got[2].Skipped)
}

// TestForeignTail: a lane whose last message is another endpoint's (two
// endpoints given one prefix) is refused for good, naming the other
// endpoint, and nothing is written after it.
func TestForeignTail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := b.d
	other.EndpointID = "ep_other"
	res, err := b.tr.Send(context.Background(), other, msg(1, 0))
	require.NoError(t, err)
	require.Equal(t, transport.Delivered, res.Outcome, res.Detail)

	res = b.send(t, msg(2, 0))
	require.Equal(t, transport.Permanent, res.Outcome)
	require.Contains(t, res.Detail, "ep_other")
	require.Equal(t, int64(1), b.xlen(t, lane))
}

// TestMissingIndexWaits: with the index stream missing (not made yet, or
// the server lost its data), nothing is written, and the attempt is
// retried without counting against the server.
func TestMissingIndexWaits(t *testing.T) {
	t.Parallel()
	b := setupBare(t)
	res := b.send(t, msg(1, 0))
	require.Equal(t, transport.Retry, res.Outcome)
	require.False(t, res.Outage)
	require.Contains(t, res.Detail, "{orders} does not exist")
	n, err := b.rdb.Exists(context.Background(), lane).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, b.srv.CreateStream(context.Background(), prefix, "consumers"))
	b.requireDelivered(t, msg(1, 0))
}

// TestServerKilled: a killed server is an outage to retry; after it
// restarts on its folder, what it acknowledged is there, the next attempt
// is delivered, and nothing is lost or written twice.
func TestServerKilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(1, 0))
	b.requireDelivered(t, msg(2, 1))
	require.NoError(t, b.srv.Kill())

	res := b.send(t, msg(3, 2))
	require.Equal(t, transport.Retry, res.Outcome)
	require.True(t, res.Outage)
	require.Equal(t, 0, res.Status)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, b.srv.Restart(ctx))
	b.requireDelivered(t, msg(3, 2))
	b.requireDelivered(t, msg(3, 2))
	b.requireDelivered(t, msg(4, 3))
	require.Equal(t, []int64{1, 2, 3, 4}, b.sequences(t))
}

// TestWrongPassword: refused credentials are permanent, and nothing of the
// password shows in what the attempt records or in Check's answer.
func TestWrongPassword(t *testing.T) {
	t.Parallel()
	b := setup(t)
	password := "Wr0ng" + b.srv.Password()[:12] + "Zq9"
	b.d.Credentials = map[string]string{"username": redistest.User, "password": password}

	res := b.send(t, msg(1, 0))
	require.Equal(t, transport.Permanent, res.Outcome, res.Detail)
	require.False(t, res.Outage)
	requireNoPiece(t, password, res.Detail+" "+res.Summary)

	err := b.tr.Check(context.Background(), b.d)
	var fe *transport.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "credentials", fe.Field)
	requireNoPiece(t, password, err.Error())

	// The right credentials (a rotation) make a client of their own.
	b.d.Credentials = b.srv.Credentials()
	b.requireDelivered(t, msg(1, 0))
}

// requireNoPiece fails when text holds any 4 bytes in a row of secret.
func requireNoPiece(t *testing.T, secret, text string) {
	t.Helper()
	for i := 0; i+4 <= len(secret); i++ {
		require.NotContains(t, text, secret[i:i+4])
	}
}

// TestAddress: the canonical address of a config, and the refusals of a
// bad one, naming the field, without reaching any server.
func TestAddress(t *testing.T) {
	t.Parallel()
	creds := map[string]string{"password": "s3cret-pass"}
	open := redis.New(egress.Policy{AllowPrivate: true})
	confined := redis.New(egress.Policy{Allowlist: []string{"10.0.0.5:6379"}})
	ctx := context.Background()

	addr, err := open.Address(ctx, transport.Destination{Config: []byte(`{"addr":"Redis.Example.com:6380","stream":"orders.v1","db":2}`), Credentials: creds})
	require.NoError(t, err)
	require.Equal(t, "rediss://redis.example.com:6380/2?stream=orders.v1", addr)
	addr, err = open.Address(ctx, transport.Destination{Config: []byte(`{"addr":"127.0.0.1:6379","stream":"o","tls":false}`), Credentials: creds})
	require.NoError(t, err)
	require.Equal(t, "redis://127.0.0.1:6379/0?stream=o", addr)

	for _, c := range []struct {
		tr     *redis.Transport
		config string
		creds  map[string]string
		grant  bool
		field  string
	}{
		{confined, `{"addr":"127.0.0.1:6379","stream":"o","tls":false}`, creds, true, "config.addr"},
		{confined, `{"addr":"127.0.0.1:6379","stream":"o"}`, creds, true, "config.addr"},
		{confined, `{"addr":"localhost:6379","stream":"o"}`, creds, true, "config.addr"},
		{confined, `{"addr":"10.0.0.5:6379","stream":"o","tls":false}`, creds, false, "config.addr"},
		{confined, `{"addr":"redis.example.com:6379","stream":"o","tls":false}`, creds, true, "config.addr"},
		{open, `{"addr":"redis.example.com","stream":"o"}`, creds, false, "config.addr"},
		{open, `{"addr":"redis.example.com:0","stream":"o"}`, creds, false, "config.addr"},
		{open, `{"addr":"redis.example.com:6379","stream":"{o}"}`, creds, false, "config.stream"},
		{open, `{"addr":"redis.example.com:6379","stream":"o*"}`, creds, false, "config.stream"},
		{open, `{"addr":"redis.example.com:6379"}`, creds, false, "config.stream"},
		{open, `{"addr":"redis.example.com:6379","stream":"o","db":-1}`, creds, false, "config.db"},
		{open, `{"addr":"redis.example.com:6379","stream":"o","db":"1"}`, creds, false, "config.db"},
		{open, `{"addr":"redis.example.com:6379","stream":"o","tls":"no"}`, creds, false, "config.tls"},
		{open, `{"addr":"redis.example.com:6379","stream":"o","durability":"never"}`, creds, false, "config.durability"},
		{open, `{"addr":"redis.example.com:6379","stream":"o","index_maxlen":-5}`, creds, false, "config.index_maxlen"},
		{open, `{"addr":"redis.example.com:6379","stream":"o","subject":"x"}`, creds, false, "config.subject"},
		{open, `[1]`, creds, false, "config"},
		{open, `{"addr":"redis.example.com:6379","stream":"o"}`, nil, false, "credentials.password"},
		{open, `{"addr":"redis.example.com:6379","stream":"o"}`, map[string]string{"password": "x1234", "token": "t"}, false, "credentials.token"},
	} {
		_, err := c.tr.Address(ctx, transport.Destination{Config: []byte(c.config), Credentials: c.creds, PrivateTargets: c.grant})
		var fe *transport.FieldError
		require.ErrorAs(t, err, &fe, c.config)
		require.Equal(t, c.field, fe.Field, c.config)
		require.NotContains(t, err.Error(), "s3cret-pass")
	}
	// The allowlisted target, for a tenant granted it.
	_, err = confined.Address(ctx, transport.Destination{Config: []byte(`{"addr":"10.0.0.5:6379","stream":"o","tls":false}`), Credentials: creds, PrivateTargets: true})
	require.NoError(t, err)
}

// TestCheck: Check passes a working destination and names what is wrong
// with one that is not: the index stream missing or not a stream, a
// server without AOF or one that evicts any key.
func TestCheck(t *testing.T) {
	t.Parallel()
	b := setupBare(t)
	ctx := context.Background()
	var fe *transport.FieldError

	require.ErrorAs(t, b.tr.Check(ctx, b.d), &fe)
	require.Equal(t, "config.stream", fe.Field)
	require.Contains(t, fe.Reason, "does not exist")

	require.NoError(t, b.srv.CreateStream(ctx, prefix, "consumers"))
	require.NoError(t, b.tr.Check(ctx, b.d))

	require.NoError(t, b.rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	require.ErrorAs(t, b.tr.Check(ctx, b.d), &fe)
	require.Equal(t, "config.durability", fe.Field)
	require.Contains(t, fe.Reason, "allkeys-lru")
	require.NoError(t, b.rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())
	require.NoError(t, b.tr.Check(ctx, b.d))

	// Turning AOF back on would start a rewrite the server's shutdown
	// waits for: it stays off to the end of the test.
	require.NoError(t, b.rdb.ConfigSet(ctx, "appendonly", "no").Err())
	require.ErrorAs(t, b.tr.Check(ctx, b.d), &fe)
	require.Equal(t, "config.durability", fe.Field)
	b.d.Config = fmt.Appendf(nil, `{"addr":%q,"stream":%q,"tls":false,"durability":"best_effort"}`, b.srv.Addr(), prefix)
	require.NoError(t, b.tr.Check(ctx, b.d))

	require.NoError(t, b.rdb.Set(ctx, "{plain}", "x", 0).Err())
	b.d.Config = fmt.Appendf(nil, `{"addr":%q,"stream":"plain","tls":false,"durability":"best_effort"}`, b.srv.Addr())
	require.ErrorAs(t, b.tr.Check(ctx, b.d), &fe)
	require.Equal(t, "config.stream", fe.Field)
	require.Contains(t, fe.Reason, "not a stream")
}

// TestLeastPrivilege: a user with only the ACL the package's doc names
// can be checked, written to and read.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	require.NoError(t, b.rdb.Do(ctx, "ACL", "SETUSER", "writer", "on", ">writer-password", "resetkeys", "~{orders}*", "resetchannels", "-@all",
		"+evalsha", "+eval", "+script|load", "+xadd", "+xrange", "+xrevrange", "+xinfo|stream", "+type", "+scan", "+ping", "+info").Err())
	b.d.Credentials = map[string]string{"username": "writer", "password": "writer-password"}

	require.NoError(t, b.tr.Check(ctx, b.d))
	b.requireDelivered(t, msg(1, 0))
	b.requireDelivered(t, msg(1, 0))
	b.requireDelivered(t, msg(2, 1))
	require.Equal(t, []int64{1, 2}, b.sequences(t))

	// Outside its keys, the same user is refused for good.
	b.d.Config = b.srv.Config("billing")
	require.NoError(t, b.srv.CreateStream(ctx, "billing", "consumers"))
	res := b.send(t, msg(1, 0))
	require.Equal(t, transport.Permanent, res.Outcome, res.Detail)
}

// TestDatabase: a destination in another logical database writes there
// and nowhere else.
func TestDatabase(t *testing.T) {
	t.Parallel()
	b := setupBare(t)
	ctx := context.Background()
	db3 := goredis.NewClient(&goredis.Options{Addr: b.srv.Addr(), Username: redistest.User, Password: b.srv.Password(), DB: 3})
	t.Cleanup(func() { _ = db3.Close() })
	require.NoError(t, redistest.CreateStream(ctx, db3, prefix, "consumers"))
	b.d.Config = fmt.Appendf(nil, `{"addr":%q,"stream":%q,"tls":false,"db":3}`, b.srv.Addr(), prefix)

	require.NoError(t, b.tr.Check(ctx, b.d))
	b.requireDelivered(t, msg(1, 0))
	n, err := db3.XLen(ctx, lane).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	n, err = b.rdb.Exists(ctx, lane).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestOneRoundTrip: once the script is cached, a write is one EVALSHA and
// nothing else from the transport.
func TestOneRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.requireDelivered(t, msg(1, 0)) // loads the script (NOSCRIPT, then EVAL)
	require.NoError(t, b.rdb.ConfigResetStat(ctx).Err())
	b.requireDelivered(t, msg(2, 1))
	b.requireDelivered(t, msg(3, 2))
	b.requireDelivered(t, msg(4, 3))
	stats, err := b.rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var top []string
	for line := range strings.Lines(stats) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		top = append(top, strings.TrimPrefix(name, "cmdstat_")+"="+calls)
	}
	// The script's own commands count too; the test's are CONFIG and INFO.
	require.ElementsMatch(t, []string{"evalsha=3", "type=3", "xrevrange=3", "xadd=6", "config|resetstat=1"}, top)
}

// TestKeyNotAStream: a lane or index key of another type is refused for
// good, and nothing is written.
func TestKeyNotAStream(t *testing.T) {
	t.Parallel()
	b := setupBare(t)
	ctx := context.Background()
	require.NoError(t, b.rdb.Set(ctx, index, "x", 0).Err())
	res := b.send(t, msg(1, 0))
	require.Equal(t, transport.Permanent, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "not a stream")
	n, err := b.rdb.Exists(ctx, lane).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, b.rdb.Del(ctx, index).Err())
	require.NoError(t, b.srv.CreateStream(ctx, prefix, "consumers"))
	require.NoError(t, b.rdb.Set(ctx, lane, "x", 0).Err())
	res = b.send(t, msg(1, 0))
	require.Equal(t, transport.Permanent, res.Outcome, res.Detail)
	require.Zero(t, b.xlen(t, index))
}

// TestSendAfterClose: a worker stopping (its transports closed) answers a
// late attempt with a retry, not a failure for good.
func TestSendAfterClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requireDelivered(t, msg(1, 0))
	require.NoError(t, b.tr.Close())
	res := b.send(t, msg(2, 1))
	require.Equal(t, transport.Retry, res.Outcome)
	require.False(t, res.Outage)
	require.Equal(t, int64(1), b.xlen(t, lane))
}

// TestReadPages: Read pages through long lanes and many lanes, each lane
// whole and in order.
func TestReadPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pipe := b.rdb.Pipeline()
	add := func(correlation string, n int64) {
		m := msg(n, n-1)
		m.CorrelationID = correlation
		h, err := transport.Headers(b.d, m)
		require.NoError(t, err)
		values := []any{redis.FieldEnvelope, m.Body}
		for k, v := range h {
			values = append(values, k, v)
		}
		pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "{orders}:" + correlation, ID: strconv.FormatInt(n, 10) + "-0", Values: values})
	}
	for n := int64(1); n <= 1201; n++ {
		add("long", n)
	}
	for i := range 700 {
		add(fmt.Sprintf("short-%d", i), 1)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)

	last := map[string]int64{}
	count := 0
	for _, s := range b.read(t) {
		require.Equal(t, last[s.Lane]+1, s.Sequence, s.Lane)
		last[s.Lane] = s.Sequence
		count++
	}
	require.Equal(t, 1901, count)
	require.Equal(t, int64(1201), last["long"])
	require.Len(t, last, 701)
}
