package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ProxyFaults are the odds of the per-request faults on healthy endpoints.
type ProxyFaults struct {
	// Latency holds the request past the sender's HTTP timeout, then
	// forwards it anyway: the receiver applies a copy the sender gave up on.
	Latency float64
	// LostAck forwards the request, reads the receiver's answer (it has
	// committed), then resets the sender's connection without answering.
	LostAck float64
}

// ProxyStats counts what the proxy did.
type ProxyStats struct {
	Requests     int64
	Forwarded    int64
	Latency      int64
	LostAcks     int64
	Burst503     int64
	DownAnswers  int64
	UpstreamErrs int64
	Parked       int64 // receiver answered 202: an event arrived before its predecessor
	Refused      int64 // answered 422 for a double click's dead letter
}

// Proxy stands between hookflow's workers and the receiver and injects
// faults. Endpoints point at /ok/<name>/webhook (healthy, subject to the
// per-request faults and 5xx bursts) or /down/webhook (answers resets and
// 503s while down). Everything else is forwarded to the receiver's /webhook.
type Proxy struct {
	upstream     string // receiver's /webhook URL
	holdFor      time.Duration
	faults       ProxyFaults
	client       *http.Client
	down         atomic.Bool
	burst        atomic.Bool
	burstRetryAf atomic.Bool
	faultsOn     atomic.Bool

	mu      sync.Mutex
	rng     *rand.Rand
	applied map[string]int // event id → "applied" answers seen
	seen    map[string]bool
	// refuse maps a correlation to the channel that gets the id of the
	// event refused for it.
	refuse map[string]chan string
	// modes are the receiver's failure modes per correlation (the operator
	// model's), and ackLost the events whose acknowledgement a LoseAck mode
	// has dropped once already.
	modes   map[string]ReceiverMode
	ackLost map[string]bool

	requests, forwarded, latency, lostAcks, burst503, downAnswers, upstreamErrs, parked, refused atomic.Int64

	inflight atomic.Int64
}

// NewProxy returns a proxy forwarding to upstream. holdFor is how long a
// latency fault holds a request (past the sender's timeout).
func NewProxy(upstream string, seed uint64, holdFor time.Duration, faults ProxyFaults) *Proxy {
	p := &Proxy{
		upstream: upstream, holdFor: holdFor, faults: faults,
		client:  &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		rng:     rand.New(rand.NewPCG(seed, 0x70727879)),
		applied: map[string]int{}, seen: map[string]bool{}, refuse: map[string]chan string{},
		modes: map[string]ReceiverMode{}, ackLost: map[string]bool{},
	}
	p.faultsOn.Store(true)
	return p
}

// SetDown turns the down endpoint's outage on or off.
func (p *Proxy) SetDown(on bool) { p.down.Store(on) }

// SetBurst starts or ends a 5xx burst on the healthy endpoints; withRetryAfter
// adds "Retry-After: 1" to the 503s.
func (p *Proxy) SetBurst(on, withRetryAfter bool) {
	p.burstRetryAf.Store(withRetryAfter)
	p.burst.Store(on)
}

// SetFaults turns the per-request faults and bursts on or off (off in a calm run).
func (p *Proxy) SetFaults(on bool) { p.faultsOn.Store(on) }

// RefuseNext makes the proxy refuse (422, a permanent rejection: the event
// dead-letters at once) the next delivery of correlation on a healthy
// endpoint whose event it has never seen before, and returns the channel
// that gets that event's id. Only a first sight is refused: an event the
// receiver may have applied already (a held or unacknowledged copy) is
// never dead-lettered for a double click, so a skip of it stays honest.
// Disarm ends a refusal that has not fired.
func (p *Proxy) RefuseNext(correlation string) <-chan string {
	ch := make(chan string, 1)
	p.mu.Lock()
	p.refuse[correlation] = ch
	p.mu.Unlock()
	return ch
}

// ReceiverMode is how the receiver answers the deliveries of one
// correlation, as the operator model sets it (SetMode).
type ReceiverMode int

const (
	// ModePass forwards every delivery: the receiver is healthy.
	ModePass ReceiverMode = iota
	// ModeReject answers 400 without forwarding: a permanent rejection,
	// which dead-letters the event at once.
	ModeReject
	// ModeUnavailable answers 503 (no Retry-After) without forwarding, so
	// the event dead-letters when its recovery window is spent.
	ModeUnavailable
	// ModeLoseAck forwards each event's first delivery, which the receiver
	// commits, and resets the sender's connection instead of answering;
	// later deliveries of that event pass, so it is never dead-lettered
	// for it (and an operator's skip of it stays honest).
	ModeLoseAck
)

// String names the mode as the operator model's action lines do.
func (m ReceiverMode) String() string {
	switch m {
	case ModePass:
		return "heals"
	case ModeReject:
		return "rejects (400)"
	case ModeUnavailable:
		return "is unavailable (503)"
	case ModeLoseAck:
		return "loses acks (applies, then drops the answer)"
	}
	return fmt.Sprintf("mode %d", int(m))
}

// SetMode sets how the receiver answers the deliveries of correlation.
func (p *Proxy) SetMode(correlation string, m ReceiverMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == ModePass {
		delete(p.modes, correlation)
		return
	}
	p.modes[correlation] = m
}

// modeOf returns the mode of the delivery's correlation (ModePass when
// none is set), and for ModeLoseAck whether this delivery is the event's
// first, whose acknowledgement is dropped; a later one passes.
func (p *Proxy) modeOf(eventID string, body []byte) ReceiverMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.modes) == 0 {
		return ModePass
	}
	var env struct {
		CorrelationID string `json:"correlation_id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ModePass
	}
	m := p.modes[env.CorrelationID]
	if m == ModeLoseAck {
		if p.ackLost[eventID] {
			return ModePass
		}
		p.ackLost[eventID] = true
	}
	return m
}

// Disarm cancels RefuseNext for correlation.
func (p *Proxy) Disarm(correlation string) {
	p.mu.Lock()
	delete(p.refuse, correlation)
	p.mu.Unlock()
}

// firstSight records an event id and says whether this is the first
// request for it, and whether to refuse it (RefuseNext).
func (p *Proxy) firstSight(eventID string, body []byte) (refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := eventID != "" && !p.seen[eventID]
	p.seen[eventID] = true
	if !first || len(p.refuse) == 0 {
		return false
	}
	var env struct {
		CorrelationID string `json:"correlation_id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return false
	}
	ch, ok := p.refuse[env.CorrelationID]
	if !ok {
		return false
	}
	delete(p.refuse, env.CorrelationID)
	ch <- eventID
	return true
}

// Stats returns the counters so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{
		Requests: p.requests.Load(), Forwarded: p.forwarded.Load(), Latency: p.latency.Load(),
		LostAcks: p.lostAcks.Load(), Burst503: p.burst503.Load(), DownAnswers: p.downAnswers.Load(),
		UpstreamErrs: p.upstreamErrs.Load(), Parked: p.parked.Load(), Refused: p.refused.Load(),
	}
}

// AppliedAnswers returns, per event id, how many times the receiver answered
// "applied" (more than once would be a double application).
func (p *Proxy) AppliedAnswers() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.applied))
	for k, v := range p.applied {
		out[k] = v
	}
	return out
}

// Wait waits, up to timeout, until no request is being held or forwarded,
// and reports whether that happened.
func (p *Proxy) Wait(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

type fault int

const (
	faultNone fault = iota
	faultLatency
	faultLostAck
)

func (p *Proxy) pick() fault {
	if !p.faultsOn.Load() {
		return faultNone
	}
	p.mu.Lock()
	r := p.rng.Float64()
	p.mu.Unlock()
	switch {
	case r < p.faults.Latency:
		return faultLatency
	case r < p.faults.Latency+p.faults.LostAck:
		return faultLostAck
	}
	return faultNone
}

// ServeHTTP routes one delivery through the fault schedule.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	p.requests.Add(1)
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	isDown := strings.HasPrefix(r.URL.Path, "/down/")
	if isDown && p.down.Load() {
		if p.downAnswers.Add(1)%2 == 0 {
			reset(w)
			return
		}
		http.Error(w, "endpoint down (chaos)", http.StatusServiceUnavailable)
		return
	}
	if !isDown && p.burst.Load() && p.faultsOn.Load() {
		p.burst503.Add(1)
		if p.burstRetryAf.Load() {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "5xx burst (chaos)", http.StatusServiceUnavailable)
		return
	}
	if !isDown && p.firstSight(r.Header.Get("webhook-id"), body) {
		p.refused.Add(1)
		http.Error(w, "refused for a double click (chaos)", http.StatusUnprocessableEntity)
		return
	}
	f := faultNone
	if !isDown {
		switch p.modeOf(r.Header.Get("webhook-id"), body) {
		case ModeReject:
			p.refused.Add(1)
			http.Error(w, "rejected (operator model)", http.StatusBadRequest)
			return
		case ModeUnavailable:
			p.burst503.Add(1)
			http.Error(w, "unavailable (operator model)", http.StatusServiceUnavailable)
			return
		case ModeLoseAck:
			f = faultLostAck
		default:
			f = p.pick()
		}
	}
	switch f {
	case faultLatency:
		p.latency.Add(1)
		// Hold past the sender's timeout; the sender gives up and will
		// retry. Then deliver this copy anyway, as a slow network would.
		time.Sleep(p.holdFor)
		status, respBody, hdr, err := p.forward(context.Background(), r, body)
		if err != nil {
			return
		}
		writeResp(w, status, hdr, respBody) // usually to a closed connection
	case faultLostAck:
		if _, _, _, err := p.forward(r.Context(), r, body); err != nil {
			http.Error(w, "upstream unreachable", http.StatusBadGateway)
			return
		}
		p.lostAcks.Add(1)
		reset(w)
	default:
		status, respBody, hdr, err := p.forward(r.Context(), r, body)
		if err != nil {
			http.Error(w, "upstream unreachable", http.StatusBadGateway)
			return
		}
		writeResp(w, status, hdr, respBody)
	}
}

// forward posts the request to the receiver and records its verdict.
func (p *Proxy) forward(ctx context.Context, r *http.Request, body []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, p.upstream, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "content-type" || strings.HasPrefix(lk, "webhook-") || lk == "user-agent" {
			req.Header[k] = vs
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		p.upstreamErrs.Add(1)
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	p.forwarded.Add(1)
	switch resp.StatusCode {
	case http.StatusOK:
		var v struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(rb, &v) == nil && v.Status == "applied" {
			p.mu.Lock()
			p.applied[r.Header.Get("webhook-id")]++
			p.mu.Unlock()
		}
	case http.StatusAccepted:
		p.parked.Add(1)
	}
	return resp.StatusCode, rb, resp.Header, nil
}

func writeResp(w http.ResponseWriter, status int, hdr http.Header, body []byte) {
	if ct := hdr.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if ra := hdr.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// reset closes the client's connection with a TCP RST and no answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("chaos proxy: connection cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
