package nats

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
	standard "github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv/natstest"
)

const (
	testStream = "HOOKFLOW"
	testPrefix = "hf.orders"
	testLane   = "order-1"
)

// bundle is one test's server, with a stream capturing hf.>, and a
// transport allowed to reach it on loopback.
type bundle struct {
	srv *natstest.Server
	tr  *Transport
}

func setup(t *testing.T) bundle {
	t.Helper()
	srv := natstest.ForTest(t)
	if err := natstest.CreateStream(testCtx(t), srv.URL(), testStream, []string{"hf.>"}); err != nil {
		t.Fatal(err)
	}
	tr := New(egress.Policy{AllowPrivate: true})
	t.Cleanup(func() { _ = tr.Close() })
	return bundle{srv: srv, tr: tr}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// destination is endpoint ep's destination on prefix, signed with a
// secret of its own.
func (b bundle) destination(t *testing.T, ep, prefix string) transport.Destination {
	t.Helper()
	secret, err := standard.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(Config{URL: b.srv.URL(), Subject: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return transport.Destination{EndpointID: ep, Secrets: []string{secret}, Config: cfg, URL: "nats://" + b.srv.Addr() + "/" + prefix}
}

// event is sequence seq of lane testLane, following previous.
func event(seq, previous int64, skipped ...int64) transport.Message {
	body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("evt_%d", seq), "sequence": seq, "previous_sequence": previous})
	return transport.Message{
		EventID: fmt.Sprintf("evt_%d", seq), Body: body, At: time.Now(), CorrelationID: testLane,
		Sequence: seq, Attempt: 1, Previous: previous, Skipped: skipped, Type: "order.updated",
	}
}

func send(t *testing.T, tr *Transport, d transport.Destination, m transport.Message) transport.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := tr.Send(ctx, d, m)
	if err != nil {
		t.Fatalf("send %d: %v", m.Sequence, err)
	}
	return res
}

func mustDeliver(t *testing.T, tr *Transport, d transport.Destination, m transport.Message) {
	t.Helper()
	if res := send(t, tr, d, m); res.Outcome != transport.Delivered || res.Status != 0 {
		t.Fatalf("send %d: got %v (%s), want delivered", m.Sequence, res.Outcome, res.Detail)
	}
}

// stored reads back what d's lanes hold, checking every signature with d's
// secrets.
func stored(t *testing.T, tr *Transport, d transport.Destination) []transport.Stored {
	t.Helper()
	var out []transport.Stored
	err := tr.Read(testCtx(t), d, func(s transport.Stored) error {
		if err := standard.Verify(d.Secrets, s.EventID, fmt.Sprint(s.Timestamp), s.Signature, s.Body, time.Now(), 0); err != nil {
			t.Errorf("stored %s: signature: %v", s.EventID, err)
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

// sequences are the lane testLane's stored sequences, in order.
func sequences(all []transport.Stored) []int64 {
	var seqs []int64
	for _, s := range all {
		if s.Lane == testLane {
			seqs = append(seqs, s.Sequence)
		}
	}
	return seqs
}

func wantSequences(t *testing.T, all []transport.Stored, want ...int64) {
	t.Helper()
	if got := sequences(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored sequences: got %v, want %v", got, want)
	}
}

func TestSendWritesEachEventOnceInOrder(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	wantSequences(t, stored(t, b.tr, d))
	for seq := int64(1); seq <= 3; seq++ {
		mustDeliver(t, b.tr, d, event(seq, seq-1))
	}
	// The tail again (its acknowledgement lost): delivered, not written.
	mustDeliver(t, b.tr, d, event(3, 2))
	// An earlier event after its successor: refused for good.
	if res := send(t, b.tr, d, event(2, 1)); res.Outcome != transport.Permanent || !strings.Contains(res.Detail, "already holds sequence 3") {
		t.Fatalf("2 after 3: got %v (%s), want permanent", res.Outcome, res.Detail)
	}
	all := stored(t, b.tr, d)
	wantSequences(t, all, 1, 2, 3)
	for i, s := range all {
		if s.EndpointID != "ep_1" || s.Previous != int64(i) || s.EventID != fmt.Sprintf("evt_%d", i+1) {
			t.Errorf("stored %d: got endpoint %s previous %d id %s", i, s.EndpointID, s.Previous, s.EventID)
		}
	}
}

// jetStream is a plain client of the server, as a user's.
func (b bundle) jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(b.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publishDirectly writes m as an attempt whose acknowledgement was lost
// would have: with the event's message id (within the duplicate window)
// or without one (past it).
func publishDirectly(t *testing.T, b bundle, d transport.Destination, m transport.Message, withID bool) {
	t.Helper()
	js := b.jetStream(t)
	msg, err := message(d, m, testPrefix+"."+m.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	var opts []jetstream.PublishOpt
	if withID {
		opts = append(opts, jetstream.WithMsgID(d.EndpointID+":"+m.EventID))
	}
	if _, err := js.PublishMsg(testCtx(t), msg, opts...); err != nil {
		t.Fatal(err)
	}
}

func TestLostAcknowledgementIsDelivered(t *testing.T) {
	for _, withID := range []bool{true, false} {
		t.Run(fmt.Sprintf("message id %v", withID), func(t *testing.T) {
			b := setup(t)
			d := b.destination(t, "ep_1", testPrefix)
			mustDeliver(t, b.tr, d, event(1, 0))
			publishDirectly(t, b, d, event(2, 1), withID)
			mustDeliver(t, b.tr, d, event(2, 1))
			mustDeliver(t, b.tr, d, event(3, 2))
			wantSequences(t, stored(t, b.tr, d), 1, 2, 3)
		})
	}
}

// TestConcurrentSendsStoreOne races attempts of the same event through
// connections of their own (a zombie attempt and its retry, on two
// workers): the server's checks let one write through.
func TestConcurrentSendsStoreOne(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	const racers = 4
	trs := make([]*Transport, racers)
	for i := range trs {
		trs[i] = New(egress.Policy{AllowPrivate: true})
		t.Cleanup(func() { _ = trs[i].Close() })
	}
	for seq := int64(1); seq <= 5; seq++ {
		var wg sync.WaitGroup
		results := make([]transport.Result, racers)
		for i, tr := range trs {
			wg.Go(func() { results[i] = send(t, tr, d, event(seq, seq-1)) })
		}
		wg.Wait()
		for i, res := range results {
			if res.Outcome != transport.Delivered {
				t.Fatalf("sequence %d, racer %d: got %v (%s), want delivered", seq, i, res.Outcome, res.Detail)
			}
		}
	}
	wantSequences(t, stored(t, b.tr, d), 1, 2, 3, 4, 5)
}

// TestSkippedTailIsFollowed: 2's acknowledgement was lost, the ledger
// dead-lettered and skipped it, and 3 follows 1 with 2 among its skipped
// sequences. The broker holds 2 anyway; 3 is written after it.
func TestSkippedTailIsFollowed(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	mustDeliver(t, b.tr, d, event(1, 0))
	mustDeliver(t, b.tr, d, event(2, 1))
	mustDeliver(t, b.tr, d, event(3, 1, 2))
	all := stored(t, b.tr, d)
	wantSequences(t, all, 1, 2, 3)
	if got := all[2].Skipped; len(got) != 1 || got[0] != 2 {
		t.Fatalf("3's skipped sequences: got %v, want [2]", got)
	}
}

func TestForeignTailIsPermanent(t *testing.T) {
	b := setup(t)
	mine, theirs := b.destination(t, "ep_mine", testPrefix), b.destination(t, "ep_theirs", testPrefix)
	mustDeliver(t, b.tr, theirs, event(1, 0))
	if res := send(t, b.tr, mine, event(1, 0)); res.Outcome != transport.Permanent || !strings.Contains(res.Detail, "ep_theirs") {
		t.Fatalf("on another endpoint's lane: got %v (%s), want permanent naming ep_theirs", res.Outcome, res.Detail)
	}

	// A message some other publisher wrote on the lane is foreign too.
	other := b.destination(t, "ep_mine", "hf.shared")
	js := b.jetStream(t)
	if _, err := js.Publish(testCtx(t), "hf.shared."+testLane, []byte("not hookflow's")); err != nil {
		t.Fatal(err)
	}
	if res := send(t, b.tr, other, event(1, 0)); res.Outcome != transport.Permanent || !strings.Contains(res.Detail, "did not write") {
		t.Fatalf("on a lane another publisher wrote: got %v (%s), want permanent", res.Outcome, res.Detail)
	}
}

// TestKilledServerIsAnOutage kills the server with SIGKILL mid-lane: the
// attempt is an outage to retry, and after the restart the lane goes on
// from what the server kept, with nothing lost or written twice.
func TestKilledServerIsAnOutage(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	mustDeliver(t, b.tr, d, event(1, 0))
	mustDeliver(t, b.tr, d, event(2, 1))
	if err := b.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// The first attempt finds its connection closed, the next one cannot
	// dial: both are outages.
	for range 2 {
		res := send(t, b.tr, d, event(3, 2))
		if res.Outcome != transport.Retry || !res.Outage {
			t.Fatalf("server killed: got %v outage=%v (%s), want retry as an outage", res.Outcome, res.Outage, res.Detail)
		}
	}
	if err := b.srv.Restart(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	mustDeliver(t, b.tr, d, event(3, 2))
	mustDeliver(t, b.tr, d, event(3, 2))
	wantSequences(t, stored(t, b.tr, d), 1, 2, 3)
}

func TestWrongPasswordIsPermanentAndRedacted(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	const password = "Zq7-wrong-Pw-9xK!"
	d.Credentials = map[string]string{CredentialUsername: natstest.Username, CredentialPassword: password}
	res := send(t, b.tr, d, event(1, 0))
	if res.Outcome != transport.Permanent || res.Outage {
		t.Fatalf("wrong password: got %v outage=%v (%s), want permanent", res.Outcome, res.Outage, res.Detail)
	}
	for i := 0; i+4 <= len(password); i++ {
		if piece := password[i : i+4]; strings.Contains(res.Detail, piece) || strings.Contains(res.Summary, piece) {
			t.Fatalf("the answer holds %q of the password: %s", piece, res.Detail)
		}
	}
	if err := b.tr.Check(testCtx(t), d); !isField(err, fieldCreds) {
		t.Fatalf("check with a wrong password: got %v, want a field error on credentials", err)
	}

	d.Credentials[CredentialPassword] = b.srv.Password()
	mustDeliver(t, b.tr, d, event(1, 0))
}

func isField(err error, field string) bool {
	var fe *transport.FieldError
	return errors.As(err, &fe) && fe.Field == field
}

func TestAddress(t *testing.T) {
	tr := New(egress.Policy{})
	t.Cleanup(func() { _ = tr.Close() })
	address := func(cfg string, creds map[string]string, private bool) (string, error) {
		return tr.Address(context.Background(), transport.Destination{EndpointID: "ep_1", Config: json.RawMessage(cfg), Credentials: creds, PrivateTargets: private})
	}
	got, err := address(`{"url":"tls://Broker.Example.com","subject":"hf.orders","stream":"ORDERS"}`, map[string]string{"token": "s3cret-token"}, false)
	if err != nil || got != "tls://broker.example.com:4222/hf.orders" {
		t.Fatalf("address: got %q, %v", got, err)
	}
	for _, c := range []struct {
		name, cfg, field string
		creds            map[string]string
	}{
		{"not an object", `[]`, fieldConfig, nil},
		{"unknown field", `{"url":"tls://b.example.com","subject":"a","exchange":"x"}`, fieldConfig, nil},
		{"no url", `{"subject":"a"}`, fieldURL, nil},
		{"other scheme", `{"url":"https://b.example.com","subject":"a"}`, fieldURL, nil},
		{"credentials in url", `{"url":"tls://u:p@b.example.com","subject":"a"}`, fieldURL, nil},
		{"path", `{"url":"tls://b.example.com/x","subject":"a"}`, fieldURL, nil},
		{"port", `{"url":"tls://b.example.com:99999","subject":"a"}`, fieldURL, nil},
		{"plain tcp", `{"url":"nats://b.example.com","subject":"a"}`, fieldURL, nil},
		{"loopback", `{"url":"tls://127.0.0.1:4222","subject":"a"}`, fieldURL, nil},
		{"localhost", `{"url":"tls://localhost:4222","subject":"a"}`, fieldURL, nil},
		{"private", `{"url":"tls://10.0.0.8:4222","subject":"a"}`, fieldURL, nil},
		{"no subject", `{"url":"tls://b.example.com"}`, fieldSubject, nil},
		{"wildcard", `{"url":"tls://b.example.com","subject":"a.>"}`, fieldSubject, nil},
		{"system subject", `{"url":"tls://b.example.com","subject":"$JS.API"}`, fieldSubject, nil},
		{"empty token", `{"url":"tls://b.example.com","subject":"a..b"}`, fieldSubject, nil},
		{"long subject", `{"url":"tls://b.example.com","subject":"` + strings.Repeat("a", 101) + `"}`, fieldSubject, nil},
		{"stream name", `{"url":"tls://b.example.com","subject":"a","stream":"a.b"}`, fieldStream, nil},
		{"ca on plain", `{"url":"nats://b.example.com","subject":"a","tls_ca_pem":"x"}`, fieldTLSCA, nil},
		{"ca not pem", `{"url":"tls://b.example.com","subject":"a","tls_ca_pem":"x"}`, fieldTLSCA, nil},
		{"unknown credential", `{"url":"tls://b.example.com","subject":"a"}`, fieldCredsPre + "nkey", map[string]string{"nkey": "x"}},
		{"token and password", `{"url":"tls://b.example.com","subject":"a"}`, fieldCreds, map[string]string{"token": "t", "username": "u", "password": "p"}},
		{"user without password", `{"url":"tls://b.example.com","subject":"a"}`, fieldCredsPre + "password", map[string]string{"username": "u"}},
		{"empty password", `{"url":"tls://b.example.com","subject":"a"}`, fieldCredsPre + "password", map[string]string{"username": "u", "password": ""}},
	} {
		if _, err := address(c.cfg, c.creds, false); !isField(err, c.field) {
			t.Errorf("%s: got %v, want a field error on %s", c.name, err, c.field)
		}
	}

	// A private target only where the policy allows it, for a tenant
	// granted the allowlist; plain TCP likewise.
	allowed := New(egress.Policy{Allowlist: []string{"127.0.0.1:4222"}})
	t.Cleanup(func() { _ = allowed.Close() })
	d := transport.Destination{Config: json.RawMessage(`{"url":"nats://127.0.0.1:4222","subject":"a"}`), PrivateTargets: true}
	if got, err := allowed.Address(context.Background(), d); err != nil || got != "nats://127.0.0.1:4222/a" {
		t.Fatalf("allowlisted: got %q, %v", got, err)
	}
	d.PrivateTargets = false
	if _, err := allowed.Address(context.Background(), d); !isField(err, fieldURL) {
		t.Fatalf("allowlisted, tenant not granted: got %v, want a field error on config.url", err)
	}
}

func TestCheck(t *testing.T) {
	b := setup(t)
	ctx := testCtx(t)
	check := func(cfg Config) error {
		cfg.URL = b.srv.URL()
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b.tr.Check(ctx, transport.Destination{EndpointID: "ep_1", Config: raw})
	}
	if err := check(Config{Subject: testPrefix}); err != nil {
		t.Fatalf("stream present: %v", err)
	}
	if err := check(Config{Subject: testPrefix, Stream: testStream}); err != nil {
		t.Fatalf("stream named: %v", err)
	}
	if err := check(Config{Subject: "nothing.here"}); !isField(err, fieldSubject) {
		t.Fatalf("no stream: got %v, want a field error on config.subject", err)
	}
	if err := check(Config{Subject: testPrefix, Stream: "OTHER"}); !isField(err, fieldStream) {
		t.Fatalf("another stream named: got %v, want a field error on config.stream", err)
	}
	js := b.jetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if err := check(Config{Subject: "work"}); !isField(err, fieldSubject) || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("work-queue stream: got %v, want a field error on its retention", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NARROW", Subjects: []string{"narrow.only"}}); err != nil {
		t.Fatal(err)
	}
	if err := check(Config{Subject: "narrow"}); !isField(err, fieldSubject) {
		t.Fatalf("stream capturing one lane: got %v, want a field error on config.subject", err)
	}
}

// TestMissingStreamRetries deletes the stream under a lane: the attempt is
// to be retried (the user may make it again within the recovery window),
// and is no outage of the server.
func TestMissingStreamRetries(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	mustDeliver(t, b.tr, d, event(1, 0))
	if err := natstest.DeleteStream(testCtx(t), b.srv.URL(), testStream); err != nil {
		t.Fatal(err)
	}
	res := send(t, b.tr, d, event(2, 1))
	if res.Outcome != transport.Retry || res.Outage {
		t.Fatalf("stream deleted: got %v outage=%v (%s), want retry, no outage", res.Outcome, res.Outage, res.Detail)
	}
	if err := natstest.CreateStream(testCtx(t), b.srv.URL(), testStream, []string{"hf.>"}); err != nil {
		t.Fatal(err)
	}
	mustDeliver(t, b.tr, d, event(2, 1))
	wantSequences(t, stored(t, b.tr, d), 2)
}

// TestRefusedPermissionIsPermanent: credentials that may read the stream
// but not publish to the lane. The server says so on the connection only,
// and the publish times out: that is still a refusal, not an outage.
// Credentials that may not use JetStream's API fail the same way, on
// looking the stream up.
func TestRefusedPermissionIsPermanent(t *testing.T) {
	b := setup(t)
	for _, user := range []string{natstest.ReaderUsername, natstest.PublisherUsername} {
		d := b.destination(t, "ep_1", testPrefix)
		d.Credentials = map[string]string{CredentialUsername: user, CredentialPassword: b.srv.Password()}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := b.tr.Send(ctx, d, event(1, 0))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != transport.Permanent || res.Outage {
			t.Fatalf("%s: got %v outage=%v (%s), want permanent", user, res.Outcome, res.Outage, res.Detail)
		}
		if strings.Contains(res.Detail, b.srv.Password()) {
			t.Fatalf("the answer holds the password: %s", res.Detail)
		}
	}
	d := b.destination(t, "ep_1", testPrefix)
	d.Credentials = map[string]string{CredentialUsername: natstest.PublisherUsername, CredentialPassword: b.srv.Password()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.tr.Check(ctx, d); !isField(err, fieldCreds) || !strings.Contains(err.Error(), "permission") {
		t.Fatalf("check without JetStream's API: got %v, want a field error on credentials naming the permission", err)
	}
}

// TestResultTakesCredentialsOut: whatever a driver's error quotes of the
// credentials (here a base64 form of the password) is not in the answer.
func TestResultTakesCredentialsOut(t *testing.T) {
	const password = "correct-horse-battery"
	err := fmt.Errorf("connect: server said: %s", base64.StdEncoding.EncodeToString([]byte(password)))
	res := failed(err, redact.NewValues([]string{password}))
	if strings.Contains(res.Detail, base64.StdEncoding.EncodeToString([]byte(password))) || !strings.Contains(res.Detail, redact.Mark) {
		t.Fatalf("detail: %s", res.Detail)
	}
}

// TestSendOverTLS: a tls:// server checked against the destination's own
// certificate authority; without it the certificate is not trusted.
func TestSendOverTLS(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	cfg := Config{URL: b.srv.TLSURL(), Subject: testPrefix}
	raw, _ := json.Marshal(cfg)
	d.Config = raw
	if res := send(t, b.tr, d, event(1, 0)); res.Outcome != transport.Retry || !strings.Contains(res.Detail, "certificate") {
		t.Fatalf("untrusted certificate: got %v (%s), want retry naming the certificate", res.Outcome, res.Detail)
	}
	cfg.TLSCAPEM = b.srv.CAPEM()
	raw, _ = json.Marshal(cfg)
	d.Config = raw
	if err := b.tr.Check(testCtx(t), d); err != nil {
		t.Fatalf("check over tls: %v", err)
	}
	mustDeliver(t, b.tr, d, event(1, 0))
	wantSequences(t, stored(t, b.tr, d), 1)
}

// TestReadKeepsToItsLanes: lanes interleaved in the stream come back each
// in its order, and a longer prefix's subjects (another destination's
// lanes) are not read as lanes.
func TestReadKeepsToItsLanes(t *testing.T) {
	b := setup(t)
	d, longer := b.destination(t, "ep_1", testPrefix), b.destination(t, "ep_2", testPrefix+".eu")
	for seq := int64(1); seq <= 3; seq++ {
		for _, lane := range []string{"a", "b"} {
			m := event(seq, seq-1)
			m.CorrelationID, m.EventID = lane, fmt.Sprintf("evt_%s_%d", lane, seq)
			mustDeliver(t, b.tr, d, m)
		}
		mustDeliver(t, b.tr, longer, event(seq, seq-1))
	}
	got := map[string][]int64{}
	for _, s := range stored(t, b.tr, d) {
		got[s.Lane] = append(got[s.Lane], s.Sequence)
	}
	if fmt.Sprint(got) != "map[a:[1 2 3] b:[1 2 3]]" {
		t.Fatalf("read: got %v, want lanes a and b each 1 2 3", got)
	}
}

// TestOversizeIsPermanent: a message past the server's max_payload (1 MiB
// by default) can never be written; the lane stays as it was.
func TestOversizeIsPermanent(t *testing.T) {
	b := setup(t)
	d := b.destination(t, "ep_1", testPrefix)
	m := event(1, 0)
	m.Body = []byte(`{"data":"` + strings.Repeat("x", 1<<20) + `"}`)
	if res := send(t, b.tr, d, m); res.Outcome != transport.Permanent || !strings.Contains(res.Detail, "max_payload") {
		t.Fatalf("oversize: got %v (%s), want permanent naming max_payload", res.Outcome, res.Detail)
	}
	mustDeliver(t, b.tr, d, event(1, 0))
	wantSequences(t, stored(t, b.tr, d), 1)
}

// TestStreamWithoutDirectGet: a stream that does not allow direct gets is
// read through the stream's API instead, with the same outcomes.
func TestStreamWithoutDirectGet(t *testing.T) {
	b := setup(t)
	if _, err := b.jetStream(t).CreateStream(testCtx(t), jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	d := b.destination(t, "ep_1", "plain")
	mustDeliver(t, b.tr, d, event(1, 0))
	mustDeliver(t, b.tr, d, event(2, 1))
	mustDeliver(t, b.tr, d, event(2, 1))
	if res := send(t, b.tr, d, event(1, 0)); res.Outcome != transport.Permanent {
		t.Fatalf("1 after 2: got %v (%s), want permanent", res.Outcome, res.Detail)
	}
	wantSequences(t, stored(t, b.tr, d), 1, 2)
}
