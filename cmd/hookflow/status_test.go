package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Endpoint health as GET /v1/stats/endpoints lists it: billing
// fails half its attempts and holds a dead letter; shipping is well.
const (
	healthBilling = `{"endpoint_id":"ep_billing","window_seconds":3600,"attempts":8,"outcomes":{"delivered":4,"retry":3,"permanent":1,"gone":0},
		"success_rate":0.5,"latency_p50_ms":12,"latency_p99_ms":480.4,"waiting":4,"delivering":0,"dead_letters_open":1,
		"oldest_undelivered":{"event_id":"evt_9_2","correlation_id":"order-9","sequence":2,"state":"dead_lettered","age_seconds":65.4}}`
	healthShipping = `{"endpoint_id":"ep_shipping","window_seconds":3600,"attempts":2,"outcomes":{"delivered":2,"retry":0,"permanent":0,"gone":0},
		"success_rate":1,"latency_p50_ms":3,"latency_p99_ms":4,"waiting":0,"delivering":3,"dead_letters_open":0,
		"oldest_undelivered":{"event_id":"evt_7_1","correlation_id":"order-7","sequence":1,"state":"delivering","age_seconds":1}}`
)

// TestStatusPrintsStats runs `hookflow status` against a stand-in API and
// checks the table and --json carry GET /v1/stats' numbers, and that the
// worst endpoints are listed from their health, the well ones left out.
func TestStatusPrintsStats(t *testing.T) {
	const stats = `{"queued":3,"in_flight":7,"delivered_last_5m":42,"dead_letters_open":1,"oldest_lag_seconds":65.4,
		"blocked_correlations":{"count":1,"top":[{"correlation_id":"order-9","endpoint_id":"ep_billing","next_sequence":2,"blocked_by":"dead_lettered",
		"blocking_event_id":"evt_9_2","parked":4,"age_seconds":30}]},
		"endpoints":[{"endpoint_id":"ep_billing","waiting":4,"delivering":0,"delivered_last_5m":40,"dead_letters_open":1,"oldest_lag_seconds":65.4},
		{"endpoint_id":"ep_shipping","waiting":0,"delivering":3,"delivered_last_5m":2,"dead_letters_open":0,"oldest_lag_seconds":1}]}`
	var gotAuth string
	var paths []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.RequestURI())
		// The endpoints' health in two pages: status follows the cursor.
		body, ok := map[string]string{"/v1/stats": stats,
			"/v1/stats/endpoints":                `{"endpoints":[` + healthBilling + `],"next_cursor":"cGFnZTI"}`,
			"/v1/stats/endpoints?cursor=cGFnZTI": `{"endpoints":[` + healthShipping + `]}`,
			// The first page of the tenants' ranking, five of seven.
			"/v1/stats/tenants?limit=5": `{"tenants":[{"tenant_id":"acme","disabled":false,"dead_letters_open":3,"failing_endpoints":1,` +
				`"waiting":42,"delivering":0,"oldest_lag_seconds":612.4},{"tenant_id":"globex","disabled":true,"dead_letters_open":0,` +
				`"failing_endpoints":0,"waiting":2,"delivering":1,"oldest_lag_seconds":0.7}],"total":7}`}[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(hs.Close)
	env := map[string]string{"HOOKFLOW_API_URL": hs.URL, "HOOKFLOW_API_TOKEN": "tok"}

	code, out, stderr := runWith(env, "status")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "Bearer tok", gotAuth)
	require.Equal(t, []string{"/v1/stats", "/v1/stats/endpoints", "/v1/stats/endpoints?cursor=cGFnZTI", "/v1/stats/tenants?limit=5"}, paths,
		"a request a page of endpoints, and the first page of the tenants' ranking")
	for _, want := range []string{"queued", "3", "in flight", "7", "42", "dead letters open", "1m5s", "blocked lanes",
		"order-9", "dead_lettered", "evt_9_2", "30s", "ENDPOINT", "ep_billing", "ep_shipping"} {
		require.Contains(t, out, want)
	}
	_, worst, ok := strings.Cut(out, "WORST ENDPOINTS")
	require.True(t, ok, out)
	worst, _, _ = strings.Cut(worst, "\n\n")
	for _, want := range []string{"ep_billing", "50.0%", "8", "12ms", "480ms", "1m5s (evt_9_2, order-9 #2, dead_lettered)"} {
		require.Contains(t, worst, want)
	}
	require.NotContains(t, worst, "ep_shipping", "every attempt delivered, nothing waits long: not listed")
	_, tenants, ok := strings.Cut(out, "WORST TENANTS")
	require.True(t, ok, out)
	tenants, _, _ = strings.Cut(tenants, "\n\n")
	lines := strings.Split(strings.TrimSpace(tenants), "\n")
	require.Len(t, lines, 4, tenants)
	require.Equal(t, []string{"acme", "3", "1", "42", "0", "10m12s"}, strings.Fields(lines[1]), "in the server's order")
	require.Equal(t, []string{"globex", "(disabled)", "0", "0", "2", "1", "1s"}, strings.Fields(lines[2]))
	require.Contains(t, lines[3], "… and 5 more")

	code, out, stderr = runWith(env, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.EqualValues(t, 42, got["delivered_last_5m"])
	require.EqualValues(t, 1, got["dead_letters_open"])
	worstJSON, ok := got["worst_endpoints"].([]any)
	require.True(t, ok, "--json carries the worst endpoints too: %s", out)
	require.Len(t, worstJSON, 1)
	require.Equal(t, "ep_billing", worstJSON[0].(map[string]any)["endpoint_id"])
	require.EqualValues(t, 7, got["worst_tenants"].(map[string]any)["total"])

	code, _, stderr = runWith(map[string]string{"HOOKFLOW_API_URL": hs.URL, "HOOKFLOW_API_TOKEN": "tok"}, "status", "extra")
	require.Equal(t, 2, code, stderr)
}

// TestStatusWorstOrderAndErrors: the worst endpoints come with an open
// circuit first, then lowest success rate, then most open dead letters,
// then oldest undelivered, five of them and a count of the rest; an
// endpoint with no attempts counts as nothing failed. A health read that
// fails is one line on stderr and exit 1.
func TestStatusWorstOrderAndErrors(t *testing.T) {
	t.Parallel()
	health := map[string]string{
		"a": `{"endpoint_id":"a","attempts":10,"success_rate":0.9,"dead_letters_open":0}`,
		"b": `{"endpoint_id":"b","attempts":0,"success_rate":null,"dead_letters_open":7}`,
		"c": `{"endpoint_id":"c","attempts":4,"success_rate":0.25,"dead_letters_open":1}`,
		"d": `{"endpoint_id":"d","attempts":0,"success_rate":null,"dead_letters_open":0,
			"oldest_undelivered":{"event_id":"e","correlation_id":"k","sequence":1,"state":"waiting","age_seconds":600}}`,
		"e": `{"endpoint_id":"e","attempts":0,"success_rate":null,"dead_letters_open":7}`,
		"g": `{"endpoint_id":"g","attempts":0,"success_rate":null,"dead_letters_open":0,
			"circuit":{"state":"open","consecutive_failures":5,"failure_threshold":5}}`,
	}
	var failing atomic.Bool
	failing.Store(true)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/stats" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"blocked_correlations":{"count":0,"top":[]},"endpoints":[{"endpoint_id":"a"},{"endpoint_id":"b"},` +
				`{"endpoint_id":"c"},{"endpoint_id":"d"},{"endpoint_id":"e"},{"endpoint_id":"f"},{"endpoint_id":"g"}]}`))
			return
		}
		if r.URL.Path == "/v1/stats/tenants" {
			// A key without tenants:write: status lists no tenants, and
			// says nothing of it.
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"type":"https://hookflow.dev/problems/forbidden","title":"Forbidden","status":403,"detail":"this key lacks tenants:write"}`))
			return
		}
		if r.URL.Path != "/v1/stats/endpoints" || failing.Load() {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"type":"https://hookflow.dev/problems/internal","title":"Internal Server Error","status":500,"detail":"internal error"}`))
			return
		}
		var all []string
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			all = append(all, health[id])
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"endpoints":[` + strings.Join(all, ",") + `]}`))
	}))
	t.Cleanup(hs.Close)
	env := map[string]string{"HOOKFLOW_API_URL": hs.URL, "HOOKFLOW_API_TOKEN": "tok"}

	code, out, stderr := runWith(env, "status")
	require.Equal(t, 1, code, out)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	require.Contains(t, stderr, "500")

	health["f"] = `{"endpoint_id":"f","attempts":3,"success_rate":1,"dead_letters_open":0}`
	failing.Store(false)
	code, out, stderr = runWith(env, "status")
	require.Equal(t, 0, code, stderr)
	_, worst, ok := strings.Cut(out, "WORST ENDPOINTS")
	require.True(t, ok, out)
	var order []string
	lines := strings.Split(strings.TrimSpace(worst), "\n")
	for _, line := range lines[1 : len(lines)-1] {
		order = append(order, strings.Fields(line)[0])
	}
	require.Equal(t, []string{"g", "c", "a", "b", "e"}, order)
	require.Contains(t, lines[1], "open")
	require.Equal(t, "… and 1 more", strings.TrimSpace(lines[len(lines)-1]))
	require.NotContains(t, out, "WORST TENANTS")
}
