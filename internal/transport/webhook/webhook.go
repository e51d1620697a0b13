// Package webhook is the webhook transport: one signed HTTP POST of the
// envelope per attempt (Standard Webhooks headers), the endpoint's custom
// headers, the egress rules on what may be dialled, and the wire
// contract's reading of the receiver's answer (status, Retry-After). What
// it answers and records names the endpoint by its redacted URL only, and
// holds nothing of its header values (redact.go).
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/internal/transport"
	standard "github.com/hookflow/hookflow/kit/webhook"
)

// Type is the endpoint type this transport serves.
const Type = transport.DefaultType

// maxRecordedBody bounds how much of a receiver's answer is kept.
const maxRecordedBody = 2048

// Transport sends webhooks. Attempts of tenants granted the private-target
// allowlist go through one client, the others' through another
// (egress.Policy.ForTenant), so that a connection kept alive to an
// allowlisted target is never the other's.
type Transport struct {
	targets        egress.Policy
	http, confined *http.Client
}

var _ transport.Transport = (*Transport)(nil)

// New returns the webhook transport under the deployment's targets policy.
func New(targets egress.Policy) *Transport {
	return &Transport{targets: targets, http: targets.ForTenant(true).NewClient(), confined: targets.ForTenant(false).NewClient()}
}

// Validate checks the destination's URL against the targets policy as it
// applies to its tenant: http or https with a host and no credentials,
// and a private or plain-http target only where the policy allows it.
func (t *Transport) Validate(_ context.Context, d transport.Destination) error {
	return t.targets.ForTenant(d.PrivateTargets).CheckURL(d.URL)
}

// Send makes one signed POST of m to d and reads the answer per the wire
// contract: 2xx except 202 → delivered; 410 → gone; 429 or 503 with a
// usable Retry-After → retry after it; 3xx (redirects are not followed: a
// moved endpoint is a configuration error) and any other 4xx except 408
// and 429 → permanent; everything else, timeouts and connection errors
// included, → retry.
func (t *Transport) Send(ctx context.Context, d transport.Destination, m transport.Message) (transport.Result, error) {
	ts := m.At.Unix()
	sig, err := standard.Sign(d.Secrets, m.EventID, ts, m.Body)
	if err != nil {
		return transport.Result{}, fmt.Errorf("sign: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(m.Body))
	if err != nil {
		// Text only: the cause's message would carry the URL whole.
		return transport.Result{}, errors.New("build request: " + redactError(err, nil, d.URLPathPublic))
	}
	// The endpoint's custom headers first, so that hookflow's own headers
	// below win whatever the API let through. Their values are secrets:
	// nothing here logs them, puts them on the span (send records no
	// header) or keeps them in what it answers (redact.Values).
	for name, v := range d.Headers {
		req.Header.Set(name, v)
	}
	secrets := redact.NewValues(headerValues(d.Headers))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookflow")
	req.Header.Set(standard.HeaderID, m.EventID)
	req.Header.Set(standard.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(standard.HeaderSignature, sig)

	client := t.confined
	if d.PrivateTargets {
		client = t.http
	}
	resp, err := send(ctx, d, m, req, client)
	if err != nil {
		// The error names the endpoint by its redacted URL. It may quote
		// the receiver too (a certificate's names): its control characters
		// are escaped before anyone's terminal sees it. Go's HTTP client
		// quotes a receiver's bytes in some errors (a malformed header
		// line): the header values go as from an answer.
		msg := printable.String(secrets.Replace(redactError(err, req.URL, d.URLPathPublic)))
		return transport.Result{Outcome: transport.Retry, Detail: msg, Summary: msg, Outage: true}, nil
	}
	// A receiver's error page may quote the URL it was called at, and may
	// hold escape sequences meant for the terminal of whoever reads the
	// dead letter: both are taken out before it is stored. A receiver may
	// echo the request's headers too, in any encoding: the custom headers'
	// values are taken out as well, in every form (redact.Values). The
	// answer is cut to its recorded length first, so that what the cut
	// leaves of a value at the end is taken out too; the URL's
	// credentials are matched in a text read as far past the cut as the
	// URL is long, so that the cut does not split them.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, int64(maxRecordedBody+len(req.URL.String()))))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // drain so the connection is reused
	resp.Body.Close()
	c := resp.StatusCode
	res := transport.Result{Status: c, Summary: fmt.Sprintf("receiver answered %d", c), Outage: outageStatus(c)}
	res.Detail = res.Summary
	if len(answer) > 0 {
		res.Detail += ": " + printable.String(secrets.Cut(scrub(string(answer), req.URL, d.URLPathPublic), maxRecordedBody))
	}
	wait := retryAfter(resp.Header, time.Now())
	switch {
	case c >= 200 && c < 300 && c != http.StatusAccepted:
		res.Outcome, res.Detail, res.Summary = transport.Delivered, "", ""
	case c == http.StatusGone:
		res.Outcome, res.Summary = transport.Gone, "receiver answered 410 Gone"
	case (c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable) && wait > 0:
		res.Outcome, res.RetryAfter = transport.Retry, wait
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests,
		c >= 300 && c < 400:
		res.Outcome = transport.Permanent
	default:
		res.Outcome = transport.Retry
	}
	return res, nil
}

// outageStatus says whether a receiver's answer counts as a failure of the
// endpoint for its circuit breaker: 408, 429 and 5xx (as do timeouts and
// connection errors). Any other answer, a permanent rejection included,
// means the endpoint is up: a rejection (4xx) too, and a 202 (it parked
// the event).
func outageStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// maxRetryAfter caps the delay a receiver may ask for.
const maxRetryAfter = time.Hour

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or
// unusable. It is capped at maxRetryAfter, and a number of seconds too
// large for any integer is capped too, not taken as absent.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}
