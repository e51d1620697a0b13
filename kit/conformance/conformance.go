// Package conformance checks any webhook receiver against hookflow's wire
// contract. Run fires the hard cases at a receiver URL (duplicates, races,
// gaps, sparse sequences chained by previous_sequence, skipped sequences,
// two endpoints' lanes of one correlation, replays, forged and stale
// signatures, secret rotation, a lost acknowledgement) and reports, per case, whether the receiver answered as
// the contract requires. It sees only HTTP answers, so it checks what a
// sender can observe: the status codes that decide retry, park or
// dead-letter.
package conformance

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hookflow/hookflow/kit/webhook"
)

// Config says which receiver to check and how to reach it.
type Config struct {
	// URL is the receiver's webhook endpoint, e.g. http://localhost:8090/webhook.
	URL string
	// Secrets are the endpoint's signing secrets; the first is the current
	// one and signs every delivery. Required.
	Secrets []string
	// HTTPClient sends the deliveries. Nil means a client with a 10 s
	// timeout that does not follow redirects (as the contract says).
	HTTPClient *http.Client
	// CorrelationPrefix starts the correlation IDs of the run; each case
	// adds a random run suffix and its name, so runs never collide. Empty
	// means "conformance".
	CorrelationPrefix string
	// Data is the data object of every event. Nil means {"amount":1}, what
	// the reference receiver expects.
	Data json.RawMessage
}

// Result is the outcome of one case.
type Result struct {
	Name   string
	Passed bool
	Detail string
}

// Report lists the results of a run in the order the cases ran.
type Report struct {
	Results []Result
}

// OK reports whether every case passed.
func (r Report) OK() bool {
	for _, res := range r.Results {
		if !res.Passed {
			return false
		}
	}
	return len(r.Results) > 0
}

// Print writes the report as an aligned table followed by a summary line.
func (r Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tDETAIL")
	passed := 0
	for _, res := range r.Results {
		verdict := "FAIL"
		if res.Passed {
			verdict = "PASS"
			passed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Name, verdict, res.Detail)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	if _, err := fmt.Fprintf(w, "%d/%d cases passed\n", passed, len(r.Results)); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	return nil
}

// Run checks the receiver at cfg.URL, one case after the other, and returns
// the report. A case that fails is a result, not an error: Run returns an
// error only for an unusable Config or when ctx ends (then with the results
// gathered so far).
func Run(ctx context.Context, cfg Config) (Report, error) {
	r, err := newRunner(cfg)
	if err != nil {
		return Report{}, err
	}
	cases := []struct {
		name string
		run  func(ctx context.Context, correlationID string) (bool, string)
	}{
		{"exact_duplicate", r.exactDuplicate},
		{"concurrent_duplicates", r.concurrentDuplicates},
		{"gap_then_fill", r.gapThenFill},
		{"sparse_sequences", r.sparseSequences},
		{"previous_gap_then_fill", r.previousGapThenFill},
		{"sparse_duplicate", r.sparseDuplicate},
		{"skipped_after_previous", r.skippedAfterPrevious},
		{"skipped_but_applied", r.skippedButApplied},
		{"two_endpoints_apart", r.twoEndpointsApart},
		{"replayed_old_id", r.replayedOldID},
		{"tampered_body", r.tamperedBody},
		{"expired_timestamp", r.expiredTimestamp},
		{"wrong_secret", r.wrongSecret},
		{"rotated_secrets", r.rotatedSecrets},
		{"lost_ack_then_retry", r.lostAckThenRetry},
	}
	var report Report
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return report, err
		}
		correlationID := fmt.Sprintf("%s-%s-%s", r.prefix, r.runID, strings.ReplaceAll(c.name, "_", "-"))
		passed, detail := c.run(ctx, correlationID)
		report.Results = append(report.Results, Result{Name: c.name, Passed: passed, Detail: detail})
	}
	return report, nil
}

type runner struct {
	target  *url.URL
	secret  string
	secrets []string
	client  *http.Client
	prefix  string
	runID   string
	data    json.RawMessage
	// endpoints are the endpoint_ids of the run's envelopes: every case
	// sends as the first, two_endpoints_apart as both. They are made up per
	// run, like the correlation IDs.
	endpoints [2]string
}

func newRunner(cfg Config) (*runner, error) {
	target, err := url.Parse(cfg.URL)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("conformance config: url %q must be an absolute http(s) URL", cfg.URL)
	}
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("conformance config: at least one secret is required")
	}
	for i, s := range cfg.Secrets {
		if _, err := webhook.DecodeSecret(s); err != nil {
			return nil, fmt.Errorf("conformance config: secret %d: %w", i, err)
		}
	}
	prefix := cmp.Or(cfg.CorrelationPrefix, "conformance")
	badPrefix := len(prefix) > 200
	for _, c := range prefix {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '-') {
			badPrefix = true
		}
	}
	if badPrefix {
		return nil, fmt.Errorf("conformance config: correlation prefix %q must be at most 200 characters of [A-Za-z0-9_:-]", prefix)
	}
	data := cfg.Data
	if data == nil {
		data = json.RawMessage(`{"amount":1}`)
	}
	if !json.Valid(data) {
		return nil, errors.New("conformance config: data is not valid JSON")
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate run id: %w", err)
	}
	return &runner{
		target:  target,
		secret:  cfg.Secrets[0],
		secrets: cfg.Secrets,
		client:  client,
		prefix:  prefix,
		runID:   hex.EncodeToString(b),
		data:    data,
		endpoints: [2]string{
			"ep_conformance_" + hex.EncodeToString(b) + "_a",
			"ep_conformance_" + hex.EncodeToString(b) + "_b",
		},
	}, nil
}

// delivery is one signed HTTP attempt.
type delivery struct {
	id        string
	body      []byte
	timestamp int64
	signature string
}

// answer is what the receiver replied.
type answer struct {
	code int
	body string
}

func (a answer) String() string {
	s := strconv.Itoa(a.code)
	if b := strings.TrimSpace(a.body); b != "" {
		if len(b) > 120 {
			b = b[:120] + "…"
		}
		s += " " + b
	}
	return s
}

// delivered reports a 2xx other than 202: applied or already processed.
func (a answer) delivered() bool {
	return a.code >= 200 && a.code < 300 && a.code != http.StatusAccepted
}

// envelope returns the event ID and body of event seq of correlationID, in a
// correlation whose every sequence goes to this endpoint (previous_sequence
// seq-1).
func (r *runner) envelope(correlationID string, seq int64, data json.RawMessage) (string, []byte) {
	return r.linked(correlationID, link{seq: seq, previous: seq - 1}, data)
}

// link is an event's place in the chain an endpoint sees: its sequence, the
// one before it sent to this endpoint, and the ones meant for it in between
// that an operator skipped. endpoint is the index of the run's endpoint it
// is sent to (0: the first).
type link struct {
	seq, previous int64
	skipped       []int64
	endpoint      int
}

func (l link) String() string {
	s := fmt.Sprintf("%d (previous %d", l.seq, l.previous)
	if l.endpoint > 0 {
		s = fmt.Sprintf("%d at the second endpoint (previous %d", l.seq, l.previous)
	}
	if len(l.skipped) > 0 {
		s += fmt.Sprintf(", skipped %v", l.skipped)
	}
	return s + ")"
}

// linked returns the event ID and body of the event at l of correlationID.
// The ID depends on the sequence only: one sequence at two endpoints is one
// event fanned out.
func (r *runner) linked(correlationID string, l link, data json.RawMessage) (string, []byte) {
	id := fmt.Sprintf("%s_%d", correlationID, l.seq)
	env := map[string]any{
		"id":                id,
		"type":              "conformance.check",
		"timestamp":         time.Now().UTC().Format(time.RFC3339),
		"endpoint_id":       r.endpoints[l.endpoint],
		"correlation_id":    correlationID,
		"sequence":          l.seq,
		"previous_sequence": l.previous,
		"data":              data,
	}
	if len(l.skipped) > 0 {
		env["skipped_sequences"] = l.skipped
	}
	body, _ := json.Marshal(env)
	return id, body
}

// signed returns a delivery of body as id, signed now with the current
// secret.
func (r *runner) signed(id string, body []byte) delivery {
	return r.signedWith([]string{r.secret}, id, body, time.Now())
}

func (r *runner) signedWith(secrets []string, id string, body []byte, at time.Time) delivery {
	ts := at.Unix()
	// The secrets were validated in newRunner or generated here.
	sig, _ := webhook.Sign(secrets, id, ts, body)
	return delivery{id: id, body: body, timestamp: ts, signature: sig}
}

func (r *runner) request(ctx context.Context, d delivery) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.target.String(), strings.NewReader(string(d.body)))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookflow-conformance")
	req.Header.Set(webhook.HeaderID, d.id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(d.timestamp, 10))
	req.Header.Set(webhook.HeaderSignature, d.signature)
	return req, nil
}

func (r *runner) send(ctx context.Context, d delivery) (answer, error) {
	req, err := r.request(ctx, d)
	if err != nil {
		return answer{}, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("post %s: %w", d.id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return answer{}, fmt.Errorf("read answer to %s: %w", d.id, err)
	}
	return answer{code: resp.StatusCode, body: string(b)}, nil
}

// expectDelivered sends d and checks the answer is a 2xx other than 202.
func (r *runner) expectDelivered(ctx context.Context, what string, d delivery) (answer, string, bool) {
	a, err := r.send(ctx, d)
	if err != nil {
		return a, fmt.Sprintf("%s: %v", what, err), false
	}
	if !a.delivered() {
		return a, fmt.Sprintf("%s: want 2xx other than 202, got %s", what, a), false
	}
	return a, "", true
}

func (r *runner) exactDuplicate(ctx context.Context, correlationID string) (bool, string) {
	id, body := r.envelope(correlationID, 1, r.data)
	first, msg, ok := r.expectDelivered(ctx, "first post", r.signed(id, body))
	if !ok {
		return false, msg
	}
	second, msg, ok := r.expectDelivered(ctx, "duplicate", r.signed(id, body))
	if !ok {
		return false, msg
	}
	return true, fmt.Sprintf("first %d, duplicate %s", first.code, second)
}

func (r *runner) concurrentDuplicates(ctx context.Context, correlationID string) (bool, string) {
	const senders = 10
	id, body := r.envelope(correlationID, 1, r.data)
	d := r.signed(id, body)
	start := make(chan struct{})
	answers := make([]answer, senders)
	errs := make([]error, senders)
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = r.send(ctx, d)
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for i := range senders {
		if errs[i] != nil {
			return false, fmt.Sprintf("copy %d: %v", i+1, errs[i])
		}
		counts[answers[i].code]++
	}
	for i := range senders {
		if !answers[i].delivered() {
			return false, fmt.Sprintf("%d simultaneous copies: want every answer 2xx other than 202, got %s (codes %v)", senders, answers[i], counts)
		}
	}
	return true, fmt.Sprintf("%d simultaneous copies, codes %v", senders, counts)
}

func (r *runner) gapThenFill(ctx context.Context, correlationID string) (bool, string) {
	id2, body2 := r.envelope(correlationID, 2, r.data)
	a, err := r.send(ctx, r.signed(id2, body2))
	if err != nil {
		return false, fmt.Sprintf("sequence 2 first: %v", err)
	}
	if a.code != http.StatusAccepted {
		return false, fmt.Sprintf("sequence 2 before 1: want 202 (parked), got %s", a)
	}
	id1, body1 := r.envelope(correlationID, 1, r.data)
	if _, msg, ok := r.expectDelivered(ctx, "sequence 1 after the gap", r.signed(id1, body1)); !ok {
		return false, msg
	}
	// The sender retries a 202 with the same event; by now it must count as
	// delivered.
	resent, msg, ok := r.expectDelivered(ctx, "re-sent sequence 2", r.signed(id2, body2))
	if !ok {
		return false, msg
	}
	return true, fmt.Sprintf("seq 2 → 202, seq 1 → 2xx, seq 2 again → %d", resent.code)
}

// expectChain delivers the events at links of correlationID in order and
// checks each is delivered.
func (r *runner) expectChain(ctx context.Context, correlationID string, links ...link) (string, bool) {
	for _, l := range links {
		id, body := r.linked(correlationID, l, r.data)
		if _, msg, ok := r.expectDelivered(ctx, "sequence "+l.String(), r.signed(id, body)); !ok {
			return msg, false
		}
	}
	return "", true
}

// sparseSequences: an endpoint gets only the sequences meant for it; each
// names the one before it, and applies on it without waiting for the rest.
func (r *runner) sparseSequences(ctx context.Context, correlationID string) (bool, string) {
	if msg, ok := r.expectChain(ctx, correlationID, link{seq: 1}, link{seq: 4, previous: 1}, link{seq: 9, previous: 4}); !ok {
		return false, msg
	}
	return true, "1, 4 (previous 1), 9 (previous 4) → each 2xx"
}

// previousGapThenFill: an event whose previous_sequence the receiver has not
// applied waits (202), whatever its own sequence, until that one is applied.
func (r *runner) previousGapThenFill(ctx context.Context, correlationID string) (bool, string) {
	if msg, ok := r.expectChain(ctx, correlationID, link{seq: 1}); !ok {
		return false, msg
	}
	held := link{seq: 9, previous: 4}
	id9, body9 := r.linked(correlationID, held, r.data)
	a, err := r.send(ctx, r.signed(id9, body9))
	if err != nil {
		return false, fmt.Sprintf("sequence %s: %v", held, err)
	}
	if a.code != http.StatusAccepted {
		return false, fmt.Sprintf("sequence %s after 1, before 4: want 202 (parked), got %s", held, a)
	}
	if msg, ok := r.expectChain(ctx, correlationID, link{seq: 4, previous: 1}); !ok {
		return false, msg
	}
	resent, msg, ok := r.expectDelivered(ctx, "re-sent sequence "+held.String(), r.signed(id9, body9))
	if !ok {
		return false, msg
	}
	return true, fmt.Sprintf("1 → 2xx, %s → 202, 4 (previous 1) → 2xx, 9 again → %d", held, resent.code)
}

// sparseDuplicate: a repeat of an event the cursor has moved past is a
// duplicate (2xx), not an event out of order.
func (r *runner) sparseDuplicate(ctx context.Context, correlationID string) (bool, string) {
	chain := []link{{seq: 1}, {seq: 4, previous: 1}, {seq: 9, previous: 4}}
	if msg, ok := r.expectChain(ctx, correlationID, chain...); !ok {
		return false, msg
	}
	for _, l := range chain[:2] {
		id, body := r.linked(correlationID, l, r.data)
		if _, msg, ok := r.expectDelivered(ctx, "repeat of sequence "+l.String()+" after 9", r.signed(id, body)); !ok {
			return false, msg
		}
	}
	return true, "1, 4, 9 applied; repeats of 4 and 1 → 2xx"
}

// skippedAfterPrevious: skipped_sequences names sequences meant for the
// endpoint that an operator skipped; the event applies on its
// previous_sequence without waiting for them.
func (r *runner) skippedAfterPrevious(ctx context.Context, correlationID string) (bool, string) {
	if msg, ok := r.expectChain(ctx, correlationID, link{seq: 1}, link{seq: 5, previous: 1, skipped: []int64{3}}); !ok {
		return false, msg
	}
	return true, "1, 5 (previous 1, skipped [3]) → each 2xx"
}

// skippedButApplied: the receiver applied 2, its answer was lost until the
// sender gave up, and an operator skipped 2. 3 names 1 as previous and 2 as
// skipped: the receiver, standing at 2, must apply it, or the correlation
// waits for ever.
func (r *runner) skippedButApplied(ctx context.Context, correlationID string) (bool, string) {
	if msg, ok := r.expectChain(ctx, correlationID, link{seq: 1}, link{seq: 2, previous: 1}, link{seq: 3, previous: 1, skipped: []int64{2}}); !ok {
		return false, msg
	}
	return true, "1, 2, then 3 (previous 1, skipped [2]) → each 2xx"
}

// twoEndpointsApart: two endpoints send to one receiver, each its own
// events of one correlation, each chained by its own previous_sequence: A
// gets 1, 3, 5 and 6, B gets 2, 4, 5 and 7, sequence 5 being one event
// fanned out to both. A receiver with one cursor per correlation refuses
// B's first event (previous 0 after A's 1); one that dedups by event ID
// alone takes B's 5 for a retry and then parks B's 7 for ever. The cursor
// and the dedup are per (endpoint_id, correlation_id).
func (r *runner) twoEndpointsApart(ctx context.Context, correlationID string) (bool, string) {
	const a, b = 0, 1
	if msg, ok := r.expectChain(ctx, correlationID,
		link{seq: 1, endpoint: a}, link{seq: 2, endpoint: b},
		link{seq: 3, previous: 1, endpoint: a}, link{seq: 4, previous: 2, endpoint: b},
		link{seq: 5, previous: 3, endpoint: a}, link{seq: 5, previous: 4, endpoint: b},
		link{seq: 6, previous: 5, endpoint: a}, link{seq: 7, previous: 5, endpoint: b},
	); !ok {
		return false, msg
	}
	return true, "A: 1, 3, 5, 6 and B: 2, 4, 5, 7 interleaved, 5 sent to both → each 2xx"
}

func (r *runner) replayedOldID(ctx context.Context, correlationID string) (bool, string) {
	var first delivery
	for seq := int64(1); seq <= 3; seq++ {
		id, body := r.envelope(correlationID, seq, r.data)
		d := r.signed(id, body)
		if seq == 1 {
			first = d
		}
		if _, msg, ok := r.expectDelivered(ctx, fmt.Sprintf("sequence %d", seq), d); !ok {
			return false, msg
		}
	}
	// A later attempt of an old event carries a fresh timestamp and signature.
	replay := r.signed(first.id, first.body)
	a, msg, ok := r.expectDelivered(ctx, "sequence 1 replayed after 3", replay)
	if !ok {
		return false, msg
	}
	return true, fmt.Sprintf("sequences 1-3 applied, replay of 1 → %s", a)
}

// rejectedThenAccepted sends a forged delivery, expects a 4xx accepted by
// want, then sends the genuine event and expects it delivered: a receiver
// that refuses everything does not pass.
func (r *runner) rejectedThenAccepted(ctx context.Context, forged, genuine delivery, want func(int) bool, wantText string) (bool, string) {
	a, err := r.send(ctx, forged)
	if err != nil {
		return false, fmt.Sprintf("forged delivery: %v", err)
	}
	if !want(a.code) {
		return false, fmt.Sprintf("forged delivery: want %s, got %s", wantText, a)
	}
	if _, msg, ok := r.expectDelivered(ctx, "genuine delivery afterwards", genuine); !ok {
		return false, msg
	}
	return true, fmt.Sprintf("forged → %d, genuine → 2xx", a.code)
}

func is4xx(code int) bool { return code >= 400 && code < 500 }

func (r *runner) tamperedBody(ctx context.Context, correlationID string) (bool, string) {
	id, body := r.envelope(correlationID, 1, r.data)
	forged := r.signed(id, body)
	_, forged.body = r.envelope(correlationID, 1, json.RawMessage(`{"amount":1000000,"tampered":true}`))
	return r.rejectedThenAccepted(ctx, forged, r.signed(id, body),
		func(c int) bool { return c == http.StatusUnauthorized || c == http.StatusBadRequest }, "401 or 400")
}

func (r *runner) expiredTimestamp(ctx context.Context, correlationID string) (bool, string) {
	id, body := r.envelope(correlationID, 1, r.data)
	stale := r.signedWith([]string{r.secret}, id, body, time.Now().Add(-10*time.Minute))
	return r.rejectedThenAccepted(ctx, stale, r.signed(id, body), is4xx, "4xx")
}

func (r *runner) wrongSecret(ctx context.Context, correlationID string) (bool, string) {
	other, err := webhook.NewSecret()
	if err != nil {
		return false, err.Error()
	}
	id, body := r.envelope(correlationID, 1, r.data)
	forged := r.signedWith([]string{other}, id, body, time.Now())
	return r.rejectedThenAccepted(ctx, forged, r.signed(id, body), is4xx, "4xx")
}

func (r *runner) rotatedSecrets(ctx context.Context, correlationID string) (bool, string) {
	unknown, err := webhook.NewSecret()
	if err != nil {
		return false, err.Error()
	}
	id, body := r.envelope(correlationID, 1, r.data)
	// The secret the receiver does not hold comes first, as a sender mid-
	// rotation would list its new secret.
	d := r.signedWith([]string{unknown, r.secret}, id, body, time.Now())
	a, msg, ok := r.expectDelivered(ctx, "two signatures, second valid", d)
	if !ok {
		return false, msg
	}
	return true, fmt.Sprintf("two signatures, one valid → %d", a.code)
}

func (r *runner) lostAckThenRetry(ctx context.Context, correlationID string) (bool, string) {
	id, body := r.envelope(correlationID, 1, r.data)
	if err := r.sendAndHangUp(ctx, r.signed(id, body)); err != nil {
		return false, fmt.Sprintf("first attempt: %v", err)
	}
	// Give the receiver time to finish the abandoned attempt, so the retry
	// most likely meets a committed event.
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		return false, ctx.Err().Error()
	}
	a, msg, ok := r.expectDelivered(ctx, "retry after the lost answer", r.signed(id, body))
	if !ok {
		return false, msg
	}
	return true, fmt.Sprintf("connection closed before the answer; retry → %s", a)
}

// sendAndHangUp writes the whole request on a fresh connection and closes it
// without reading the answer, as a sender that crashes or times out would.
func (r *runner) sendAndHangUp(ctx context.Context, d delivery) error {
	req, err := r.request(ctx, d)
	if err != nil {
		return err
	}
	host := r.target.Host
	if r.target.Port() == "" {
		port := "80"
		if r.target.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(r.target.Hostname(), port)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	if r.target.Scheme == "https" {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: &tls.Config{ServerName: r.target.Hostname()}}).DialContext(ctx, "tcp", host)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return fmt.Errorf("dial %s: %w", host, err)
	}
	defer conn.Close()
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("write request: %w", err)
	}
	return nil
}
