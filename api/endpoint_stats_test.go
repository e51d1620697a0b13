package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/client"
)

// TestEndpointStats: GET /v1/endpoints/{id}/stats answers the endpoint's
// attempts of the last hour and what waits for it; an idle endpoint has no
// rate and no percentiles (null, not 0), nor an oldest undelivered; an
// unknown endpoint is 404 problem+json; and it takes events:read.
// throttled counts the reservations its rate limit made wait.
func TestEndpointStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	get := func(id string, h http.Header) (*http.Response, string) {
		return b.do(t, http.MethodGet, "/v1/endpoints/"+id+"/stats", "", "", h)
	}

	resp, body := get(b.endpointID, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var idle client.EndpointHealth
	require.NoError(t, json.Unmarshal([]byte(body), &idle))
	require.Len(t, idle.Hourly, 24, "the last 24 hours, empty ones too")
	for _, hr := range idle.Hourly {
		require.Equal(t, client.HourOutcomes{Hour: hr.Hour}, hr)
	}
	require.WithinDuration(t, time.Now(), idle.Hourly[23].Hour, time.Hour, "the current hour last")
	require.JSONEq(t, `{"endpoint_id":"`+b.endpointID+`","window_seconds":3600,"sample_limit":1000,"sampled":false,"attempts":0,
		"outcomes":{"delivered":0,"retry":0,"permanent":0,"gone":0},"success_rate":null,"latency_p50_ms":null,"latency_p99_ms":null,
		"waiting":0,"delivering":0,"dead_letters_open":0,"throttled":0,
		"circuit":{"state":"closed","consecutive_failures":0,"failure_threshold":5}}`, withoutMember(t, body, "hourly"))

	// One event accepted through the API, tried three times: one 5xx, one
	// timeout and one 2xx that the worker has not recorded as delivered yet.
	resp, body = b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, nil), b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	for i, a := range []struct {
		latency int32
		outcome string
	}{{5, "retry"}, {100, "retry"}, {15, "delivered"}} {
		require.NoError(t, b.store.AttemptInsert(ctx, "evt_1", b.endpointID, store.Attempt{
			Attempt: int32(i + 1), StartedAt: time.Now(), LatencyMS: a.latency, Outcome: a.outcome}))
	}
	resp, body = get(b.endpointID, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var got client.EndpointHealth
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.EqualValues(t, 3, got.Attempts)
	require.Equal(t, client.AttemptOutcomes{Delivered: 1, Retry: 2}, got.Outcomes)
	require.InDelta(t, 1.0/3, got.SuccessRate.MustGet(), 1e-9)
	require.InDelta(t, 15, got.LatencyP50Ms.MustGet(), 1e-9)
	require.InDelta(t, 98.3, got.LatencyP99Ms.MustGet(), 1e-9)
	require.EqualValues(t, 1, got.Waiting)
	require.NotNil(t, got.OldestUndelivered, body)
	require.Equal(t, "evt_1", got.OldestUndelivered.EventID)
	require.Equal(t, "order-1", got.OldestUndelivered.CorrelationID)
	require.EqualValues(t, 1, got.OldestUndelivered.Sequence)
	require.EqualValues(t, "waiting", got.OldestUndelivered.State)
	require.Equal(t, client.CircuitState{State: client.CircuitStateStateClosed, FailureThreshold: 5}, got.Circuit)
	require.Zero(t, got.Throttled, "no rate limit: never throttled")
	// The day by the hour: the three of this hour, one refused five hours
	// ago (outside the hour's figures), none from before the 24 hours.
	fiveAgo := time.Now().Add(-5 * time.Hour)
	require.NoError(t, b.store.AttemptInsert(ctx, "evt_1", b.endpointID, store.Attempt{Attempt: 4, StartedAt: fiveAgo, LatencyMS: 1, Outcome: "permanent"}))
	require.NoError(t, b.store.AttemptInsert(ctx, "evt_1", b.endpointID, store.Attempt{Attempt: 5, StartedAt: time.Now().Add(-30 * time.Hour), LatencyMS: 1, Outcome: "gone"}))
	resp, body = get(b.endpointID, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	got = client.EndpointHealth{}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.EqualValues(t, 3, got.Attempts, "the hour's figures leave the older ones out")
	var byHour []client.HourOutcomes
	for _, hr := range got.Hourly {
		if hr != (client.HourOutcomes{Hour: hr.Hour}) {
			byHour = append(byHour, hr)
		}
	}
	require.Len(t, byHour, 2, body)
	require.Equal(t, client.HourOutcomes{Hour: byHour[0].Hour, Permanent: 1}, byHour[0])
	require.False(t, fiveAgo.Before(byHour[0].Hour) || !fiveAgo.Before(byHour[0].Hour.Add(time.Hour)), "in the hour from %s", byHour[0].Hour)
	require.Equal(t, client.HourOutcomes{Hour: byHour[1].Hour, Delivered: 1, Retry: 2}, byHour[1])

	// Three reservations under a rate limit of 1/s: the first sends at
	// once, the next two wait their turn and are counted.
	for range 3 {
		_, err := b.store.EndpointRateReserve(ctx, b.endpointID, 1)
		require.NoError(t, err)
	}
	// Failures up to the threshold open the circuit, which the stats show.
	for range 5 {
		_, err := b.store.CircuitFailed(ctx, b.endpointID, "x", store.Settings{DisableAfter: time.Hour})
		require.NoError(t, err)
	}
	resp, body = get(b.endpointID, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	got = client.EndpointHealth{}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.EqualValues(t, 2, got.Throttled, body)
	require.Equal(t, client.CircuitStateStateOpen, got.Circuit.State)
	require.EqualValues(t, 5, got.Circuit.ConsecutiveFailures)
	require.NotZero(t, got.Circuit.FailingSince)
	require.NotZero(t, got.Circuit.OpenedAt)
	require.NotZero(t, got.Circuit.NextProbeAt)

	resp, body = get("nosuch_1", b.bearer())
	p := requireProblem(t, resp, body, http.StatusNotFound, "")
	require.Contains(t, p["detail"], "nosuch_1")
	resp, body = get("bad.id", b.bearer())
	requireProblem(t, resp, body, http.StatusBadRequest, "id")

	_, reader := b.createKey(t, "reader", api.ScopeEventsRead)
	resp, body = get(b.endpointID, bearer(reader))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	_, writer := b.createKey(t, "writer", api.ScopeEndpointsWrite)
	resp, body = get(b.endpointID, bearer(writer))
	p = requireProblem(t, resp, body, http.StatusForbidden, "")
	require.Equal(t, string(api.ScopeEventsRead), p["scope"])
	resp, body = get(b.endpointID, nil)
	requireProblem(t, resp, body, http.StatusUnauthorized, "")
}

// withoutMember is the JSON object body less its member name.
func withoutMember(t *testing.T, body, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	delete(m, name)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// TestEndpointEnabledStartsItsCircuitAfresh: an endpoint hookflow disabled
// for failing too long is enabled by PATCH with its breaker closed and its
// failures forgotten, so that its next failure does not disable it again.
func TestEndpointEnabledStartsItsCircuitAfresh(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 5 {
		_, err := b.store.CircuitFailed(ctx, b.endpointID, "x", store.Settings{DisableAfter: time.Hour})
		require.NoError(t, err)
	}
	_, err := b.pool.Exec(ctx, `UPDATE endpoint_circuits SET failing_since = now() - interval '2 hours' WHERE endpoint_id = $1`, b.endpointID)
	require.NoError(t, err)
	tr, err := b.store.CircuitFailed(ctx, b.endpointID, "x", store.Settings{DisableAfter: time.Hour})
	require.NoError(t, err)
	require.True(t, tr.Disabled)

	resp, body := b.do(t, http.MethodPatch, "/v1/endpoints/"+b.endpointID, "application/json", `{"disabled":false}`, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	c, err := b.store.CircuitGet(ctx, b.endpointID)
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	require.Zero(t, c.ConsecutiveFailures)
	require.Nil(t, c.FailingSince)
	tr, err = b.store.CircuitFailed(ctx, b.endpointID, "x", store.Settings{DisableAfter: time.Hour})
	require.NoError(t, err)
	require.False(t, tr.Disabled, "a fresh run of failures")
}
