package chaos

import (
	"github.com/hookflow/hookflow/internal/contract"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// proxySetup starts a stand-in receiver answering "applied" and a proxy in
// front of it.
func proxySetup(t *testing.T, holdFor time.Duration, faults ProxyFaults) (*Proxy, string, *atomic.Int64) {
	t.Helper()
	var got atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"applied","event_id":"`+r.Header.Get("webhook-id")+`"}`)
	}))
	t.Cleanup(upstream.Close)
	p := NewProxy([]string{upstream.URL + "/webhook", upstream.URL + "/webhook"}, 1, holdFor, faults)
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Wait(5 * time.Second) })
	return p, srv.URL, &got
}

func deliver(t *testing.T, url, id string, timeout time.Duration) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestProxyPassesThrough(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{})
	code, body, err := deliver(t, url+Path(0), "ev-1", 5*time.Second)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "applied") {
		t.Fatalf("got %d %q %v, want 200 applied", code, body, err)
	}
	if got.Load() != 1 || p.AppliedAnswers()[Delivery{Key(contract.DefaultTenant, "ev-1"), 0}] != 1 {
		t.Fatalf("upstream saw %d, applied answers %v", got.Load(), p.AppliedAnswers())
	}
}

// A lost ack: the receiver applied the event, the sender gets a reset.
func TestProxyLostAck(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{LostAck: 1})
	if _, _, err := deliver(t, url+Path(0), "ev-1", 5*time.Second); err == nil {
		t.Fatal("the sender got an answer; want a reset connection")
	}
	if got.Load() != 1 || p.Stats().LostAcks != 1 || p.AppliedAnswers()[Delivery{Key(contract.DefaultTenant, "ev-1"), 0}] != 1 {
		t.Fatalf("upstream saw %d, stats %+v", got.Load(), p.Stats())
	}
}

// A held request: the sender times out, the receiver still gets it later.
func TestProxyLatency(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, 300*time.Millisecond, ProxyFaults{Latency: 1})
	if _, _, err := deliver(t, url+Path(0), "ev-1", 100*time.Millisecond); err == nil {
		t.Fatal("the sender got an answer before its timeout")
	}
	time.Sleep(50 * time.Millisecond) // the handler may not have begun yet
	if !p.Wait(5 * time.Second) {
		t.Fatal("the held request never finished")
	}
	if got.Load() != 1 || p.Stats().Latency != 1 {
		t.Fatalf("upstream saw %d, stats %+v", got.Load(), p.Stats())
	}
}

func TestProxyDownAndBurst(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{})
	p.SetDown(1)
	var resets, unavailable int
	for i := 0; i < 4; i++ {
		code, _, err := deliver(t, url+Path(1), "ev-d", 5*time.Second)
		switch {
		case err != nil:
			resets++
		case code == http.StatusServiceUnavailable:
			unavailable++
		default:
			t.Fatalf("down endpoint answered %d", code)
		}
	}
	if resets != 2 || unavailable != 2 {
		t.Fatalf("resets=%d 503s=%d, want 2 and 2", resets, unavailable)
	}
	// The other endpoints are not affected by the outage.
	if code, _, err := deliver(t, url+Path(0), "ev-h", 5*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("healthy endpoint during the outage: %d %v", code, err)
	}

	p.SetBurst(true, true)
	req, _ := http.NewRequest(http.MethodPost, url+Path(0), strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("burst answered %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	p.SetBurst(false, false)
	p.SetDown(-1)
	if code, _, err := deliver(t, url+Path(1), "ev-d", 5*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("healed endpoint: %d %v", code, err)
	}
	if got.Load() != 2 {
		t.Fatalf("upstream saw %d deliveries, want 2 (faults never forward)", got.Load())
	}
}

// The flapping endpoint answers resets and 503s while down, counted apart
// from the down endpoint's, and its outages keep their times.
func TestProxyFlaps(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{})
	p.SetFlapping(1)
	if code, _, err := deliver(t, url+Path(1), "ev-f", 5*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("flapping endpoint while up: %d %v", code, err)
	}
	p.SetFlapDown(true)
	var failed int
	for i := 0; i < 4; i++ {
		if code, _, err := deliver(t, url+Path(1), "ev-f", 5*time.Second); err != nil || code == http.StatusServiceUnavailable {
			failed++
		}
	}
	if code, _, err := deliver(t, url+Path(0), "ev-h", 5*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("other endpoint while the flapping one is down: %d %v", code, err)
	}
	p.SetFlapDown(false)
	if code, _, err := deliver(t, url+Path(1), "ev-f", 5*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("flapping endpoint up again: %d %v", code, err)
	}
	st := p.Stats()
	if failed != 4 || st.FlapAnswers != 4 || st.DownAnswers != 0 || got.Load() != 3 {
		t.Fatalf("failed %d, flap answers %d, down answers %d, upstream saw %d; want 4, 4, 0, 3", failed, st.FlapAnswers, st.DownAnswers, got.Load())
	}
	outages := p.Outages()
	if len(outages) != 1 || outages[0].From.IsZero() || outages[0].To.Before(outages[0].From) {
		t.Fatalf("outages %+v, want one that ended", outages)
	}
}

// A double click's refusal hits the correlation's next event the proxy has
// never seen, once; a retry of an event it has seen goes through, since the
// receiver may have applied an earlier copy.
func TestProxyRefusesFirstSightOnce(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{})
	post := func(id, corr string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url+Path(0), strings.NewReader(`{"correlation_id":"`+corr+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("ev-a-1", "a"); code != http.StatusOK {
		t.Fatalf("before the refusal: %d", code)
	}
	refused := p.RefuseNext(Key(contract.DefaultTenant, "a"))
	for _, tc := range []struct {
		id, corr string
		want     int
	}{
		{"ev-b-1", "b", http.StatusOK},                  // another correlation
		{"ev-a-1", "a", http.StatusOK},                  // seen before: a retry
		{"ev-a-2", "a", http.StatusUnprocessableEntity}, // refused
		{"ev-a-2", "a", http.StatusOK},                  // its replay
		{"ev-a-3", "a", http.StatusOK},                  // the refusal was used up
	} {
		if code := post(tc.id, tc.corr); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.id, code, tc.want)
		}
	}
	select {
	case d := <-refused:
		if d != (Delivery{Key(contract.DefaultTenant, "ev-a-2"), 0}) {
			t.Errorf("refused %+v, want ev-a-2 at endpoint 0", d)
		}
	default:
		t.Error("the refusal was not reported")
	}
	if got.Load() != 5 || p.Stats().Refused != 1 {
		t.Errorf("upstream saw %d, refused %d; want 5 and 1", got.Load(), p.Stats().Refused)
	}

	refused = p.RefuseNext(Key(contract.DefaultTenant, "c"))
	p.Disarm(Key(contract.DefaultTenant, "c"))
	if code := post("ev-c-1", "c"); code != http.StatusOK {
		t.Errorf("after Disarm: %d", code)
	}
	select {
	case d := <-refused:
		t.Errorf("a disarmed refusal refused %+v", d)
	default:
	}
}

// The proxy keeps the previous_sequence each delivery's envelopes carried,
// each value once, for the checks of a filtered endpoint's chain.
func TestProxyKeepsPreviousSequences(t *testing.T) {
	t.Parallel()
	p, url, _ := proxySetup(t, time.Second, ProxyFaults{})
	send := func(id, body string) {
		req, err := http.NewRequest(http.MethodPost, url+Path(1), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", id)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("e-3", `{"correlation_id":"c","sequence":3,"previous_sequence":1,"data":{}}`)
	send("e-3", `{"correlation_id":"c","sequence":3,"previous_sequence":1,"data":{}}`)
	send("e-5", `{"correlation_id":"c","sequence":5,"previous_sequence":3,"data":{}}`)
	send("e-5", `{"correlation_id":"c","sequence":5,"previous_sequence":2,"data":{}}`)
	send("e-1", `{"correlation_id":"c","sequence":1,"data":{}}`)
	got := p.PreviousSeen()
	want := map[Delivery][]int64{
		{Key(contract.DefaultTenant, "e-3"), 1}: {1},
		{Key(contract.DefaultTenant, "e-5"), 1}: {3, 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("previous sequences seen %v, want %v", got, want)
	}
}
