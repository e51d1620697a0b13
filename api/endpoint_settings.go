package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// An endpoint's delivery settings (issue 24), as POST and PATCH
// /v1/endpoints take them. Each is left out (no change on a PATCH), null
// (the server's: HOOKFLOW_RECOVERY_WINDOW, HOOKFLOW_DELIVERY_TIMEOUT, no
// custom headers, no rate limit) or a value. A value that cannot be used is
// a 422 naming the field, and nothing is changed.

// Bounds of the settings.
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
	// MinRateLimit and MaxRateLimit bound rate_limit (deliveries per
	// second). Below one delivery in about 17 minutes a limit means nothing
	// a receiver would ask for, and an interval of days would park a lane's
	// head behind one slot: disable the endpoint instead. The maximum is
	// far above what one endpoint is sent, and low enough that the interval
	// between slots is a fair number of microseconds.
	MinRateLimit = 0.001
	MaxRateLimit = 10000
	// MaxHeaders, MaxHeaderName and MaxHeaderValue bound headers: a few
	// credentials and routing hints, not a request's worth.
	MaxHeaders     = 20
	MaxHeaderName  = 256
	MaxHeaderValue = 4096
	// MaxCircuitFailureThreshold bounds circuit_failure_threshold, the
	// consecutive retryable failures that open the endpoint's circuit
	// (default store.DefaultCircuitFailureThreshold).
	MaxCircuitFailureThreshold = 1000
	// MaxCircuitFailureRate bounds circuit_failure_rate, the percentage of
	// retryable failures among the window's attempts that opens the
	// circuit (default store.DefaultCircuitFailureRate).
	MaxCircuitFailureRate = 100
	// MinCircuitWindow and MaxCircuitWindow bound circuit_window (default
	// store.DefaultCircuitWindow, a minute): under 10 s, the window holds
	// no more than a few retries of one delivery; past an hour, a failure
	// counts more attempts than a rate of now needs.
	MinCircuitWindow = 10 * time.Second
	MaxCircuitWindow = time.Hour
	// MaxCircuitMinAttempts bounds circuit_min_attempts, how many attempts
	// the window must hold before its rate counts (default
	// store.DefaultCircuitMinAttempts).
	MaxCircuitMinAttempts = 10000
	// MaxMaxInFlight bounds max_in_flight, the endpoint's attempts in
	// flight at once across all workers (default store.DefaultMaxInFlight).
	MaxMaxInFlight = 10000
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

// endpointSettings are the settings of a request, each raw so that left
// out, null and a value are told apart.
type endpointSettings struct {
	Headers        json.RawMessage `json:"headers"`
	RecoveryWindow json.RawMessage `json:"recovery_window"`
	Timeout        json.RawMessage `json:"timeout"`
	RateLimit      json.RawMessage `json:"rate_limit"`
	// The circuit breaker's (issue 24 items 2-4).
	CircuitFailureThreshold json.RawMessage `json:"circuit_failure_threshold"`
	AutoReplay              json.RawMessage `json:"auto_replay"`
	DisableAfter            json.RawMessage `json:"disable_after"`
	CircuitFailureRate      json.RawMessage `json:"circuit_failure_rate"`
	CircuitWindow           json.RawMessage `json:"circuit_window"`
	CircuitMinAttempts      json.RawMessage `json:"circuit_min_attempts"`
	// The cap on attempts in flight (issue 32 item 2).
	MaxInFlight json.RawMessage `json:"max_in_flight"`
}

// any says whether the request sends any setting.
func (r endpointSettings) any() bool {
	return r.Headers != nil || r.RecoveryWindow != nil || r.Timeout != nil || r.RateLimit != nil ||
		r.CircuitFailureThreshold != nil || r.AutoReplay != nil || r.DisableAfter != nil ||
		r.CircuitFailureRate != nil || r.CircuitWindow != nil || r.CircuitMinAttempts != nil || r.MaxInFlight != nil
}

// change reads and checks the settings sent, as a change of those sent; its
// error is a *Problem naming the field at fault.
func (r endpointSettings) change() (store.EndpointChange, error) {
	var ch store.EndpointChange
	if r.Headers != nil {
		h, err := parseHeaders(r.Headers)
		if err != nil {
			return ch, err
		}
		ch.Headers = &h
	}
	if r.RecoveryWindow != nil {
		d, err := parseDuration("recovery_window", r.RecoveryWindow, MinRecoveryWindow, MaxRecoveryWindow)
		if err != nil {
			return ch, err
		}
		ch.RecoveryWindow = &d
	}
	if r.Timeout != nil {
		d, err := parseDuration("timeout", r.Timeout, MinTimeout, MaxTimeout)
		if err != nil {
			return ch, err
		}
		ch.Timeout = &d
	}
	if r.RateLimit != nil {
		v, err := parseRateLimit(r.RateLimit)
		if err != nil {
			return ch, err
		}
		ch.RateLimit = &v
	}
	if r.CircuitFailureThreshold != nil {
		v, err := parseWhole("circuit_failure_threshold", "consecutive failures", r.CircuitFailureThreshold, MaxCircuitFailureThreshold, store.DefaultCircuitFailureThreshold)
		if err != nil {
			return ch, err
		}
		ch.CircuitFailureThreshold = &v
	}
	if r.AutoReplay != nil {
		var v bool
		if !isNull(r.AutoReplay) && json.Unmarshal(r.AutoReplay, &v) != nil {
			return ch, settingsProblem("auto_replay", "auto_replay must be true, false, or null for false")
		}
		ch.AutoReplay = &v
	}
	if r.DisableAfter != nil {
		d, err := parseDuration("disable_after", r.DisableAfter, MinDisableAfter, MaxDisableAfter)
		if err != nil {
			return ch, err
		}
		ch.DisableAfter = &d
	}
	if r.CircuitFailureRate != nil {
		v, err := parseWhole("circuit_failure_rate", "percent of the window's attempts", r.CircuitFailureRate, MaxCircuitFailureRate, store.DefaultCircuitFailureRate)
		if err != nil {
			return ch, err
		}
		ch.CircuitFailureRate = &v
	}
	if r.CircuitWindow != nil {
		d, err := parseDuration("circuit_window", r.CircuitWindow, MinCircuitWindow, MaxCircuitWindow)
		if err != nil {
			return ch, err
		}
		ch.CircuitWindow = &d
	}
	if r.CircuitMinAttempts != nil {
		v, err := parseWhole("circuit_min_attempts", "attempts", r.CircuitMinAttempts, MaxCircuitMinAttempts, store.DefaultCircuitMinAttempts)
		if err != nil {
			return ch, err
		}
		ch.CircuitMinAttempts = &v
	}
	if r.MaxInFlight != nil {
		v, err := parseWhole("max_in_flight", "attempts in flight at once", r.MaxInFlight, MaxMaxInFlight, store.DefaultMaxInFlight)
		if err != nil {
			return ch, err
		}
		ch.MaxInFlight = &v
	}
	return ch, nil
}

// parseWhole reads one of the whole-number settings (the circuit
// breaker's, max_in_flight), a
// count of unit: from 1 to hi, or null (0: the default, def).
func parseWhole(field, unit string, raw json.RawMessage, hi, def int) (int, error) {
	if isNull(raw) {
		return 0, nil
	}
	var v int
	if json.Unmarshal(raw, &v) != nil || v < 1 || v > hi {
		return 0, settingsProblem(field, fmt.Sprintf("%s must be a whole number of %s from 1 to %d, or null for the default (%d)", field, unit, hi, def))
	}
	return v, nil
}

// settings is change applied to an endpoint's server defaults, for a new
// endpoint.
func (r endpointSettings) settings() (store.Settings, error) {
	ch, err := r.change()
	return ch.Settings(), err
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// parseHeaders reads headers: an object of header name → value, or null for
// none. Names are kept as sent (HTTP sends them canonical); two that differ
// only in case are one header and refused.
func parseHeaders(raw json.RawMessage) (map[string]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, settingsProblem("headers", "headers must be an object of header name to string value, or null for none")
	}
	if len(m) == 0 {
		return nil, nil
	}
	if len(m) > MaxHeaders {
		return nil, settingsProblem("headers", fmt.Sprintf("at most %d custom headers", MaxHeaders))
	}
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
func parseDuration(field string, raw json.RawMessage, lo, hi time.Duration) (time.Duration, error) {
	if isNull(raw) {
		return 0, nil
	}
	bounds := fmt.Sprintf("%s must be a duration string from %s to %s, like \"30s\" or \"5m\", or null for the server's", field, FormatDuration(lo), FormatDuration(hi))
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, settingsProblem(field, bounds)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, settingsProblem(field, bounds)
	}
	if d%time.Millisecond != 0 {
		return 0, settingsProblem(field, field+" must be whole milliseconds")
	}
	return d, nil
}

// parseRateLimit reads rate_limit: deliveries per second, from
// MinRateLimit to MaxRateLimit (fractions allowed: 0.5 is one every 2 s),
// or null (0: unlimited).
func parseRateLimit(raw json.RawMessage) (float64, error) {
	if isNull(raw) {
		return 0, nil
	}
	var v float64
	if json.Unmarshal(raw, &v) != nil || !(v >= MinRateLimit) || v > MaxRateLimit {
		return 0, settingsProblem("rate_limit", fmt.Sprintf("rate_limit must be a number of deliveries per second from %g to %d, or null for no limit", MinRateLimit, MaxRateLimit))
	}
	return v, nil
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
