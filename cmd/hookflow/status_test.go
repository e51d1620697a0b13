package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatusPrintsStats runs `hookflow status` against a stand-in API and
// checks the table and --json carry GET /v1/stats' numbers.
func TestStatusPrintsStats(t *testing.T) {
	const stats = `{"queued":3,"in_flight":7,"delivered_last_5m":42,"dead_letters_open":1,"oldest_lag_seconds":65.4,
		"blocked_correlations":{"count":1,"top":[{"correlation_id":"order-9","endpoint_id":"ep_billing","next_sequence":2,"blocked_by":"dead_lettered",
		"blocking_event_id":"evt_9_2","parked":4,"age_seconds":30}]},
		"endpoints":[{"endpoint_id":"ep_billing","waiting":4,"delivering":0,"delivered_last_5m":40,"dead_letters_open":1,"oldest_lag_seconds":65.4},
		{"endpoint_id":"ep_shipping","waiting":0,"delivering":3,"delivered_last_5m":2,"dead_letters_open":0,"oldest_lag_seconds":1}]}`
	var gotAuth string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/stats" {
			http.NotFound(w, r)
			return
		}
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(stats))
	}))
	t.Cleanup(hs.Close)
	env := map[string]string{"HOOKFLOW_API_URL": hs.URL, "HOOKFLOW_API_TOKEN": "tok"}

	code, out, stderr := runWith(env, "status")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "Bearer tok", gotAuth)
	for _, want := range []string{"queued", "3", "in flight", "7", "42", "dead letters open", "1m5s", "blocked lanes",
		"order-9", "dead_lettered", "evt_9_2", "30s", "ENDPOINT", "ep_billing", "ep_shipping"} {
		require.Contains(t, out, want)
	}

	code, out, stderr = runWith(env, "status", "--json")
	require.Equal(t, 0, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.EqualValues(t, 42, got["delivered_last_5m"])
	require.EqualValues(t, 1, got["dead_letters_open"])

	code, _, stderr = runWith(map[string]string{"HOOKFLOW_API_URL": hs.URL, "HOOKFLOW_API_TOKEN": "tok"}, "status", "extra")
	require.Equal(t, 2, code, stderr)
}
