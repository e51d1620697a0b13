package natstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestKillKeepsWhatWasAcknowledged checks the server the other tests lean
// on: a message JetStream acknowledged is there after a kill -9 and a
// restart on the same port, and wrong credentials are refused while none
// are taken as the default user.
func TestKillKeepsWhatWasAcknowledged(t *testing.T) {
	s := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := CreateStream(ctx, s.URL(), "ORDERS", []string{"orders.>"}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.URL(), nats.UserInfo(Username, s.Password()), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "orders.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	before := s.Pid()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Pid() != 0 {
		t.Fatal("killed, yet a pid")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Pid() == 0 || s.Pid() == before {
		t.Fatalf("restarted: pid %d, was %d", s.Pid(), before)
	}
	if _, err := nats.Connect(s.URL(), nats.UserInfo(Username, "wrong"), nats.NoReconnect()); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: got %v, want an authorization violation", err)
	}
	nc, err = nats.Connect(s.URL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, "orders.a")
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "one" {
		t.Fatalf("after restart: got %q, want %q", msg.Data, "one")
	}
}
