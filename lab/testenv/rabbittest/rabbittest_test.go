package rabbittest_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/lab/testenv/rabbittest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// A persistent message in a durable queue outlives a crash of the node,
// and Close leaves nothing listening: what the chaos run and the
// transport's kill test rely on.
func TestKillRestartKeepsDataAndCloseLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := rabbittest.ForTest(t)
	if err := s.Declare(ctx, "hf.test", "hf.test.audit"); err != nil {
		t.Fatal(err)
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: "evt_1", Body: []byte(`{}`)}
	if err := s.Publish(ctx, "hf.test", "lane", msg); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("the node still takes connections after Kill")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.DialConfig(s.URL(), amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: rabbittest.Username, Password: s.Password()}}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := ch.Get("hf.test.audit", true)
	if err != nil || !ok || d.MessageId != "evt_1" {
		t.Fatalf("after a crash the queue holds %q (ok %v, err %v), want evt_1", d.MessageId, ok, err)
	}
	conn.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{s.Addr(), s.EPMDAddr()} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listens after Close", addr)
		}
	}
}
