package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/store"
)

// settingsJSON is an endpoint's settings as the API shows them.
type settingsJSON struct {
	ID             string            `json:"id"`
	Headers        map[string]string `json:"headers"`
	RecoveryWindow string            `json:"recovery_window"`
	Timeout        string            `json:"timeout"`
	RateLimit      float64           `json:"rate_limit"`
	// The circuit breaker's.
	CircuitFailureThreshold int    `json:"circuit_failure_threshold"`
	AutoReplay              bool   `json:"auto_replay"`
	DisableAfter            string `json:"disable_after"`
	CircuitFailureRate      int    `json:"circuit_failure_rate"`
	CircuitWindow           string `json:"circuit_window"`
	CircuitMinAttempts      int    `json:"circuit_min_attempts"`
	// The cap on attempts in flight, always shown.
	MaxInFlight int `json:"max_in_flight"`
}

func (b *bundle) settingsCall(t *testing.T, method, path, body string, status int) settingsJSON {
	t.Helper()
	var s settingsJSON
	require.NoError(t, json.Unmarshal([]byte(b.call(t, method, path, body, status)), &s))
	return s
}

// TestEndpointSettingsRefusedAndNothingChanged: every bad setting, on a
// POST and on a PATCH, is a 422 problem naming the field at fault, and
// changes nothing: no endpoint is created, and the patched one keeps every
// field, its valid ones in the same request included. No detail quotes a
// header's value.
func TestEndpointSettingsRefusedAndNothingChanged(t *testing.T) {
	t.Parallel()
	// A body large enough for a header value past its bound.
	b := setupWith(t, func(rc *api.RouterConfig) { rc.MaxBodyBytes = 1 << 16 })
	long := strings.Repeat("v", api.MaxHeaderValue+1)
	many := map[string]string{}
	for i := range api.MaxHeaders + 1 {
		many["x-h"+strings.Repeat("i", i+1)] = "v"
	}
	manyJSON, err := json.Marshal(many)
	require.NoError(t, err)
	cases := []struct {
		name, settings, field string
	}{
		{"webhook-signature", `"headers":{"webhook-signature":"v1,forged"}`, "headers.webhook-signature"},
		{"webhook-* in any case", `"headers":{"Webhook-Id":"x"}`, "headers.Webhook-Id"},
		{"content-type", `"headers":{"Content-Type":"text/plain"}`, "headers.Content-Type"},
		{"host", `"headers":{"host":"evil.example"}`, "headers.host"},
		{"traceparent", `"headers":{"traceparent":"00-x"}`, "headers.traceparent"},
		{"tracestate", `"headers":{"tracestate":"x=y"}`, "headers.tracestate"},
		{"content-length", `"headers":{"content-length":"1"}`, "headers.content-length"},
		{"connection", `"headers":{"Connection":"close"}`, "headers.Connection"},
		{"keep-alive", `"headers":{"keep-alive":"1"}`, "headers.keep-alive"},
		{"proxy-*", `"headers":{"Proxy-Authorization":"Basic x"}`, "headers.Proxy-Authorization"},
		{"te", `"headers":{"TE":"trailers"}`, "headers.TE"},
		{"trailer", `"headers":{"trailer":"x"}`, "headers.trailer"},
		{"transfer-encoding", `"headers":{"Transfer-Encoding":"chunked"}`, "headers.Transfer-Encoding"},
		{"upgrade", `"headers":{"upgrade":"h2c"}`, "headers.upgrade"},
		{"name not a token", `"headers":{"x bad":"v"}`, "headers"},
		{"name with a colon", `"headers":{"x-a:b":"v"}`, "headers"},
		{"empty name", `"headers":{"":"v"}`, "headers"},
		{"value with a newline", `"headers":{"x-api-key":"abc\r\nx-injected: 1"}`, "headers.x-api-key"},
		{"value with LF alone", `"headers":{"x-api-key":"abc\ndef"}`, "headers.x-api-key"},
		{"value with NUL", `"headers":{"x-api-key":"abc\u0000def"}`, "headers.x-api-key"},
		{"value with a control character", `"headers":{"x-api-key":"abc\u001bdef"}`, "headers.x-api-key"},
		{"value not ASCII", `"headers":{"x-api-key":"caf\u00e9"}`, "headers.x-api-key"},
		{"empty value", `"headers":{"x-api-key":""}`, "headers.x-api-key"},
		{"value too long", `"headers":{"x-api-key":"` + long + `"}`, "headers.x-api-key"},
		{"names equal but for case", `"headers":{"X-Key":"a","x-key":"b"}`, "headers.x-key"},
		{"too many", `"headers":` + string(manyJSON), "headers"},
		{"headers not an object", `"headers":["x-a: b"]`, "headers"},
		{"header value not a string", `"headers":{"x-a":1}`, "headers"},
		{"window of 0", `"recovery_window":"0s"`, "recovery_window"},
		{"negative window", `"recovery_window":"-5m"`, "recovery_window"},
		{"window past 72h", `"recovery_window":"73h"`, "recovery_window"},
		{"window not a duration", `"recovery_window":"five minutes"`, "recovery_window"},
		{"window as a number", `"recovery_window":300`, "recovery_window"},
		{"window under a millisecond", `"recovery_window":"1.0000001s"`, "recovery_window"},
		{"timeout of 0", `"timeout":"0s"`, "timeout"},
		{"timeout too long", `"timeout":"61s"`, "timeout"},
		{"timeout too short", `"timeout":"100ms"`, "timeout"},
		{"negative rate", `"rate_limit":-1`, "rate_limit"},
		{"rate of 0", `"rate_limit":0`, "rate_limit"},
		{"rate too small to mean anything", `"rate_limit":0.0009`, "rate_limit"},
		{"rate too high", `"rate_limit":1e9`, "rate_limit"},
		{"rate as a string", `"rate_limit":"5"`, "rate_limit"},
		{"threshold of 0", `"circuit_failure_threshold":0`, "circuit_failure_threshold"},
		{"negative threshold", `"circuit_failure_threshold":-3`, "circuit_failure_threshold"},
		{"threshold too high", `"circuit_failure_threshold":1001`, "circuit_failure_threshold"},
		{"threshold not whole", `"circuit_failure_threshold":2.5`, "circuit_failure_threshold"},
		{"threshold as a string", `"circuit_failure_threshold":"5"`, "circuit_failure_threshold"},
		{"auto_replay not a boolean", `"auto_replay":"yes"`, "auto_replay"},
		{"auto_replay as a number", `"auto_replay":1`, "auto_replay"},
		{"disable_after of 0", `"disable_after":"0s"`, "disable_after"},
		{"disable_after under a minute", `"disable_after":"59s"`, "disable_after"},
		{"disable_after past 90 days", `"disable_after":"2161h"`, "disable_after"},
		{"negative disable_after", `"disable_after":"-1h"`, "disable_after"},
		{"disable_after as a number", `"disable_after":3600`, "disable_after"},
		{"failure rate of 0", `"circuit_failure_rate":0`, "circuit_failure_rate"},
		{"failure rate past 100", `"circuit_failure_rate":101`, "circuit_failure_rate"},
		{"negative failure rate", `"circuit_failure_rate":-50`, "circuit_failure_rate"},
		{"failure rate as a fraction", `"circuit_failure_rate":0.5`, "circuit_failure_rate"},
		{"failure rate as a string", `"circuit_failure_rate":"50%"`, "circuit_failure_rate"},
		{"circuit window of 0", `"circuit_window":"0s"`, "circuit_window"},
		{"circuit window under 10s", `"circuit_window":"9s"`, "circuit_window"},
		{"circuit window past 1h", `"circuit_window":"61m"`, "circuit_window"},
		{"negative circuit window", `"circuit_window":"-1m"`, "circuit_window"},
		{"circuit window as a number", `"circuit_window":60`, "circuit_window"},
		{"min attempts of 0", `"circuit_min_attempts":0`, "circuit_min_attempts"},
		{"negative min attempts", `"circuit_min_attempts":-1`, "circuit_min_attempts"},
		{"min attempts too high", `"circuit_min_attempts":10001`, "circuit_min_attempts"},
		{"min attempts not whole", `"circuit_min_attempts":2.5`, "circuit_min_attempts"},
		{"max in flight of 0", `"max_in_flight":0`, "max_in_flight"},
		{"negative max in flight", `"max_in_flight":-1`, "max_in_flight"},
		{"max in flight too high", `"max_in_flight":10001`, "max_in_flight"},
		{"max in flight not whole", `"max_in_flight":1.5`, "max_in_flight"},
		{"max in flight as a string", `"max_in_flight":"10"`, "max_in_flight"},
	}
	path := "/v1/endpoints/" + b.endpointID
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := b.endpointRows(t)
			resp, raw := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/new",`+c.settings+`}`, b.bearer())
			p := requireProblem(t, resp, raw, http.StatusUnprocessableEntity, c.field)
			require.NotContains(t, p["detail"], "forged")
			require.NotContains(t, p["detail"], "abc")
			resp, raw = b.do(t, http.MethodPatch, path, "application/json", `{"disabled":true,`+c.settings+`}`, b.bearer())
			requireProblem(t, resp, raw, http.StatusUnprocessableEntity, c.field)
			require.Equal(t, before, b.endpointRows(t), "a refused request changes nothing")
		})
	}
}

// TestEndpointSettingsShownRedactedAndPatched: the settings are kept as
// sent and shown on every answer with the header values redacted (to the
// management and to readers alike, on creation too); a PATCH replaces
// the headers' map whole, leaves out what it does not send, and null puts
// the server's back.
func TestEndpointSettingsShownRedactedAndPatched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const secret = "rcv-s3cret-value"
	created := b.settingsCall(t, http.MethodPost, "/v1/endpoints",
		`{"url":"https://example.com/s","headers":{"Authorization":"Bearer `+secret+`","X-Tenant":"acme"},
		  "recovery_window":"72h","timeout":"2.5s","rate_limit":0.5,
		  "circuit_failure_threshold":3,"auto_replay":true,"disable_after":"48h",
		  "circuit_failure_rate":25,"circuit_window":"2m","circuit_min_attempts":40,
		  "max_in_flight":5}`, http.StatusCreated)
	want := settingsJSON{ID: created.ID, Headers: map[string]string{"Authorization": api.RedactedHeaderValue, "X-Tenant": api.RedactedHeaderValue},
		RecoveryWindow: "72h", Timeout: "2.5s", RateLimit: 0.5, CircuitFailureThreshold: 3, AutoReplay: true, DisableAfter: "48h",
		CircuitFailureRate: 25, CircuitWindow: "2m", CircuitMinAttempts: 40, MaxInFlight: 5}
	require.Equal(t, want, created)
	path := "/v1/endpoints/" + created.ID
	require.Equal(t, want, b.settingsCall(t, http.MethodGet, path, "", http.StatusOK))

	_, reader := b.createKey(t, "reader", api.ScopeEventsRead)
	for _, p := range []string{path, "/v1/endpoints"} {
		for _, h := range []http.Header{b.bearer(), bearer(reader)} {
			resp, raw := b.do(t, http.MethodGet, p, "", "", h)
			require.Equal(t, http.StatusOK, resp.StatusCode, raw)
			require.NotContains(t, raw, secret)
			require.Contains(t, raw, `"Authorization":"`+api.RedactedHeaderValue+`"`)
		}
	}
	var stored map[string]string
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT headers FROM endpoints WHERE id = $1", created.ID).Scan(&stored))
	require.Equal(t, "Bearer "+secret, stored["Authorization"], "the value is kept as sent, for the deliveries")

	got := b.settingsCall(t, http.MethodPatch, path, `{"headers":{"X-Other":"1234"}}`, http.StatusOK)
	want.Headers = map[string]string{"X-Other": api.RedactedHeaderValue}
	require.Equal(t, want, got, "the map is replaced, the other settings left as they are")

	got = b.settingsCall(t, http.MethodPatch, path, `{"recovery_window":"90s","rate_limit":20}`, http.StatusOK)
	want.RecoveryWindow, want.RateLimit = "1m30s", 20
	require.Equal(t, want, got)
	got = b.settingsCall(t, http.MethodPatch, path, `{"rate_limit":0.001}`, http.StatusOK)
	want.RateLimit = 0.001
	require.Equal(t, want, got, "the slowest rate that means something")

	got = b.settingsCall(t, http.MethodPatch, path, `{"auto_replay":false,"disable_after":"90m"}`, http.StatusOK)
	want.AutoReplay, want.DisableAfter = false, "1h30m"
	require.Equal(t, want, got)

	got = b.settingsCall(t, http.MethodPatch, path, `{"circuit_failure_rate":100,"circuit_window":"10s","circuit_min_attempts":1}`, http.StatusOK)
	want.CircuitFailureRate, want.CircuitWindow, want.CircuitMinAttempts = 100, "10s", 1
	require.Equal(t, want, got, "the failure rate's settings at their bounds")
	got = b.settingsCall(t, http.MethodPatch, path, `{"max_in_flight":1}`, http.StatusOK)
	want.MaxInFlight = 1
	require.Equal(t, want, got, "one attempt at a time")
	got = b.settingsCall(t, http.MethodPatch, path, `{"max_in_flight":10000}`, http.StatusOK)
	want.MaxInFlight = 10000
	require.Equal(t, want, got)

	got = b.settingsCall(t, http.MethodPatch, path, `{"headers":null,"recovery_window":null,"timeout":null,"rate_limit":null,
		"circuit_failure_threshold":null,"auto_replay":null,"disable_after":null,
		"circuit_failure_rate":null,"circuit_window":null,"circuit_min_attempts":null,"max_in_flight":null}`, http.StatusOK)
	require.Equal(t, settingsJSON{ID: created.ID, MaxInFlight: store.DefaultMaxInFlight}, got, "null: the server's (the defaults; the cap is shown as in force)")
	resp, raw := b.do(t, http.MethodGet, path, "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, raw, `"auto_replay":false`, "auto_replay is always shown")
	for _, member := range []string{"headers", "recovery_window", "timeout", "rate_limit", "circuit_failure_threshold", "disable_after",
		"circuit_failure_rate", "circuit_window", "circuit_min_attempts"} {
		require.NotContains(t, raw, `"`+member+`"`, "a setting left to the server is not shown")
	}
}

// TestEndpointSettingsNeedEndpointsWrite: only endpoints:write and admin
// keys change an endpoint's settings; every other scope gets 403 and the
// endpoint stays as it was.
func TestEndpointSettingsNeedEndpointsWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/v1/endpoints/" + b.endpointID
	for _, sc := range api.Scopes() {
		_, key := b.createKey(t, "key "+string(sc), sc)
		before := b.endpointRows(t)
		body := `{"headers":{"X-Api-Key":"k-` + string(sc) + `"},"recovery_window":"10m","timeout":"5s","rate_limit":3,
			"circuit_failure_threshold":2,"auto_replay":true,"disable_after":"1h",
			"circuit_failure_rate":30,"circuit_window":"5m","circuit_min_attempts":50}`
		resp, raw := b.do(t, http.MethodPatch, path, "application/json", body, bearer(key))
		resp2, raw2 := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/x",`+body[1:], bearer(key))
		if sc == api.ScopeEndpointsWrite || sc == api.ScopeAdmin {
			require.Equal(t, http.StatusOK, resp.StatusCode, raw)
			require.Equal(t, http.StatusCreated, resp2.StatusCode, raw2)
			continue
		}
		requireProblem(t, resp, raw, http.StatusForbidden, "")
		requireProblem(t, resp2, raw2, http.StatusForbidden, "")
		require.Equal(t, before, b.endpointRows(t), "%s changed nothing", sc)
	}
}
