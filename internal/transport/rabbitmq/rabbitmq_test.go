package rabbitmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
	"github.com/hookflow/hookflow/internal/transport/rabbitmq"
	standard "github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/rabbittest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// bundle is one test's destination on the package's broker: an exchange
// and an audit queue bound to it for "#", of its own.
type bundle struct {
	srv       *rabbittest.Server
	tr        *rabbitmq.Transport
	d         transport.Destination
	exchange  string
	queue     string
	ctx       context.Context
	secret    string
	eventBase string
}

// setup declares the test's exchange and audit queue (bound unless
// unbound) on the package's node.
func setup(t *testing.T, bound bool) *bundle {
	t.Helper()
	srv := rabbittest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	name := fmt.Sprintf("hf.%s.%d", t.Name(), time.Now().UnixNano())
	b := &bundle{srv: srv, ctx: ctx, exchange: name, queue: name + ".audit", eventBase: "evt_" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	queue := b.queue
	if !bound {
		queue = ""
	}
	require.NoError(t, srv.Declare(ctx, b.exchange, queue))
	secret, err := standard.NewSecret()
	require.NoError(t, err)
	b.secret = secret
	b.tr = rabbitmq.New(egress.Policy{Allowlist: []string{srv.Addr()}})
	t.Cleanup(func() { _ = b.tr.Close() })
	b.d = transport.Destination{
		EndpointID:     "ep_rabbit",
		Secrets:        []string{secret},
		PrivateTargets: true,
		Config:         config(srv.URL(), b.exchange, b.queue),
		Credentials:    srv.Credentials(),
	}
	return b
}

func config(url, exchange, queue string) json.RawMessage {
	c, _ := json.Marshal(rabbitmq.Config{URL: url, Exchange: exchange, AuditQueue: queue})
	return c
}

// msg is sequence seq of lane, following previous.
func (b *bundle) msg(lane string, seq, previous int64) transport.Message {
	id := fmt.Sprintf("%s_%s_%d", b.eventBase, lane, seq)
	body := fmt.Sprintf(`{"id":%q,"correlation_id":%q,"sequence":%d,"previous_sequence":%d}`, id, lane, seq, previous)
	return transport.Message{EventID: id, Body: []byte(body), At: time.Now(), CorrelationID: lane, Sequence: seq, Previous: previous, Type: "order.updated", Attempt: 1}
}

func (b *bundle) send(t *testing.T, m transport.Message) transport.Result {
	t.Helper()
	res, err := b.tr.Send(b.ctx, b.d, m)
	require.NoError(t, err)
	return res
}

// sendRetrying sends m again while the broker answers it unroutable (a
// Retry that is no outage), as the delivery's retry policy would.
func (b *bundle) sendRetrying(t *testing.T, m transport.Message) transport.Result {
	t.Helper()
	for {
		res := b.send(t, m)
		if res.Outcome != transport.Retry || res.Outage || b.ctx.Err() != nil {
			return res
		}
		t.Logf("retrying: %s", res.Detail)
		time.Sleep(100 * time.Millisecond)
	}
}

func requireDelivered(t *testing.T, res transport.Result) {
	t.Helper()
	require.Equal(t, transport.Delivered, res.Outcome, "detail: %s", res.Detail)
}

// audit is what the audit queue held, judged by the promise: per lane,
// first copies in increasing sequence; repeats (a webhook-id again) are
// counted, not failed.
type audit struct {
	firsts  map[string][]int64
	repeats int
	stored  []transport.Stored
}

// read drains the audit queue, verifying every signature.
func (b *bundle) read(t *testing.T) audit {
	t.Helper()
	a := audit{firsts: map[string][]int64{}}
	seen := map[string]bool{}
	err := b.tr.Read(b.ctx, b.d, func(s transport.Stored) error {
		if err := standard.Verify(b.d.Secrets, s.EventID, strconv.FormatInt(s.Timestamp, 10), s.Signature, s.Body, time.Now(), time.Hour); err != nil {
			return fmt.Errorf("verify %s: %w", s.EventID, err)
		}
		a.stored = append(a.stored, s)
		if seen[s.EventID] {
			a.repeats++
			return nil
		}
		seen[s.EventID] = true
		a.firsts[s.Lane] = append(a.firsts[s.Lane], s.Sequence)
		return nil
	})
	require.NoError(t, err)
	return a
}

func seqs(from, to int64) []int64 {
	var s []int64
	for n := from; n <= to; n++ {
		s = append(s, n)
	}
	return s
}

// Two lanes written interleaved come back from the audit queue in order
// per lane, once each, signed so that a webhook consumer's check passes,
// and with the event id as message_id and the sequences as integers.
func TestSendWritesEachLaneInOrder(t *testing.T) {
	b := setup(t, true)
	// One message as the broker holds it: its properties.
	m := b.msg("orders-3", 1, 0)
	requireDelivered(t, b.send(t, m))
	raw := b.getOne(t)
	require.Equal(t, m.EventID, raw.MessageId)
	require.Equal(t, "orders-3", raw.RoutingKey)
	require.Equal(t, amqp.Persistent, raw.DeliveryMode)
	require.Equal(t, "application/json", raw.ContentType)
	require.Equal(t, int64(1), raw.Headers[transport.HeaderSequence])
	require.Equal(t, int64(0), raw.Headers[transport.HeaderPrevious])
	require.Equal(t, m.Body, raw.Body)

	for n := int64(1); n <= 5; n++ {
		requireDelivered(t, b.send(t, b.msg("orders-1", n, n-1)))
		requireDelivered(t, b.send(t, b.msg("orders-2", n, n-1)))
	}
	a := b.read(t)
	require.Equal(t, map[string][]int64{"orders-1": seqs(1, 5), "orders-2": seqs(1, 5)}, a.firsts)
	require.Zero(t, a.repeats)
	for _, s := range a.stored {
		require.Equal(t, "ep_rabbit", s.EndpointID)
		require.Equal(t, s.Sequence-1, s.Previous)
	}
}

// getOne takes the next message off the audit queue as the broker holds
// it.
func (b *bundle) getOne(t *testing.T) amqp.Delivery {
	t.Helper()
	conn, err := amqp.DialConfig(b.srv.URL(), amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: rabbittest.Username, Password: b.srv.Password()}}})
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	m, ok, err := ch.Get(b.queue, true)
	require.NoError(t, err)
	require.True(t, ok, "the audit queue is empty")
	return m
}

// AMQP 0-9-1 cannot refuse a publish: an attempt after one whose confirm
// was lost (simulated by writing the message directly first), the same
// message sent twice, and two attempts racing each publish a copy. The
// promise holds all the same: nothing missing, first copies in order,
// and every repeat carries the same webhook-id for the consumer to drop.
func TestRepeatsKeepOrderAndTheirID(t *testing.T) {
	b := setup(t, true)
	requireDelivered(t, b.send(t, b.msg("lane", 1, 0)))
	// Sequence 2 was written by an attempt whose confirm never came.
	lost := b.msg("lane", 2, 1)
	pub := amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: lost.EventID, Body: lost.Body, Headers: amqp.Table{}}
	h, err := transport.Headers(b.d, lost)
	require.NoError(t, err)
	for k, v := range h {
		pub.Headers[k] = v
	}
	require.NoError(t, b.srv.Publish(b.ctx, b.exchange, "lane", pub))
	requireDelivered(t, b.send(t, lost))
	// The same message again (an attempt whose result was lost).
	requireDelivered(t, b.send(t, lost))
	// Two attempts of one message racing.
	race := b.msg("lane", 3, 2)
	var wg sync.WaitGroup
	results := make([]transport.Result, 2)
	for i := range results {
		wg.Go(func() { results[i] = b.send(t, race) })
	}
	wg.Wait()
	for _, res := range results {
		requireDelivered(t, res)
	}
	requireDelivered(t, b.send(t, b.msg("lane", 4, 3)))

	a := b.read(t)
	require.Equal(t, map[string][]int64{"lane": seqs(1, 4)}, a.firsts)
	require.Equal(t, 3, a.repeats, "2 twice more, 3 once more")
	for _, s := range a.stored {
		require.Equal(t, fmt.Sprintf("%s_lane_%d", b.eventBase, s.Sequence), s.EventID)
	}
}

// A delivery the ledger ended skipped that reached the broker anyway is
// no obstacle: the next event, listing it as skipped, is delivered after
// it, and a consumer applies both.
func TestWrittenThenSkippedTailIsFollowed(t *testing.T) {
	b := setup(t, true)
	requireDelivered(t, b.send(t, b.msg("lane", 1, 0)))
	requireDelivered(t, b.send(t, b.msg("lane", 2, 1)))
	next := b.msg("lane", 3, 1)
	next.Skipped = []int64{2}
	requireDelivered(t, b.send(t, next))
	a := b.read(t)
	require.Equal(t, map[string][]int64{"lane": seqs(1, 3)}, a.firsts)
	require.Equal(t, []int64{2}, a.stored[2].Skipped)
}

// No queue bound for the lane: the broker returns the mandatory message.
// That is the user's to fix within the recovery window, so a retry, not
// an outage of a broker that answered; once a queue is bound, the next
// attempt is delivered.
func TestUnroutableIsRetryNotOutage(t *testing.T) {
	b := setup(t, false)
	res := b.send(t, b.msg("nobody-listens", 1, 0))
	require.Equal(t, transport.Retry, res.Outcome)
	require.False(t, res.Outage)
	require.Contains(t, res.Summary, "unroutable")
	require.Contains(t, res.Detail, `routing key "nobody-listens"`)
	require.Contains(t, res.Detail, "312 NO_ROUTE")

	require.NoError(t, b.srv.Declare(b.ctx, b.exchange, b.queue))
	requireDelivered(t, b.send(t, b.msg("nobody-listens", 1, 0)))
	a := b.read(t)
	require.Equal(t, map[string][]int64{"nobody-listens": {1}}, a.firsts)
}

// An exchange that is gone is a retry (the user may declare it again),
// not an outage, and Check names the field.
func TestMissingExchange(t *testing.T) {
	b := setup(t, true)
	requireDelivered(t, b.send(t, b.msg("lane", 1, 0)))
	require.NoError(t, b.tr.Check(b.ctx, b.d))
	require.NoError(t, b.srv.DeleteExchange(b.ctx, b.exchange))

	res := b.send(t, b.msg("lane", 2, 1))
	require.Equal(t, transport.Retry, res.Outcome, "detail: %s", res.Detail)
	require.False(t, res.Outage)
	require.Contains(t, res.Summary, "exchange does not exist")

	var fe *transport.FieldError
	require.ErrorAs(t, b.tr.Check(b.ctx, b.d), &fe)
	require.Equal(t, "config.exchange", fe.Field)
	require.Contains(t, fe.Reason, "does not exist")

	// The channel the 404 closed is not reused: once the exchange is
	// back, the next attempt goes through.
	require.NoError(t, b.srv.Declare(b.ctx, b.exchange, b.queue))
	requireDelivered(t, b.send(t, b.msg("lane", 2, 1)))

	d := b.d
	d.Config = config(b.srv.URL(), b.exchange, "no-such-queue")
	require.ErrorAs(t, b.tr.Check(b.ctx, d), &fe)
	require.Equal(t, "config.audit_queue", fe.Field)
}

// A wrong password is refused for good, and neither the result nor
// Check's error holds any piece of it.
func TestWrongPasswordIsPermanentAndRedacted(t *testing.T) {
	b := setup(t, true)
	const wrong = "Wr0ng-pa55word-that-must-not-leak"
	b.d.Credentials = map[string]string{"username": rabbittest.Username, "password": wrong}
	// Side by side: the broker answers a wrong password only after a
	// delay of its own (3 s).
	checked := make(chan error, 1)
	go func() { checked <- b.tr.Check(b.ctx, b.d) }()
	res := b.send(t, b.msg("lane", 1, 0))
	require.Equal(t, transport.Permanent, res.Outcome, "detail: %s", res.Detail)
	require.False(t, res.Outage)
	var fe *transport.FieldError
	err := <-checked
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "credentials", fe.Field)
	for _, text := range []string{res.Detail, res.Summary, err.Error()} {
		requireNoPiece(t, text, wrong)
	}
}

// requireNoPiece fails when text holds any 6 bytes in a row of secret.
func requireNoPiece(t *testing.T, text, secret string) {
	t.Helper()
	for i := 0; i+6 <= len(secret); i++ {
		require.NotContains(t, text, secret[i:i+6])
	}
}

// Check reports an unreachable broker on config.url.
func TestCheckUnreachable(t *testing.T) {
	tr := rabbitmq.New(egress.Policy{Allowlist: []string{"127.0.0.1:1"}})
	d := transport.Destination{EndpointID: "ep_x", PrivateTargets: true, Config: config("amqp://127.0.0.1:1/", "orders", ""), Credentials: map[string]string{"username": "u", "password": "p4ssword"}}
	var fe *transport.FieldError
	require.ErrorAs(t, tr.Check(context.Background(), d), &fe)
	require.Equal(t, "config.url", fe.Field)
	res, err := tr.Send(context.Background(), d, transport.Message{EventID: "evt_1", Body: []byte(`{}`), At: time.Now(), CorrelationID: "c", Sequence: 1})
	require.NoError(t, err)
	require.Equal(t, transport.Retry, res.Outcome)
	require.True(t, res.Outage)
}

// A broker killed (kill -9) while an attempt waits for its confirm, and
// the attempt after it while the broker is down, are outages (the
// client's own word for a lost connection is not read as the broker's
// refusal). After the restart the next attempts go through, and the
// durable queue lost nothing it confirmed.
func TestBrokerKilledIsOutageAndRestartLosesNothing(t *testing.T) {
	b := setup(t, true)
	for n := int64(1); n <= 3; n++ {
		requireDelivered(t, b.send(t, b.msg("lane", n, n-1)))
	}
	// Frozen first, so the attempt is still waiting when the kill comes.
	require.NoError(t, b.srv.Pause())
	inFlight := make(chan transport.Result, 1)
	go func() {
		res, _ := b.tr.Send(b.ctx, b.d, b.msg("lane", 4, 3))
		inFlight <- res
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, b.srv.Kill())
	res := <-inFlight
	require.Equal(t, transport.Retry, res.Outcome, "detail: %s", res.Detail)
	require.True(t, res.Outage, "detail: %s", res.Detail)
	res = b.send(t, b.msg("lane", 4, 3))
	require.Equal(t, transport.Retry, res.Outcome, "detail: %s", res.Detail)
	require.True(t, res.Outage, "detail: %s", res.Detail)

	require.NoError(t, b.srv.Restart(b.ctx))
	// A node back from a crash takes connections before its durable
	// queues are back, and returns what it cannot route yet: a retry,
	// as the activity's retry policy would make it.
	requireDelivered(t, b.sendRetrying(t, b.msg("lane", 4, 3)))
	requireDelivered(t, b.send(t, b.msg("lane", 5, 4)))
	a := b.read(t)
	require.Equal(t, map[string][]int64{"lane": seqs(1, 5)}, a.firsts)
	// A frozen broker wrote nothing of 4 before it died.
	require.Zero(t, a.repeats)
}

// Address takes config and credentials apart without reaching the broker,
// names the field that is wrong, and holds the broker's address to the
// egress rules.
func TestAddress(t *testing.T) {
	creds := map[string]string{"username": "hookflow", "password": "s3cret-pass"}
	open := rabbitmq.New(egress.Policy{Allowlist: []string{"127.0.0.1:5672"}})
	d := transport.Destination{EndpointID: "ep_x", PrivateTargets: true, Config: config("amqp://127.0.0.1:5672/", "orders", ""), Credentials: creds}
	got, err := open.Address(context.Background(), d)
	require.NoError(t, err)
	require.Equal(t, "amqp://127.0.0.1:5672/%2F/orders", got)
	d.Config = config("amqps://MQ.example.com/prod%2Feu", "hf.orders", "hf.audit")
	got, err = open.Address(context.Background(), d)
	require.NoError(t, err)
	require.Equal(t, "amqps://mq.example.com:5671/prod%2Feu/hf.orders", got)

	for _, c := range []struct {
		config json.RawMessage
		creds  map[string]string
		field  string
	}{
		{nil, creds, "config"},
		{json.RawMessage(`[]`), creds, "config"},
		{json.RawMessage(`{"url":"amqps://mq.example.com/","exchange":"x","stream":"s"}`), creds, "config.stream"},
		{json.RawMessage(`{"url":5,"exchange":"x"}`), creds, "config.url"},
		{config("", "x", ""), creds, "config.url"},
		{config("https://mq.example.com/", "x", ""), creds, "config.url"},
		{config("amqps://u:p@mq.example.com/", "x", ""), creds, "config.url"},
		{config("amqps://mq.example.com/?heartbeat=5", "x", ""), creds, "config.url"},
		{config("amqps://mq.example.com/a/b", "x", ""), creds, "config.url"},
		{config("amqps://mq.example.com:99999/", "x", ""), creds, "config.url"},
		{config("amqps://mq.example.com/", "", ""), creds, "config.exchange"},
		{config("amqps://mq.example.com/", "a b", ""), creds, "config.exchange"},
		{config("amqps://mq.example.com/", "x", "q/1"), creds, "config.audit_queue"},
		{config("amqps://mq.example.com/", "x", ""), map[string]string{"password": "p"}, "credentials.username"},
		{config("amqps://mq.example.com/", "x", ""), map[string]string{"username": "u"}, "credentials.password"},
		{config("amqps://mq.example.com/", "x", ""), map[string]string{"username": "u", "password": "p", "token": "t"}, "credentials.token"},
	} {
		d := transport.Destination{EndpointID: "ep_x", Config: c.config, Credentials: c.creds}
		_, err := open.Address(context.Background(), d)
		var fe *transport.FieldError
		require.ErrorAs(t, err, &fe, "config %s", c.config)
		require.Equal(t, c.field, fe.Field, "config %s: %v", c.config, err)
		require.Error(t, open.Validate(context.Background(), d))
	}

	// 127.0.0.1 only for a tenant granted the allowlist that names it,
	// and plain amqp only there.
	local := transport.Destination{EndpointID: "ep_x", Config: config("amqps://127.0.0.1:5671/", "orders", ""), Credentials: creds}
	for _, tc := range []struct {
		policy  egress.Policy
		granted bool
		url     string
	}{
		{egress.Policy{}, true, "amqps://127.0.0.1:5671/"},
		{egress.Policy{Allowlist: []string{"127.0.0.1:5672"}}, false, "amqp://127.0.0.1:5672/"},
		{egress.Policy{}, true, "amqps://localhost/"},
		{egress.Policy{}, true, "amqp://mq.example.com/"},
	} {
		local.PrivateTargets = tc.granted
		local.Config = config(tc.url, "orders", "")
		_, err := rabbitmq.New(tc.policy).Address(context.Background(), local)
		var fe *transport.FieldError
		require.ErrorAs(t, err, &fe, tc.url)
		require.Equal(t, "config.url", fe.Field)
	}
	_, err = rabbitmq.New(egress.Policy{}).Address(context.Background(), transport.Destination{Config: config("amqps://mq.example.com/", "orders", ""), Credentials: creds})
	require.NoError(t, err)
}

// A correlation too long for a routing key is refused for good, before
// anything is dialled; a closed transport sends no more.
func TestRefusedBeforeDialling(t *testing.T) {
	tr := rabbitmq.New(egress.Policy{Allowlist: []string{"127.0.0.1:1"}})
	d := transport.Destination{EndpointID: "ep_x", PrivateTargets: true, Config: config("amqp://127.0.0.1:1/", "orders", ""), Credentials: map[string]string{"username": "u", "password": "p4ssword"}}
	m := transport.Message{EventID: "evt_1", Body: []byte(`{}`), At: time.Now(), CorrelationID: string(make([]byte, 256)), Sequence: 1}
	res, err := tr.Send(context.Background(), d, m)
	require.NoError(t, err)
	require.Equal(t, transport.Permanent, res.Outcome)
	require.NoError(t, tr.Close())
	m.CorrelationID = "c"
	res, err = tr.Send(context.Background(), d, m)
	require.NoError(t, err)
	require.Equal(t, transport.Retry, res.Outcome)
	_, err = tr.Send(context.Background(), transport.Destination{Config: json.RawMessage(`{}`)}, m)
	require.True(t, err != nil && !errors.Is(err, context.Canceled))
}

// A broker that stops answering mid-publish: the attempt ends at its
// deadline as an outage, with the message perhaps written. Once the
// broker runs again the next attempt publishes it again; the queue holds
// it once or twice with the same webhook-id, in order, and the channel
// whose confirm came late is never reused (the attempts after it are
// confirmed as their own).
func TestStalledBrokerTimesOutAsOutage(t *testing.T) {
	b := setup(t, true)
	requireDelivered(t, b.send(t, b.msg("lane", 1, 0)))
	require.NoError(t, b.srv.Pause())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = b.srv.Resume()
		}
	})
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	res, err := b.tr.Send(ctx, b.d, b.msg("lane", 2, 1))
	cancel()
	require.NoError(t, err)
	require.Equal(t, transport.Retry, res.Outcome)
	require.True(t, res.Outage)
	require.Contains(t, res.Detail, "no confirm")
	// Check ends with its time too: the login never completes.
	ctx, cancel = context.WithTimeout(b.ctx, time.Second)
	err = b.tr.Check(ctx, b.d)
	cancel()
	var fe *transport.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "config.url", fe.Field)
	require.NoError(t, b.srv.Resume())
	resumed = true
	requireDelivered(t, b.send(t, b.msg("lane", 2, 1)))
	requireDelivered(t, b.send(t, b.msg("lane", 3, 2)))
	a := b.read(t)
	require.Equal(t, map[string][]int64{"lane": seqs(1, 3)}, a.firsts)
	require.LessOrEqual(t, a.repeats, 1)
	t.Logf("repeats after the stall: %d", a.repeats)
}

// AMQP cannot refuse another writer's message in a lane as a broker with
// a per-lane write check does: Read hands such messages over with the
// endpoint they carry (none for one not from hookflow), for the
// conformance check to report as foreign. The queue read may be named
// for the read alone (the conformance command's --queue).
func TestReadHandsOverForeignMessages(t *testing.T) {
	b := setup(t, true)
	requireDelivered(t, b.send(t, b.msg("lane", 1, 0)))
	other := b.d
	other.EndpointID = "ep_other"
	res, err := b.tr.Send(b.ctx, other, b.msg("lane", 2, 1))
	require.NoError(t, err)
	requireDelivered(t, res)
	require.NoError(t, b.srv.Publish(b.ctx, b.exchange, "not-a-lane", amqp.Publishing{MessageId: "not-hookflow", Body: []byte("hello")}))

	d := b.d
	d.Config = config(b.srv.URL(), b.exchange, "")
	var fe *transport.FieldError
	require.ErrorAs(t, b.tr.Read(b.ctx, d, func(transport.Stored) error { return nil }), &fe)
	require.Equal(t, "config.audit_queue", fe.Field)
	d, err = rabbitmq.WithAuditQueue(d, b.queue)
	require.NoError(t, err)
	var got []transport.Stored
	require.NoError(t, b.tr.Read(b.ctx, d, func(s transport.Stored) error {
		got = append(got, s)
		return nil
	}))
	require.Len(t, got, 3)
	require.Equal(t, []string{"ep_rabbit", "ep_other", ""}, []string{got[0].EndpointID, got[1].EndpointID, got[2].EndpointID})
	require.Equal(t, "not-a-lane", got[2].Lane)
	require.Equal(t, "not-hookflow", got[2].EventID)
	require.Equal(t, []byte("hello"), got[2].Body)
}

// A broker short of memory blocks publishers: the attempt is an outage
// at once rather than a wait to the end of its time, and once the alarm
// clears the next attempt goes through.
func TestBlockedBrokerIsOutage(t *testing.T) {
	b := setup(t, true)
	requireDelivered(t, b.send(t, b.msg("lane", 1, 0)))
	require.NoError(t, b.srv.SetMemoryAlarm(b.ctx, true))
	cleared := false
	t.Cleanup(func() {
		if !cleared {
			_ = b.srv.SetMemoryAlarm(context.Background(), false)
		}
	})
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	var res transport.Result
	for ctx.Err() == nil {
		// The broker tells a connection it is blocked on its next
		// publish: the first attempt after the alarm may wait for it.
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		r, err := b.tr.Send(attempt, b.d, b.msg("lane", 2, 1))
		cancelAttempt()
		require.NoError(t, err)
		res = r
		if strings.Contains(res.Detail, "blocks publishers") {
			break
		}
	}
	cancel()
	require.Equal(t, transport.Retry, res.Outcome)
	require.True(t, res.Outage)
	require.Contains(t, res.Detail, "blocks publishers")
	require.NoError(t, b.srv.SetMemoryAlarm(b.ctx, false))
	cleared = true
	requireDelivered(t, b.sendRetrying(t, b.msg("lane", 2, 1)))
	a := b.read(t)
	require.Equal(t, map[string][]int64{"lane": seqs(1, 2)}, a.firsts)
}
