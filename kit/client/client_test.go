package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/oapi-codegen/nullable"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/client"
)

const token = "hfk_secret-token-never-shown"

// seen is one request as the stand-in API received it.
type seen struct {
	method, path, query string
	header              http.Header
	body                string
}

// stub is a stand-in API: it records each request and answers with the
// handler registered for "METHOD /escaped/path".
type stub struct {
	mu     sync.Mutex
	seen   []seen
	routes map[string]http.HandlerFunc
}

func newStub(t *testing.T, routes map[string]http.HandlerFunc) (*stub, *client.Client) {
	t.Helper()
	s := &stub{routes: routes}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL+"/", token, client.WithUserAgent("client-test/1"))
	require.NoError(t, err)
	return s, c
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(b)})
	s.mu.Unlock()
	h, ok := s.routes[r.Method+" "+r.URL.EscapedPath()]
	if !ok {
		problem(w, http.StatusNotFound, `{"type":"https://hookflow.dev/problems/not-found","title":"Not Found","status":404}`)
		return
	}
	h(w, r)
}

func (s *stub) last() seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func problem(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func TestSendSendsTheEventWithTheToken(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": reply(http.StatusAccepted, `{"id":"evt-1","state":"waiting"}`),
	})
	acc, err := c.Send(context.Background(), client.EventCreate{
		ID: "evt-1", CorrelationID: "order-42", Sequence: 3, EndpointID: "ep_1", Type: "order.updated",
		Data: map[string]any{"amount": 10},
	})
	require.NoError(t, err)
	require.Equal(t, client.Accepted{ID: "evt-1", State: client.AcceptedStateWaiting}, acc)

	got := s.last()
	require.Equal(t, "Bearer "+token, got.header.Get("Authorization"))
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, "client-test/1", got.header.Get("User-Agent"))
	require.Equal(t, "/v1/events", got.path, "the base URL's trailing slash is not doubled")
	require.JSONEq(t, `{"id":"evt-1","correlation_id":"order-42","sequence":3,"endpoint_id":"ep_1","type":"order.updated","data":{"amount":10}}`, got.body)
}

func TestSendAgainAnswersTheExistingEvent(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": reply(http.StatusOK, `{"id":"evt-1","correlation_id":"order-42","sequence":1,
			"type":"t","state":"delivered","accepted_at":"2026-01-02T03:04:05Z",
			"deliveries":[{"endpoint_id":"ep_1","state":"delivered","delivered_at":"2026-01-02T03:04:06Z",
			"attempts":[{"attempt":1,"started_at":"2026-01-02T03:04:05Z","latency_ms":12,"status_code":200,"outcome":"delivered"}]}]}`),
	})
	acc, err := c.Send(context.Background(), client.EventCreate{ID: "evt-1", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Equal(t, client.Accepted{ID: "evt-1", State: client.AcceptedStateDelivered,
		Deliveries: []client.AcceptedDelivery{{EndpointID: "ep_1", State: "delivered"}}}, acc)

	r, err := c.EventCreateWithResponse(context.Background(), client.EventCreate{ID: "evt-1", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NotNil(t, r.JSON200, "a 200 is the same event again")
	d, ok := r.JSON200.Delivery("ep_1")
	require.True(t, ok)
	require.EqualValues(t, 200, d.Attempts[0].StatusCode)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), d.DeliveredAt)
}

func TestProblemIsAnError(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": func(w http.ResponseWriter, _ *http.Request) {
			problem(w, http.StatusConflict, `{"type":"https://hookflow.dev/problems/sequence-taken","title":"Sequence already taken",
				"status":409,"detail":"sequence 2 of order-42 is taken","instance":"/v1/events","field":"sequence","high_water_mark":3}`)
		},
	})
	_, err := c.Send(context.Background(), client.EventCreate{ID: "evt-2"})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusConflict, e.Status)
	require.Equal(t, "https://hookflow.dev/problems/sequence-taken", e.Type)
	require.Equal(t, "sequence", e.Field)
	require.Equal(t, "/v1/events", e.Instance)
	require.JSONEq(t, `3`, string(e.Extensions["high_water_mark"]))
	require.Equal(t, "409 Sequence already taken: sequence 2 of order-42 is taken", err.Error())
	require.NotContains(t, err.Error(), token)
}

// TestTooManyRequestsIsRetried: a 429 is sent again after its Retry-After,
// a bounded number of times, then returned with its RetryAfter.
func TestTooManyRequestsIsRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			first := n == 1
			mu.Unlock()
			if first {
				w.Header().Set("Retry-After", "0")
				problem(w, http.StatusTooManyRequests, `{"type":"https://hookflow.dev/problems/rate-limited","title":"Too Many Requests","status":429}`)
				return
			}
			reply(http.StatusAccepted, `{"id":"evt-1","state":"waiting"}`)(w, r)
		},
		"GET /v1/events/evt-1": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "0")
			problem(w, http.StatusTooManyRequests, `{"title":"Too Many Requests","status":429}`)
		},
		"GET /v1/events/evt-2": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "120")
			problem(w, http.StatusTooManyRequests, `{"title":"Too Many Requests","status":429}`)
		},
	})
	acc, err := c.Send(context.Background(), client.EventCreate{ID: "evt-1", Data: 1})
	require.NoError(t, err)
	require.Equal(t, "evt-1", acc.ID)
	require.Len(t, s.seen, 2)
	require.Equal(t, s.seen[0].body, s.seen[1].body, "the body is sent again whole")

	_, err = c.EventGetWithResponse(context.Background(), "evt-1", nil)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	require.Len(t, s.seen, 2+4, "one try and three retries")

	_, err = c.EventGetWithResponse(context.Background(), "evt-2", nil)
	require.ErrorAs(t, err, &e)
	require.Equal(t, 2*time.Minute, e.RetryAfter, "a wait longer than the client's is the caller's to decide")
	require.Len(t, s.seen, 2+4+1)
}

func TestAnswerThatIsNotAProblem(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"GET /readyz": reply(http.StatusServiceUnavailable, `{"status":"not_ready","checks":{"postgres":"unavailable","temporal":"ok"}}`),
		"GET /healthz": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
		},
	})
	_, err := c.HealthzWithResponse(context.Background())
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "502 Bad Gateway", e.Error())

	_, err = c.ReadyzWithResponse(context.Background())
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusServiceUnavailable, e.Status)
	var r client.Readiness
	require.NoError(t, json.Unmarshal(e.Body, &r))
	require.Equal(t, client.Readiness{Status: client.ReadinessStatusNotReady,
		Checks: map[string]client.ReadinessChecks{"postgres": client.ReadinessChecksUnavailable, "temporal": client.ReadinessChecksOk}}, r)
}

func TestNoAnswerIsTheTransportsErrorWrapped(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.NotFoundHandler())
	base := hs.URL
	hs.Close()
	c, err := client.New(base, token)
	require.NoError(t, err)
	_, err = c.HealthzWithResponse(context.Background())
	require.Error(t, err)
	var e *client.Error
	require.False(t, errors.As(err, &e))
	var ue *url.Error
	require.ErrorAs(t, err, &ue, "the transport's error is wrapped")
	require.NotContains(t, err.Error(), token)
}

func TestEmptyIDSendsNothing(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{})
	_, err := c.EventGetWithResponse(context.Background(), "", nil)
	require.ErrorContains(t, err, "an id in the path is empty")
	require.Empty(t, s.seen)
}

func TestIDsAreOnePathSegment(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/dead-letters/a%2Fb%3Fc/skip": reply(http.StatusAccepted, `{"event_id":"a/b?c","status":"skipping"}`),
	})
	r, err := c.DeadLetterSkipWithResponse(context.Background(), "a/b?c", nil, client.Operator{Note: "why"})
	require.NoError(t, err)
	require.Equal(t, client.OperatorAction{EventID: "a/b?c", Status: client.OperatorActionStatusSkipping}, *r.JSON202)
	require.JSONEq(t, `{"note":"why"}`, s.last().body)
}

// TestEndpointUpdateSays: left out stays, a value sets, null puts the
// default back; disabled: false is sent.
func TestEndpointUpdateSays(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"PATCH /v1/endpoints/ep_1": reply(http.StatusOK, `{"id":"ep_1","url":"https://x.example/h","disabled":true,
			"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`),
	})
	r, err := c.EndpointUpdateWithResponse(context.Background(), "ep_1", nil, client.EndpointUpdate{Disabled: new(false)})
	require.NoError(t, err)
	require.JSONEq(t, `{"disabled":false}`, s.last().body)
	require.True(t, r.JSON200.Disabled)

	_, err = c.EndpointUpdateWithResponse(context.Background(), "ep_1", nil, client.EndpointUpdate{
		RecoveryWindow: nullable.NewNullableWithValue("30s"), Timeout: nullable.NewNullNullable[string](),
		EventTypes: nullable.NewNullNullable[[]string](), MaxInFlight: nullable.NewNullableWithValue[int64](5),
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"recovery_window":"30s","timeout":null,"event_types":null,"max_in_flight":5}`, s.last().body)
}

func TestDeadLetterListAllFollowsTheCursor(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/dead-letters": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("cursor") == "" {
				reply(http.StatusOK, `{"items":[{"event_id":"a","status":"open","generation":1}],"next_cursor":"c1"}`)(w, r)
				return
			}
			reply(http.StatusOK, `{"items":[{"event_id":"b","status":"skipped","skipped_by":"ops","skip_note":"gone"}]}`)(w, r)
		},
	})
	since := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	all, err := c.DeadLetterListAll(context.Background(), client.DeadLetterListParams{
		CorrelationID: new("order-42"), Since: &since, Status: new(client.DeadLetterListParamsStatusAll), Limit: new(int64(1)),
	})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "a", all[0].EventID)
	require.Equal(t, "ops", all[1].SkippedBy)
	require.Len(t, s.seen, 2)
	require.Contains(t, s.seen[0].query, "limit=1")
	require.Contains(t, s.last().query, "cursor=c1")
	require.NotContains(t, s.seen[0].query, "endpoint_id", "a nil parameter is not sent")
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"", "127.0.0.1:8080", "ftp://x.example", "http://", "http://x.example/?a=1"} {
		_, err := client.New(base, token)
		require.Error(t, err, base)
	}
	_, err := client.New("http://x.example", "")
	require.Error(t, err)
	c, err := client.New("http://x.example/api/", token)
	require.NoError(t, err)
	require.Equal(t, "http://x.example/api", c.BaseURL())
}

// TestRetryAfterIsRead: a 503's Retry-After (an HTTP date here) is read
// too, and a 503 is not sent again.
func TestRetryAfterIsRead(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/dead-letters/e/replay": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
			problem(w, http.StatusServiceUnavailable, `{"type":"https://hookflow.dev/problems/temporal-unavailable","title":"Service Unavailable","status":503}`)
		},
	})
	_, err := c.DeadLetterReplayWithResponse(context.Background(), "e", nil, client.Operator{})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.InDelta(t, time.Hour, e.RetryAfter, float64(2*time.Second), "an HTTP date is read too")
	require.Len(t, s.seen, 1)
}

func TestContextEndsTheCall(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	_, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/events/slow": func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.EventGetWithResponse(ctx, "slow", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestEndpointSettingsSent: a create sends only the settings set; an
// update sends each one given, null where it puts the default back.
func TestEndpointSettingsSent(t *testing.T) {
	t.Parallel()
	const ep = `{"id":"ep_1","url":"https://x.example/h","disabled":false,"headers":{"X-Key":"********"},"recovery_window":"10m","rate_limit":5,
		"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","secret":"whsec_x"}`
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/endpoints":       reply(http.StatusCreated, ep),
		"PATCH /v1/endpoints/ep_1": reply(http.StatusOK, ep),
	})
	ctx := context.Background()
	r, err := c.EndpointCreateWithResponse(ctx, client.EndpointCreate{URL: "https://x.example/h",
		Headers: nullable.NewNullableWithValue(map[string]string{"X-Key": "k"}), RecoveryWindow: nullable.NewNullableWithValue((10 * time.Minute).String()),
		RateLimit: nullable.NewNullableWithValue(5.0)})
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://x.example/h","headers":{"X-Key":"k"},"recovery_window":"10m0s","rate_limit":5}`, s.last().body)
	require.Equal(t, map[string]string{"X-Key": "********"}, r.JSON201.Headers)
	require.Equal(t, "10m", r.JSON201.RecoveryWindow)
	require.Equal(t, 5.0, r.JSON201.RateLimit)
	require.Equal(t, "whsec_x", r.JSON201.Secret)

	_, err = c.EndpointUpdateWithResponse(ctx, "ep_1", nil, client.EndpointUpdate{Headers: nullable.NewNullNullable[map[string]string](),
		RecoveryWindow: nullable.NewNullNullable[string](), Timeout: nullable.NewNullableWithValue("2s"), RateLimit: nullable.NewNullNullable[float64](),
		AutoReplay: nullable.NewNullableWithValue(false), CircuitFailureThreshold: nullable.NewNullNullable[int64]()})
	require.NoError(t, err)
	require.JSONEq(t, `{"headers":null,"recovery_window":null,"timeout":"2s","rate_limit":null,"auto_replay":false,"circuit_failure_threshold":null}`, s.last().body)
}

func TestStatsTop(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/stats": reply(http.StatusOK, `{"queued":1,"in_flight":2,"delivered_last_5m":3,"dead_letters_open":4,"oldest_lag_seconds":5.5,
			"blocked_correlations":{"count":0,"top":[]},"cleaner":{"started_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z",
			"payloads_pruned":7,"attempts_deleted":8,"keys_deleted":9}}`),
	})
	r, err := c.StatsWithResponse(context.Background(), &client.StatsParams{Top: new(int64(0))})
	require.NoError(t, err)
	require.Equal(t, "top=0", s.last().query, "a zero set is sent")
	require.EqualValues(t, 4, r.JSON200.DeadLettersOpen)
	require.NotNil(t, r.JSON200.Cleaner)
	require.EqualValues(t, 9, r.JSON200.Cleaner.KeysDeleted)
	_, err = c.StatsWithResponse(context.Background(), &client.StatsParams{})
	require.NoError(t, err)
	require.Empty(t, s.last().query)
}

func TestStatsEndpointsAllFollowsTheCursor(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/stats/endpoints": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("cursor") == "" {
				reply(http.StatusOK, `{"endpoints":[{"endpoint_id":"ep_a","attempts":3,"success_rate":0.5}],"next_cursor":"c1"}`)(w, r)
				return
			}
			reply(http.StatusOK, `{"endpoints":[{"endpoint_id":"ep_b","success_rate":null}]}`)(w, r)
		},
	})
	all, err := c.StatsEndpointsAll(context.Background(), client.StatsEndpointsParams{Limit: new(int64(1))})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.EqualValues(t, 3, all[0].Attempts)
	require.Equal(t, 0.5, all[0].SuccessRate.MustGet())
	require.True(t, all[1].SuccessRate.IsNull(), "no attempts: no rate")
	q, err := url.ParseQuery(s.last().query)
	require.NoError(t, err)
	require.Equal(t, url.Values{"cursor": {"c1"}, "limit": {"1"}}, q)
}
