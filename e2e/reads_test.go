package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestReadsRateLimitedPerKey: a read key past HOOKFLOW_READS_RATE_LIMIT is
// answered 429 (rate-limited) with Retry-After on every GET, the event view
// and the dead letters' listing alike, as a write key is past its rate on
// POST /v1/events. Reads have a bucket of their own: a key that spent its
// reads still posts events, and another read key still reads.
func TestReadsRateLimitedPerKey(t *testing.T) {
	t.Parallel()
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
		resp, err := b.checked().Do(req)
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

// TestEventViewCapsAttempts: a delivery tried many times (here, a
// dead-lettered one with 45 more attempts recorded, as many replays would
// leave) is shown by GET /v1/events/{id} with its last 20 attempts and its
// count; GET /v1/events/{id}/deliveries/{endpoint_id}/attempts pages
// through every one of them, oldest first, and the view's are its last.
func TestEventViewCapsAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 6 * time.Second})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(rcv.Close)
	ep := b.createEndpoint(rcv.URL + "/hook")
	corr, id := b.id("many"), b.id("many-1")
	code, _ := b.postEvent(id, corr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(id, contract.StateDeadLettered, time.Minute)
	ctx := context.Background()
	start := time.Now()
	for i := range 45 {
		status := int32(500)
		require.NoError(t, b.store.AttemptInsert(ctx, id, ep.ID, store.Attempt{
			Attempt: int32(i + 2), StartedAt: start.Add(time.Duration(i) * time.Second), LatencyMS: int32(i), StatusCode: &status, Outcome: "retry",
		}))
	}

	var view struct {
		Deliveries []struct {
			EndpointID   string          `json:"endpoint_id"`
			Attempts     []store.Attempt `json:"attempts"`
			AttemptCount int64           `json:"attempt_count"`
		} `json:"deliveries"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/events/"+id, nil, &view))
	require.Len(t, view.Deliveries, 1)
	d := view.Deliveries[0]
	require.EqualValues(t, 46, d.AttemptCount, "the first attempt and the 45 recorded after it")
	require.Len(t, d.Attempts, 20, "the view lists the last 20")
	require.EqualValues(t, 27, d.Attempts[0].Attempt)
	require.EqualValues(t, 46, d.Attempts[19].Attempt)

	var all []store.Attempt
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging ends")
		var page struct {
			Items      []store.Attempt `json:"items"`
			NextCursor string          `json:"next_cursor"`
		}
		path := "/v1/events/" + id + "/deliveries/" + ep.ID + "/attempts?limit=20"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, path, nil, &page), path)
		require.LessOrEqual(t, len(page.Items), 20)
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	require.Len(t, all, 46)
	for i, a := range all {
		require.EqualValues(t, i+1, a.Attempt, "oldest first")
	}
	require.Equal(t, "permanent", all[0].Outcome, "the receiver's refusal is the first")
	require.Equal(t, d.Attempts, all[26:], "the view's are the last")

	var problem map[string]any
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/events/"+id+"/deliveries/ep_nosuch/attempts", nil, &problem))
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/events/"+b.id("nosuch")+"/deliveries/"+ep.ID+"/attempts", nil, &problem))
	require.Equal(t, http.StatusBadRequest, b.call(http.MethodGet, "/v1/events/"+id+"/deliveries/"+ep.ID+"/attempts?cursor=bogus", nil, &problem))
	require.Equal(t, "cursor", problem["field"])
	require.Equal(t, http.StatusBadRequest, b.call(http.MethodGet, "/v1/events/"+id+"/deliveries/"+ep.ID+"/attempts?limit=501", nil, &problem))
}

// TestEndpointsHealthAtOnce: GET /v1/stats/endpoints answers the
// endpoints' health a page at a time, so that no read is unbounded (limit,
// an opaque cursor, next_cursor absent on the last page; a limit past 500 or
// a cursor it did not make is 400), each as GET /v1/endpoints/{id}/stats
// has it; an endpoint whose hour holds more attempts than the sample
// (1,000) is told from its last 1,000, and says so.
func TestEndpointsHealthAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 6 * time.Second})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(rcv.Close)
	busy := b.createEndpoint(rcv.URL + "/busy")
	quiet := b.createEndpoint(rcv.URL + "/quiet")
	idle := b.createEndpoint(rcv.URL + "/idle")
	id := b.id("health-1")
	code, _ := b.postEvent(id, b.id("health"), 1, busy.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.postEvent(b.id("health-q"), b.id("health-q"), 1, quiet.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(id, contract.StateDeadLettered, time.Minute)
	b.waitState(b.id("health-q"), contract.StateDeadLettered, time.Minute)
	// 1,010 more delivered attempts of the last seconds, as a busy
	// receiver's hour leaves them; the first, a refusal, half an hour ago,
	// is the oldest.
	_, err := b.store.Pool().Exec(context.Background(), `UPDATE delivery_attempts SET started_at = now() - interval '30 minutes' WHERE event_id = $1`, id)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(context.Background(), `INSERT INTO delivery_attempts (tenant_id, event_id, endpoint_id, attempt, started_at, latency_ms, status_code, outcome)
		SELECT 'default', $1, $2, i + 1, now() - interval '1 second' * (1010 - i) / 100, 7, 200, 'delivered' FROM generate_series(1, 1010) i`, id, busy.ID)
	require.NoError(t, err)

	type health struct {
		EndpointID  string   `json:"endpoint_id"`
		SampleLimit int      `json:"sample_limit"`
		Sampled     bool     `json:"sampled"`
		Attempts    int64    `json:"attempts"`
		SuccessRate *float64 `json:"success_rate"`
		DeadLetters int64    `json:"dead_letters_open"`
		Circuit     struct {
			State            string `json:"state"`
			FailureThreshold int    `json:"failure_threshold"`
		} `json:"circuit"`
	}
	type page struct {
		Endpoints  []health `json:"endpoints"`
		NextCursor string   `json:"next_cursor"`
	}
	var all page
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats/endpoints", nil, &all))
	require.Len(t, all.Endpoints, 3, "under the default page, one page")
	require.Empty(t, all.NextCursor)
	byID := map[string]health{}
	var paged []string
	for cursor, pages := "", 0; ; pages++ {
		var p page
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats/endpoints?limit=2&cursor="+cursor, nil, &p))
		require.LessOrEqual(t, len(p.Endpoints), 2)
		for _, h := range p.Endpoints {
			byID[h.EndpointID] = h
			paged = append(paged, h.EndpointID)
		}
		if p.NextCursor == "" {
			require.Equal(t, 1, pages, "two pages of at most 2")
			break
		}
		cursor = p.NextCursor
	}
	require.Len(t, byID, 3)
	require.True(t, slices.IsSorted(paged), "in id order, each once: %v", paged)
	var problem map[string]any
	require.Equal(t, http.StatusBadRequest, b.call(http.MethodGet, "/v1/stats/endpoints?limit=501", nil, &problem))
	require.Equal(t, "limit", problem["field"])
	require.Equal(t, http.StatusBadRequest, b.call(http.MethodGet, "/v1/stats/endpoints?cursor=%25%25", nil, &problem))
	require.Equal(t, "cursor", problem["field"])
	for _, ep := range []string{busy.ID, quiet.ID, idle.ID} {
		var one health
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+ep+"/stats", nil, &one))
		require.Equal(t, one, byID[ep], "the list's health of %s is the endpoint's own", ep)
	}
	got := byID[busy.ID]
	require.Equal(t, 1000, got.SampleLimit)
	require.True(t, got.Sampled, "the hour holds 1,011 attempts")
	require.EqualValues(t, 1000, got.Attempts, "the last 1,000")
	require.InDelta(t, 1.0, *got.SuccessRate, 1e-9, "the refusal, the oldest, is outside the sample")
	require.EqualValues(t, 1, got.DeadLetters)
	require.Equal(t, "closed", got.Circuit.State)
	require.Equal(t, 5, got.Circuit.FailureThreshold)
	q := byID[quiet.ID]
	require.False(t, q.Sampled)
	require.EqualValues(t, 1, q.Attempts)
	require.InDelta(t, 0.0, *q.SuccessRate, 1e-9)
	require.Nil(t, byID[idle.ID].SuccessRate)
}

// TestReadsStopAtTheStatementTimeout: a read whose statement runs past
// HOOKFLOW_STATEMENT_TIMEOUT is cancelled by Postgres and answered 503
// query-timeout (problem+json, Retry-After), not left to hold a connection
// and the database for as long as it takes. The statement is made to run
// long honestly: another session holds the lock every read of events
// waits for. The sweeps' and workers' connections carry no such timeout,
// and the request's connections serve the next request once the lock is
// gone.
//
// The timeout (2 s) is far above what the test's own writes and reads
// take on a loaded machine, and the reads behind the lock would wait for
// ever without it: the 503s come of the lock, never of the load.
func TestReadsStopAtTheStatementTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, options{statementTimeout: 2 * time.Second})
	ep := b.createEndpoint("http://127.0.0.1:9/hook")
	id := b.id("slow-1")
	code, _ := b.postEvent(id, b.id("slow"), 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)

	ctx := context.Background()
	var unbounded string
	require.NoError(t, b.store.Pool().QueryRow(ctx, "SHOW statement_timeout").Scan(&unbounded))
	require.Equal(t, "0", unbounded, "the sweeps' and workers' sessions are not bounded")

	conn, err := pgx.Connect(ctx, b.cfg.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	// Without the timeout these reads would wait for the lock: the client's
	// own timeout makes that a failure rather than a hang. The client holds
	// each answer to openapi.json, which documents the 503.
	client := b.checked()
	client.Timeout = time.Minute
	for _, path := range []string{"/v1/events", "/v1/events?endpoint_id=" + ep.ID, "/v1/events/" + id} {
		req, err := http.NewRequest(http.MethodGet, b.apiURL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.cfg.APIToken)
		resp, err := client.Do(req)
		require.NoError(t, err, path)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", path, raw)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		var p map[string]any
		require.NoError(t, json.Unmarshal(raw, &p))
		require.Equal(t, "https://hookflow.dev/problems/query-timeout", p["type"], path)
		require.Equal(t, "Query Timed Out", p["title"])
		require.NotContains(t, string(raw), "canceling statement", "no raw database error")
	}

	require.NoError(t, tx.Rollback(ctx))
	var list struct {
		Items []map[string]any `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/events?endpoint_id="+ep.ID, nil, &list))
	require.Len(t, list.Items, 1)
}
