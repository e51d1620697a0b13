package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadsRateLimitedPerKey: a read key past HOOKFLOW_READS_RATE_LIMIT is
// answered 429 (rate-limited) with Retry-After on every GET, the event view
// and the dead letters' listing alike, as a write key is past its rate on
// POST /v1/events. Reads have a bucket of their own: a key that spent its
// reads still posts events, and another read key still reads.
func TestReadsRateLimitedPerKey(t *testing.T) {
	// 0.05 per second: a burst of 1, and the next read in 20 s.
	b := setup(t, options{readsPerSecond: 0.05})
	ep := b.createEndpoint("http://127.0.0.1:9/hook")
	reader := b.createKey("reader", "events:read")
	both := b.createKey("both", "events:read", "events:write")
	corr, id := b.id("reads"), b.id("reads-1")
	code, _ := b.postEvent(id, corr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)

	get := func(key, path string) (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, b.apiURL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.Unmarshal(raw, &body), "%s", raw)
		return resp, body
	}
	resp, _ := get(reader, "/v1/events/"+id)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, path := range []string{"/v1/events/" + id, "/v1/dead-letters", "/v1/stats", "/v1/endpoints"} {
		resp, body := get(reader, path)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Contains(t, body["type"], "rate-limited")
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Duration(secs)*time.Second, 10*time.Second, "the next read is about 20 s away")
	}

	resp, _ = get(both, "/v1/events/"+id)
	require.Equal(t, http.StatusOK, resp.StatusCode, "another key has its own bucket")
	resp, _ = get(both, "/v1/events/"+id)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	code = b.callAs(both, http.MethodPost, "/v1/events", map[string]any{
		"id": b.id("reads-2"), "correlation_id": corr, "sequence": 2, "endpoint_id": ep.ID, "type": "order.updated", "data": map[string]any{"n": 2},
	}, nil)
	require.Equal(t, http.StatusAccepted, code, "posting is limited in a bucket of its own")
}
