package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeReceiverEnv makes the test binary, started as a child, serve as a
// stand-in for `hookflow receiver` (TestMain): it binds what
// HOOKFLOW_RECEIVER_ADDR names, logs the reference receiver's "listening"
// line with the bound address once bound, and answers every /webhook with
// "applied" and its process id.
const fakeReceiverEnv = "CHAOS_TEST_FAKE_RECEIVER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeReceiverEnv) == "1" {
		os.Exit(fakeReceiver())
	}
	os.Exit(m.Run())
}

func fakeReceiver() int {
	ln, err := net.Listen("tcp", os.Getenv("HOOKFLOW_RECEIVER_ADDR"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "listen: %v\n", err)
		return 1
	}
	slog.New(slog.NewJSONHandler(os.Stdout, nil)).Info("reference receiver listening", "addr", ln.Addr().String())
	pid := os.Getpid()
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"applied","pid":%d}`, pid)
	}))
	fmt.Fprintf(os.Stderr, "serve: %v\n", err)
	return 1
}

// The address is read from the line the receiver writes once bound, not
// from the line the command writes before it binds (which names the
// configured address, port 0 here).
func TestListeningAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line, want string
		ok         bool
	}{
		{`{"time":"t","level":"INFO","msg":"reference receiver listening","addr":"127.0.0.1:45487"}`, "127.0.0.1:45487", true},
		{`{"time":"t","level":"INFO","msg":"reference receiver listening","url":"http://127.0.0.1:0/webhook"}`, "", false},
		{`---- chaos: start 2 of receiver-b at 2026-12-05T12:28:31Z`, "", false},
		{`{"msg":"webhook rejected","reason":"reference receiver listening","addr":"127.0.0.1:1"}`, "", false},
	} {
		got, ok := listeningAddr([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("listeningAddr(%s) = %q, %v; want %q, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// A receiver with no incarnation listening is answered 502 by the proxy,
// as an unreachable one, and never forwarded to a port it held before;
// once pointed at its new address, the proxy forwards there.
func TestProxyFollowsItsUpstream(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{})
	p.SetUpstream(0, "")
	code, _, err := deliver(t, url+Path(0), "ev-1", 5*time.Second)
	if err != nil || code != http.StatusBadGateway || got.Load() != 0 || p.Stats().UpstreamErrs != 1 {
		t.Fatalf("with no upstream: %d %v, upstream saw %d, stats %+v; want 502 and nothing forwarded", code, err, got.Load(), p.Stats())
	}
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"applied","where":"moved"}`)
	}))
	t.Cleanup(moved.Close)
	p.SetUpstream(0, moved.URL+"/webhook")
	code, body, err := deliver(t, url+Path(0), "ev-1", 5*time.Second)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "moved") {
		t.Fatalf("after SetUpstream: %d %q %v; want 200 from the moved receiver", code, body, err)
	}
}

// Two receivers started at once never share a port, and a receiver
// restarted while another process holds its old port is found where it
// listens now: the proxy forwards the endpoints of every tenant that
// share it to the new incarnation and nothing to the stranger, and the
// run's client reads it there. A receiver handed a port picked ahead (the
// design this replaces) could not bind it and never came back.
func TestRestartedReceiverIsFollowed(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	tenants := ChaosTenants(3)
	subs := ForTenants([]Subscriber{{Name: "A"}, {Name: "B"}}, tenants)
	s := newStack(Config{Subscribers: subs}, logs, logs, slog.New(slog.DiscardHandler), &progress{w: io.Discard, began: time.Now()})
	s.proxy = NewProxy(make([]string, len(subs)), 1, time.Second, ProxyFaults{})
	proxySrv := httptest.NewServer(s.proxy)
	t.Cleanup(proxySrv.Close)
	s.recvAddrs = []*receiverAddr{{}, {}}
	ctx, cancel := context.WithCancel(context.Background())
	var procs []*proc
	t.Cleanup(func() {
		for _, rp := range procs {
			rp.stop(5 * time.Second)
		}
		cancel()
	})
	for r, name := range []string{"receiver-a", "receiver-b"} {
		rp := newProc(name, self, nil, childEnv(map[string]string{fakeReceiverEnv: "1", "HOOKFLOW_RECEIVER_ADDR": "127.0.0.1:0"}), filepath.Join(logs, name+".log"))
		rp.onExit = func() { s.pointReceiver(r, "") }
		if err := rp.start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, rp)
		go rp.supervise(ctx, func(name, how string) { t.Errorf("%s exited on its own: %s", name, how) })
		go s.followReceiver(ctx, r, rp)
	}

	// pidAt posts to endpoint ep through the proxy until its receiver
	// answers, and returns the pid that answered.
	pidAt := func(ep int, notPid int) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body, err := deliver(t, proxySrv.URL+Path(ep), "ev-1", 5*time.Second)
			var v struct{ Pid int }
			if err == nil && code == http.StatusOK && json.Unmarshal([]byte(body), &v) == nil && v.Pid != notPid {
				return v.Pid
			}
			if err == nil && code != http.StatusOK && code != http.StatusBadGateway {
				t.Fatalf("endpoint %d answered %d %q; want 200 from its receiver or 502 while it restarts", ep, code, body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("endpoint %d: no answer from a receiver other than pid %d within 30s (last: %d %q %v)", ep, notPid, code, body, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := make([]int, len(subs))
	for ep, sub := range subs {
		before[ep] = pidAt(ep, 0)
		if want := pidOf(procs[sub.Receiver]); before[ep] != want {
			t.Fatalf("endpoint %d (%s) reached pid %d, want its receiver's %d", ep, sub.Name, before[ep], want)
		}
	}
	a, b := s.recvAddrs[0].get(), s.recvAddrs[1].get()
	if a == "" || a == b {
		t.Fatalf("receivers listen on %q and %q; want two addresses", a, b)
	}

	// A stranger takes receiver-a's port the moment it is killed.
	if !procs[0].kill() {
		t.Fatal("receiver-a was not running")
	}
	stranger, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("take receiver-a's old port %s: %v", a, err)
	}
	strangerSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "webhook signature mismatch (a stranger)", http.StatusUnauthorized)
	})}
	go func() { _ = strangerSrv.Serve(stranger) }()
	t.Cleanup(func() { _ = strangerSrv.Close() })

	for ep, sub := range subs {
		old := 0 // receiver-b was not restarted
		if sub.Receiver == 0 {
			old = before[ep]
		}
		now := pidAt(ep, old)
		if want := pidOf(procs[sub.Receiver]); now != want {
			t.Errorf("endpoint %d (%s) reached pid %d after the restart, want its receiver's %d", ep, sub.Name, now, want)
		}
	}
	if procs[0].startCount() != 2 || s.recvAddrs[0].get() == a || s.recvAddrs[0].get() == "" {
		t.Errorf("receiver-a: %d starts, listening on %q (was %s); want 2 starts on a new address", procs[0].startCount(), s.recvAddrs[0].get(), a)
	}
	// The fake answers /healthz 200 at its new address; the stranger
	// would answer 401.
	if err := s.receiverClient(0).healthz(ctx); err != nil {
		t.Errorf("the run's client of receiver-a: %v", err)
	}
}

// pidOf is the process id of rp's current incarnation.
func pidOf(rp *proc) int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.cmd.Process.Pid
}
