package nats

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookflow/hookflow/internal/transport"
)

// TestKeyChangesWithSettings: new credentials, config or egress rules
// make a new connection; the old one ages out.
func TestKeyChangesWithSettings(t *testing.T) {
	d := transport.Destination{EndpointID: "ep_1", Config: []byte(`{"url":"tls://b.example.com","subject":"a"}`), Credentials: map[string]string{"username": "u", "password": "p1"}}
	base := keyOf(d)
	if keyOf(d) != base {
		t.Fatal("the same settings make two keys")
	}
	changed := []transport.Destination{d, d, d, d}
	changed[0].Credentials = map[string]string{"username": "u", "password": "p2"}
	changed[1].Config = []byte(`{"url":"tls://b.example.com","subject":"b"}`)
	changed[2].PrivateTargets = true
	changed[3].EndpointID = "ep_2"
	for i, c := range changed {
		if keyOf(c) == base {
			t.Errorf("change %d keeps the key", i)
		}
	}
}

func TestPoolClosesIdleAndLeastRecentlyUsed(t *testing.T) {
	p := newPool()
	idle, err := p.get(key{endpoint: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	idle.used = time.Now().Add(-idleAfter - time.Second)
	p.swept = time.Time{}
	p.mu.Unlock()
	for i := range maxConns {
		if _, err := p.get(key{endpoint: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	p.mu.Lock()
	p.conns[key{endpoint: "0"}].used = time.Now().Add(-time.Minute)
	p.mu.Unlock()
	if _, err := p.get(key{endpoint: "one too many"}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	n, _, first := len(p.conns), p.conns[key{endpoint: "idle"}], p.conns[key{endpoint: "0"}]
	p.mu.Unlock()
	if n != maxConns || !idle.closed || first != nil {
		t.Fatalf("got %d connections, idle closed %v, first kept %v; want %d, true, false", n, idle.closed, first != nil, maxConns)
	}
	p.close()
	if _, err := p.get(key{endpoint: "after"}); err != errPoolClosed {
		t.Fatalf("after close: got %v, want errPoolClosed", err)
	}
}
