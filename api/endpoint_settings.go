package api

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/oapi-codegen/nullable"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// An endpoint's delivery settings, as POST and PATCH
// /v1/endpoints take them. Each is left out (no change on a PATCH), null
// (the server's: HOOKFLOW_RECOVERY_WINDOW, HOOKFLOW_DELIVERY_TIMEOUT, no
// custom headers, no rate limit) or a value. A value that cannot be used is
// a 422 naming the field, and nothing is changed.

// Bounds of the settings that the document cannot say: durations are
// text, and a header's name is checked here. The numbers' bounds
// (rate_limit, the circuit breaker's counts, max_in_flight) are the
// document's minimum and maximum, checked before a handler runs.
const (
	// MinRecoveryWindow and MaxRecoveryWindow bound recovery_window: the
	// design card's 5 minutes by default, anywhere up to 72 hours. Below a
	// second there is no room for a retry.
	MinRecoveryWindow = time.Second
	MaxRecoveryWindow = 72 * time.Hour
	// MinTimeout and MaxTimeout bound timeout, one attempt's HTTP timeout:
	// a receiver that takes longer than a minute to answer a webhook holds
	// a worker's slot for nothing, and one under a second is a mistake.
	MinTimeout = time.Second
	MaxTimeout = time.Minute
	// MaxHeaders, MaxHeaderName and MaxHeaderValue bound headers: a few
	// credentials and routing hints, not a request's worth.
	MaxHeaders     = 20
	MaxHeaderName  = 256
	MaxHeaderValue = 4096
	// MinCircuitWindow and MaxCircuitWindow bound circuit_window (default
	// store.DefaultCircuitWindow, a minute): under 10 s, the window holds
	// no more than a few retries of one delivery; past an hour, a failure
	// counts more attempts than a rate of now needs.
	MinCircuitWindow = 10 * time.Second
	MaxCircuitWindow = time.Hour
	// MinDisableAfter and MaxDisableAfter bound disable_after (default
	// store.DefaultDisableAfter, 5 days): under a minute, one slow
	// deploy of the receiver would disable it; past 90 days, an endpoint
	// nobody fixes is never told so.
	MinDisableAfter = time.Minute
	MaxDisableAfter = 90 * 24 * time.Hour
)

// RedactedHeaderValue stands in for every custom header value the API
// shows: they are secrets (an API key the receiver checks), shown no more
// than the signing secret is after its creation.
const RedactedHeaderValue = "********"

// ownedHeaders are the headers hookflow sets on every attempt, or that the
// HTTP client manages, or that are hop-by-hop (RFC 9110 7.6.1): a custom
// one of these names would forge the signature's headers, break the
// request's framing or the trace, or be dropped on the way.
var ownedHeaders = []string{
	"content-type", "content-length", "content-encoding", "host", "user-agent",
	"traceparent", "tracestate",
	"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect",
}

// headerOwned says whether a custom header may not have this name; name is
// a valid token.
func headerOwned(name string) bool {
	l := strings.ToLower(name)
	if strings.HasPrefix(l, "webhook-") || strings.HasPrefix(l, "proxy-") {
		return true
	}
	for _, o := range ownedHeaders {
		if l == o {
			return true
		}
	}
	return false
}

// tokenChar reports whether c is a tchar of RFC 9110 5.6.2.
func tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChar(s[i]) {
			return false
		}
	}
	return true
}

// validHeaderValue accepts visible ASCII with inner spaces and tabs: no
// CR, LF, NUL or other control character (which would split the request
// or be refused on the way), no leading or trailing whitespace (which
// HTTP strips), nothing outside ASCII (whose reading differs between
// receivers).
func validHeaderValue(v string) bool {
	if v == "" || v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t' {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\t' && (c < 0x20 || c > 0x7e) {
			return false
		}
	}
	return true
}

// settingsProblem is a 422 naming the field at fault. The detail never
// quotes a header's value: it is a secret.
func settingsProblem(field, detail string) *Problem {
	p := problem(http.StatusUnprocessableEntity, "invalid-endpoint-settings", "Invalid endpoint settings", detail)
	p.Field = field
	return p
}

// requestSettings are the settings a create or a PATCH sends (the
// document's EndpointCreate and EndpointUpdate have the same), each left
// out, null or a value.
type requestSettings struct {
	Headers                 nullable.Nullable[map[string]string]
	RecoveryWindow, Timeout nullable.Nullable[string]
	RateLimit               nullable.Nullable[float64]
	// The circuit breaker's.
	CircuitFailureThreshold, CircuitFailureRate, CircuitMinAttempts nullable.Nullable[int64]
	AutoReplay                                                      nullable.Nullable[bool]
	DisableAfter, CircuitWindow                                     nullable.Nullable[string]
	// The cap on attempts in flight.
	MaxInFlight nullable.Nullable[int64]
}

func createSettings(r wire.EndpointCreate) requestSettings {
	return requestSettings{Headers: r.Headers, RecoveryWindow: r.RecoveryWindow, Timeout: r.Timeout, RateLimit: r.RateLimit,
		CircuitFailureThreshold: r.CircuitFailureThreshold, CircuitFailureRate: r.CircuitFailureRate, CircuitMinAttempts: r.CircuitMinAttempts,
		AutoReplay: r.AutoReplay, DisableAfter: r.DisableAfter, CircuitWindow: r.CircuitWindow, MaxInFlight: r.MaxInFlight}
}

func updateSettings(r wire.EndpointUpdate) requestSettings {
	return requestSettings{Headers: r.Headers, RecoveryWindow: r.RecoveryWindow, Timeout: r.Timeout, RateLimit: r.RateLimit,
		CircuitFailureThreshold: r.CircuitFailureThreshold, CircuitFailureRate: r.CircuitFailureRate, CircuitMinAttempts: r.CircuitMinAttempts,
		AutoReplay: r.AutoReplay, DisableAfter: r.DisableAfter, CircuitWindow: r.CircuitWindow, MaxInFlight: r.MaxInFlight}
}

// orNil is a value sent, or nil when it was left out or null (whose
// meaning, the server's default, the store gives a setting of 0).
func orNil[T any](v nullable.Nullable[T]) *T {
	if !v.IsSpecified() || v.IsNull() {
		return nil
	}
	x := v.MustGet()
	return &x
}

// change reads and checks the settings sent, as a change of those sent; its
// error is a 422 naming the field at fault. The document has checked the
// kinds and the numbers' bounds; what stays here is what it cannot say: a
// duration's text and bounds, and the headers' names and values.
func (r requestSettings) change() (store.EndpointChange, error) {
	var ch store.EndpointChange
	if r.Headers.IsSpecified() {
		h, err := parseHeaders(orNil(r.Headers))
		if err != nil {
			return ch, err
		}
		ch.Headers = &h
	}
	for _, d := range []struct {
		field  string
		sent   nullable.Nullable[string]
		lo, hi time.Duration
		dst    **time.Duration
	}{
		{"recovery_window", r.RecoveryWindow, MinRecoveryWindow, MaxRecoveryWindow, &ch.RecoveryWindow},
		{"timeout", r.Timeout, MinTimeout, MaxTimeout, &ch.Timeout},
		{"disable_after", r.DisableAfter, MinDisableAfter, MaxDisableAfter, &ch.DisableAfter},
		{"circuit_window", r.CircuitWindow, MinCircuitWindow, MaxCircuitWindow, &ch.CircuitWindow},
	} {
		if !d.sent.IsSpecified() {
			continue
		}
		v, err := parseDuration(d.field, orNil(d.sent), d.lo, d.hi)
		if err != nil {
			return ch, err
		}
		*d.dst = &v
	}
	if r.RateLimit.IsSpecified() {
		v := deref(orNil(r.RateLimit)) // 0: unlimited
		ch.RateLimit = &v
	}
	for _, w := range []struct {
		sent nullable.Nullable[int64]
		dst  **int
	}{
		{r.CircuitFailureThreshold, &ch.CircuitFailureThreshold}, {r.CircuitFailureRate, &ch.CircuitFailureRate},
		{r.CircuitMinAttempts, &ch.CircuitMinAttempts}, {r.MaxInFlight, &ch.MaxInFlight},
	} {
		if w.sent.IsSpecified() {
			v := int(deref(orNil(w.sent))) // 0: the default
			*w.dst = &v
		}
	}
	if r.AutoReplay.IsSpecified() {
		v := deref(orNil(r.AutoReplay)) // null: false
		ch.AutoReplay = &v
	}
	return ch, nil
}

// parseHeaders reads headers: an object of header name → value, or null for
// none. Names are kept as sent (HTTP sends them canonical); two that differ
// only in case are one header and refused.
func parseHeaders(sent *map[string]string) (map[string]string, error) {
	if sent == nil || len(*sent) == 0 {
		return nil, nil
	}
	m := *sent
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names) // the first fault found is the same at every call
	seen := map[string]string{}
	for _, name := range names {
		if !validToken(name) || len(name) > MaxHeaderName {
			// The name is not a field name: it is quoted, escaped, in the
			// detail, and the field is the object.
			return nil, settingsProblem("headers", fmt.Sprintf("header name %.64q is not a valid HTTP field name (RFC 9110 token, at most %d characters)", name, MaxHeaderName))
		}
		field := "headers." + name
		if headerOwned(name) {
			return nil, settingsProblem(field, fmt.Sprintf("header %s is set by hookflow or by HTTP itself and cannot be a custom header (webhook-*, content-type, content-length, host, user-agent, traceparent, tracestate, and hop-by-hop headers)", name))
		}
		if other, ok := seen[strings.ToLower(name)]; ok {
			return nil, settingsProblem(field, fmt.Sprintf("header %s is header %s again: names are case-insensitive", name, other))
		}
		seen[strings.ToLower(name)] = name
		v := m[name]
		if len(v) > MaxHeaderValue {
			return nil, settingsProblem(field, fmt.Sprintf("the value of header %s is longer than %d characters", name, MaxHeaderValue))
		}
		if !validHeaderValue(v) {
			return nil, settingsProblem(field, fmt.Sprintf("the value of header %s must be non-empty visible ASCII, with no CR, LF, NUL or other control character and no leading or trailing space", name))
		}
	}
	return m, nil
}

// parseDuration reads a duration setting: a Go duration string ("30s",
// "5m", "72h"; as HOOKFLOW_RECOVERY_WINDOW takes it) within [lo, hi] in
// whole milliseconds, or null (0: the server's).
func parseDuration(field string, sent *string, lo, hi time.Duration) (time.Duration, error) {
	if sent == nil {
		return 0, nil
	}
	bounds := fmt.Sprintf("%s must be a duration string from %s to %s, like \"30s\" or \"5m\", or null for the server's", field, FormatDuration(lo), FormatDuration(hi))
	d, err := time.ParseDuration(*sent)
	if err != nil || d < lo || d > hi {
		return 0, settingsProblem(field, bounds)
	}
	if d%time.Millisecond != 0 {
		return 0, settingsProblem(field, field+" must be whole milliseconds")
	}
	return d, nil
}

// FormatDuration writes d as a Go duration without its zero units
// ("5m", not "5m0s").
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// viewSettings shows an endpoint's settings in v: the header names with
// their values redacted, and the settings that are set (one left out is
// the server's). CircuitFailureThreshold, DisableAfter and the failure
// rate's settings are left out when they are the defaults; AutoReplay is
// always shown, and MaxInFlight too, as the cap in force (the default when
// none is set): a slow receiver's operator looks for it.
func viewSettings(v *wire.Endpoint, st store.Settings) {
	if len(st.Headers) > 0 {
		v.Headers = make(map[string]string, len(st.Headers))
		for name := range st.Headers {
			v.Headers[name] = RedactedHeaderValue
		}
	}
	if st.RecoveryWindow > 0 {
		v.RecoveryWindow = FormatDuration(st.RecoveryWindow)
	}
	if st.Timeout > 0 {
		v.Timeout = FormatDuration(st.Timeout)
	}
	v.RateLimit = st.RateLimit
	v.CircuitFailureThreshold, v.AutoReplay = int64(st.CircuitFailureThreshold), st.AutoReplay
	if st.DisableAfter > 0 {
		v.DisableAfter = FormatDuration(st.DisableAfter)
	}
	v.CircuitFailureRate, v.CircuitMinAttempts = int64(st.CircuitFailureRate), int64(st.CircuitMinAttempts)
	v.MaxInFlight = int64(st.InFlightCap())
	if st.CircuitWindow > 0 {
		v.CircuitWindow = FormatDuration(st.CircuitWindow)
	}
}
