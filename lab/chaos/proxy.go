package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
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
	// FlapAnswers are the requests the flapping endpoint got while down:
	// what its circuit breaker let through of its outages.
	FlapAnswers int64
	// SlowLane are the deliveries a slow lane held (ModeSlow).
	SlowLane int64
}

// Outage is one of the flapping endpoint's down periods; To is zero while
// it lasts.
type Outage struct {
	From, To time.Time
}

// Proxy stands between hookflow's workers and the receivers and injects
// faults. Endpoint i points at /ep/<i>/webhook, which the proxy forwards to
// receiver i's /webhook, subject to the per-request faults and 5xx bursts,
// unless endpoint i is the one down (SetDown), or the flapping one
// (SetFlapping) while it is down (SetFlapDown), which answer resets and
// 503s instead.
type Proxy struct {
	// upstreams are endpoint i's receiver's /webhook URL, "" while that
	// receiver has no incarnation listening (SetUpstream); upMu guards
	// them.
	upMu         sync.RWMutex
	upstreams    []string
	holdFor      time.Duration
	faults       ProxyFaults
	client       *http.Client
	down         atomic.Int64 // 1 + the index of the endpoint down, 0 for none
	flapping     atomic.Int64 // 1 + the index of the endpoint that flaps, 0 for none
	flapDown     atomic.Bool
	burst        atomic.Bool
	burstRetryAf atomic.Bool
	faultsOn     atomic.Bool

	mu      sync.Mutex
	rng     *rand.Rand
	applied map[Delivery]int // "applied" answers seen per delivery
	seen    map[Delivery]bool
	// refuse maps a correlation to the channel that gets the delivery
	// refused for it.
	refuse map[string]chan Delivery
	// modes are the receivers' failure modes per lane (the operator
	// model's), and ackLost the deliveries whose acknowledgement a LoseAck
	// mode has dropped once already.
	modes   map[Lane]ReceiverMode
	ackLost map[Delivery]bool
	// outages are the flapping endpoint's down periods, in time order.
	outages []Outage

	requests, forwarded, latency, lostAcks, burst503, downAnswers, upstreamErrs, parked, refused, flapAnswers, slowLane atomic.Int64

	inflight atomic.Int64

	// slow is endpoint-wide slowness (SetSlow): 1 + the index of the slow
	// endpoint (0 for none), and how long each of its requests is held at
	// least; slowHeld counts them, slowNow and slowMax its requests here at
	// once.
	slow                       atomic.Int64
	slowFor                    atomic.Int64
	slowHeld, slowNow, slowMax atomic.Int64
	// skippedSeen are the skipped_sequences the envelopes of each lane
	// carried (sorted, unique), for the checks of voided sequences.
	skippedSeen map[Lane][]int64
	// previous are the previous_sequence values the envelopes of each
	// delivery carried (each once), for the checks of filtered lanes.
	previous map[Delivery][]int64
	// tenants are the tenants of the endpoints, by path (SetTenants): the
	// proxy names events and correlations by Key, as the run does.
	tenants []string
}

// SetTenants gives the tenant of each endpoint, by index; before it
// serves. An endpoint it names none for is the default tenant's.
func (p *Proxy) SetTenants(tenants []string) { p.tenants = slices.Clone(tenants) }

// key names endpoint ep's tenant's event or correlation id as the run
// does (Key); "" stays "".
func (p *Proxy) key(ep int, id string) string {
	if id == "" {
		return ""
	}
	tenant := contract.DefaultTenant
	if ep >= 0 && ep < len(p.tenants) {
		tenant = p.tenants[ep]
	}
	return Key(tenant, id)
}

// Delivery names one (event, endpoint) delivery: the event by its Key, the
// endpoint by its index in the run (its path on the proxy).
type Delivery struct {
	EventID  string
	Endpoint int
}

// Lane names one (correlation, endpoint) lane: the correlation by its Key,
// the endpoint by its index.
type Lane struct {
	Correlation string
	Endpoint    int
}

// NewProxy returns a proxy forwarding endpoint i's deliveries to
// upstreams[i] ("" for one not known yet: SetUpstream). holdFor is how
// long a latency fault holds a request (past the sender's timeout).
func NewProxy(upstreams []string, seed uint64, holdFor time.Duration, faults ProxyFaults) *Proxy {
	p := &Proxy{
		upstreams: slices.Clone(upstreams), holdFor: holdFor, faults: faults,
		client:  &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		rng:     rand.New(rand.NewPCG(seed, 0x70727879)),
		applied: map[Delivery]int{}, seen: map[Delivery]bool{}, refuse: map[string]chan Delivery{},
		modes: map[Lane]ReceiverMode{}, ackLost: map[Delivery]bool{}, skippedSeen: map[Lane][]int64{}, previous: map[Delivery][]int64{},
	}
	p.faultsOn.Store(true)
	return p
}

// SetUpstream points endpoint ep at url, its receiver's current /webhook
// URL, or at none ("") while that receiver has no incarnation listening:
// the receivers listen on a port the kernel picks at each start, so a
// restarted one is found where it is now, and a request is never
// forwarded to a port its receiver no longer holds (which another
// process may have bound since), but answered 502 as an unreachable
// receiver is.
func (p *Proxy) SetUpstream(ep int, url string) {
	p.upMu.Lock()
	defer p.upMu.Unlock()
	p.upstreams[ep] = url
}

// upstream is endpoint ep's receiver's /webhook URL, or "".
func (p *Proxy) upstream(ep int) string {
	p.upMu.RLock()
	defer p.upMu.RUnlock()
	return p.upstreams[ep]
}

// errNoUpstream is a forward to a receiver that has no incarnation
// listening.
var errNoUpstream = errors.New("the receiver is not listening")

// SetDown puts endpoint ep down (resets and 503s), or none when ep < 0.
func (p *Proxy) SetDown(ep int) { p.down.Store(int64(max(ep, -1) + 1)) }

// SetSlow makes endpoint ep's receiver slow for every lane: each request
// to it that would be forwarded is held between d and 5d/4 first (the
// sender may give up meanwhile; the request is forwarded all the same, as
// by a slow network). ep < 0 ends it. The operator model's per-lane modes
// are apart from it.
func (p *Proxy) SetSlow(ep int, d time.Duration) {
	p.slowFor.Store(int64(d))
	p.slow.Store(int64(max(ep, -1) + 1))
}

// SlowStats returns how many requests the slow endpoint's were held, and
// the most it had here at once.
func (p *Proxy) SlowStats() (held, most int64) { return p.slowHeld.Load(), p.slowMax.Load() }

// holdSlow holds a request to the slow endpoint.
func (p *Proxy) holdSlow(ep int) {
	if int64(ep+1) != p.slow.Load() {
		return
	}
	now := p.slowNow.Add(1)
	defer p.slowNow.Add(-1)
	for most := p.slowMax.Load(); now > most && !p.slowMax.CompareAndSwap(most, now); most = p.slowMax.Load() {
	}
	d := time.Duration(p.slowFor.Load())
	p.mu.Lock()
	d += time.Duration(p.rng.Int64N(int64(d/4) + 1))
	p.mu.Unlock()
	p.slowHeld.Add(1)
	time.Sleep(d)
}

// noteSkipped keeps the skipped_sequences of an envelope, per lane.
func (p *Proxy) noteSkipped(ep int, body []byte) {
	if !bytes.Contains(body, []byte(`"skipped_sequences"`)) {
		return
	}
	var env struct {
		CorrelationID    string  `json:"correlation_id"`
		SkippedSequences []int64 `json:"skipped_sequences"`
	}
	if json.Unmarshal(body, &env) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := Lane{p.key(ep, env.CorrelationID), ep}
	for _, q := range env.SkippedSequences {
		if i, found := slices.BinarySearch(p.skippedSeen[l], q); !found {
			p.skippedSeen[l] = slices.Insert(p.skippedSeen[l], i, q)
		}
	}
}

// notePrevious keeps the previous_sequence of delivery d's envelope.
func (p *Proxy) notePrevious(d Delivery, body []byte) {
	var env struct {
		PreviousSequence *int64 `json:"previous_sequence"`
	}
	if json.Unmarshal(body, &env) != nil || env.PreviousSequence == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.previous[d], *env.PreviousSequence) {
		p.previous[d] = append(p.previous[d], *env.PreviousSequence)
	}
}

// PreviousSeen returns the previous_sequence values each delivery's
// envelopes carried.
func (p *Proxy) PreviousSeen() map[Delivery][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Delivery][]int64, len(p.previous))
	for d, s := range p.previous {
		out[d] = slices.Clone(s)
	}
	return out
}

// SkippedSeen returns the skipped_sequences the envelopes of each lane
// carried.
func (p *Proxy) SkippedSeen() map[Lane][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Lane][]int64, len(p.skippedSeen))
	for l, s := range p.skippedSeen {
		out[l] = slices.Clone(s)
	}
	return out
}

// SeenOf returns the events of the deliveries to endpoint ep that the
// proxy has had a request for so far (refused or forwarded).
func (p *Proxy) SeenOf(ep int) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for d := range p.seen {
		if d.Endpoint == ep {
			out[d.EventID] = true
		}
	}
	return out
}

// SetFlapping names the endpoint that flaps (SetFlapDown), or none when
// ep < 0.
func (p *Proxy) SetFlapping(ep int) { p.flapping.Store(int64(max(ep, -1) + 1)) }

// SetFlapDown puts the flapping endpoint down (resets and 503s, as the down
// endpoint's) or up again, and keeps the times of its outages.
func (p *Proxy) SetFlapDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flapDown.Load() == down {
		return
	}
	if now := time.Now(); down {
		p.outages = append(p.outages, Outage{From: now})
	} else {
		p.outages[len(p.outages)-1].To = now
	}
	p.flapDown.Store(down)
}

// Outages returns the flapping endpoint's down periods so far.
func (p *Proxy) Outages() []Outage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.outages)
}

// Path is where endpoint i points on the proxy.
func Path(i int) string { return fmt.Sprintf("/ep/%d/webhook", i) }

// endpointOf returns the index of the endpoint a request's path names, or
// -1.
func (p *Proxy) endpointOf(path string) int {
	rest, ok := strings.CutPrefix(path, "/ep/")
	if !ok {
		return -1
	}
	n, ok := strings.CutSuffix(rest, "/webhook")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 || i >= len(p.upstreams) {
		return -1
	}
	return i
}

// SetBurst starts or ends a 5xx burst on the healthy endpoints; withRetryAfter
// adds "Retry-After: 1" to the 503s.
func (p *Proxy) SetBurst(on, withRetryAfter bool) {
	p.burstRetryAf.Store(withRetryAfter)
	p.burst.Store(on)
}

// SetFaults turns the per-request faults and bursts on or off (off in a calm run).
func (p *Proxy) SetFaults(on bool) { p.faultsOn.Store(on) }

// RefuseNext makes the proxy refuse (422, a permanent rejection: the
// delivery dead-letters at once) the next delivery of correlation, on an
// endpoint that is not down, that it has never seen before, and returns the
// channel that gets that delivery. Only a first sight is refused: a
// delivery the receiver may have applied already (a held or unacknowledged
// copy) is never dead-lettered for a double click, so a skip of it stays
// honest. Disarm ends a refusal that has not fired.
func (p *Proxy) RefuseNext(correlation string) <-chan Delivery {
	ch := make(chan Delivery, 1)
	p.mu.Lock()
	p.refuse[correlation] = ch
	p.mu.Unlock()
	return ch
}

// ReceiverMode is how a receiver answers the deliveries of one lane, as the
// operator model sets it (SetMode).
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
	// later deliveries of that event pass, so the lost answer alone never
	// dead-letters it. Its retry can still be held by the endpoint's open
	// circuit (another lane's receiver unavailable) until its window is
	// spent: the closing operator, who knows the receiver has it
	// (AckLost), replays that dead letter and never skips it.
	ModeLoseAck
	// ModeSlow holds each delivery for half the hold of a latency fault
	// (within the sender's HTTP timeout), then forwards it: a receiver that
	// answers 200, slowly, holding a worker slot for each attempt.
	ModeSlow
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
	case ModeSlow:
		return "is slow (answers within the timeout, late)"
	}
	return fmt.Sprintf("mode %d", int(m))
}

// SetMode sets how endpoint ep's receiver answers the deliveries of
// correlation.
func (p *Proxy) SetMode(correlation string, ep int, m ReceiverMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == ModePass {
		delete(p.modes, Lane{correlation, ep})
		return
	}
	p.modes[Lane{correlation, ep}] = m
}

// modeOf returns the mode of the delivery's lane (ModePass when none is
// set), and for ModeLoseAck whether this is the delivery's first request,
// whose acknowledgement is dropped; a later one passes.
func (p *Proxy) modeOf(d Delivery, body []byte) ReceiverMode {
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
	m := p.modes[Lane{p.key(d.Endpoint, env.CorrelationID), d.Endpoint}]
	if m == ModeLoseAck {
		if p.ackLost[d] {
			return ModePass
		}
		p.ackLost[d] = true
	}
	return m
}

// AckLost reports whether the proxy dropped the answer to a delivery the
// receiver applied (ModeLoseAck).
func (p *Proxy) AckLost(d Delivery) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ackLost[d]
}

// Disarm cancels RefuseNext for correlation.
func (p *Proxy) Disarm(correlation string) {
	p.mu.Lock()
	delete(p.refuse, correlation)
	p.mu.Unlock()
}

// firstSight records a delivery and says whether this is the first request
// for it, and whether to refuse it (RefuseNext).
func (p *Proxy) firstSight(d Delivery, body []byte) (refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := d.EventID != "" && !p.seen[d]
	p.seen[d] = true
	if !first || len(p.refuse) == 0 {
		return false
	}
	var env struct {
		CorrelationID string `json:"correlation_id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return false
	}
	corr := p.key(d.Endpoint, env.CorrelationID)
	ch, ok := p.refuse[corr]
	if !ok {
		return false
	}
	delete(p.refuse, corr)
	ch <- d
	return true
}

// Stats returns the counters so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{
		Requests: p.requests.Load(), Forwarded: p.forwarded.Load(), Latency: p.latency.Load(),
		LostAcks: p.lostAcks.Load(), Burst503: p.burst503.Load(), DownAnswers: p.downAnswers.Load(),
		UpstreamErrs: p.upstreamErrs.Load(), Parked: p.parked.Load(), Refused: p.refused.Load(),
		FlapAnswers: p.flapAnswers.Load(), SlowLane: p.slowLane.Load(),
	}
}

// AppliedAnswers returns, per delivery, how many times its receiver
// answered "applied" (more than once would be a double application).
func (p *Proxy) AppliedAnswers() map[Delivery]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Delivery]int, len(p.applied))
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
	ep := p.endpointOf(r.URL.Path)
	if ep < 0 {
		http.Error(w, "no such endpoint (chaos proxy)", http.StatusNotFound)
		return
	}
	d := Delivery{EventID: p.key(ep, r.Header.Get("webhook-id")), Endpoint: ep}
	if int64(ep+1) == p.down.Load() {
		answerDown(w, p.downAnswers.Add(1))
		return
	}
	if int64(ep+1) == p.flapping.Load() && p.flapDown.Load() {
		answerDown(w, p.flapAnswers.Add(1))
		return
	}
	if p.burst.Load() && p.faultsOn.Load() {
		p.burst503.Add(1)
		if p.burstRetryAf.Load() {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "5xx burst (chaos)", http.StatusServiceUnavailable)
		return
	}
	if p.firstSight(d, body) {
		p.refused.Add(1)
		http.Error(w, "refused for a double click (chaos)", http.StatusUnprocessableEntity)
		return
	}
	p.noteSkipped(ep, body)
	p.notePrevious(d, body)
	p.holdSlow(ep)
	var f fault
	switch p.modeOf(d, body) {
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
	case ModeSlow:
		p.slowLane.Add(1)
		time.Sleep(p.holdFor / 2)
	default:
		f = p.pick()
	}
	switch f {
	case faultLatency:
		p.latency.Add(1)
		// Hold past the sender's timeout; the sender gives up and will
		// retry. Then deliver this copy anyway, as a slow network would.
		time.Sleep(p.holdFor)
		status, respBody, hdr, err := p.forward(context.Background(), r, d, body)
		if err != nil {
			return
		}
		writeResp(w, status, hdr, respBody) // usually to a closed connection
	case faultLostAck:
		if _, _, _, err := p.forward(r.Context(), r, d, body); err != nil {
			http.Error(w, "upstream unreachable", http.StatusBadGateway)
			return
		}
		p.lostAcks.Add(1)
		reset(w)
	default:
		status, respBody, hdr, err := p.forward(r.Context(), r, d, body)
		if err != nil {
			http.Error(w, "upstream unreachable", http.StatusBadGateway)
			return
		}
		writeResp(w, status, hdr, respBody)
	}
}

// forward posts the request to the delivery's receiver and records its
// verdict.
func (p *Proxy) forward(ctx context.Context, r *http.Request, d Delivery, body []byte) (int, []byte, http.Header, error) {
	url := p.upstream(d.Endpoint)
	if url == "" {
		p.upstreamErrs.Add(1)
		return 0, nil, nil, errNoUpstream
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, bytes.NewReader(body))
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
			p.applied[d]++
			p.mu.Unlock()
		}
	case http.StatusAccepted:
		p.parked.Add(1)
	}
	return resp.StatusCode, rb, resp.Header, nil
}

// answerDown answers the nth request to an endpoint that is down: every
// other one is reset, as by a host whose receiver is gone, the others get
// a 503 without Retry-After, as from a receiver that fails.
func answerDown(w http.ResponseWriter, n int64) {
	if n%2 == 0 {
		reset(w)
		return
	}
	http.Error(w, "endpoint down (chaos)", http.StatusServiceUnavailable)
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
