package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

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

func TestEventCreateSendsTheEventWithTheToken(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": reply(http.StatusAccepted, `{"id":"evt-1","state":"waiting"}`),
	})
	acc, err := c.EventCreate(context.Background(), client.EventCreateRequest{
		ID: "evt-1", CorrelationID: "order-42", Sequence: 3, EndpointID: "ep_1", Type: "order.updated",
		Data: map[string]any{"amount": 10},
	})
	require.NoError(t, err)
	require.Equal(t, client.Accepted{ID: "evt-1", State: client.StateWaiting}, acc)

	got := s.last()
	require.Equal(t, "Bearer "+token, got.header.Get("Authorization"))
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, "client-test/1", got.header.Get("User-Agent"))
	require.Equal(t, "/v1/events", got.path, "the base URL's trailing slash is not doubled")
	require.JSONEq(t, `{"id":"evt-1","correlation_id":"order-42","sequence":3,"endpoint_id":"ep_1","type":"order.updated","data":{"amount":10}}`, got.body)
}

func TestEventCreateAgainAnswersTheExistingEvent(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": reply(http.StatusOK, `{"id":"evt-1","correlation_id":"order-42","sequence":1,
			"type":"t","state":"delivered","accepted_at":"2026-01-02T03:04:05Z",
			"deliveries":[{"endpoint_id":"ep_1","state":"delivered","delivered_at":"2026-01-02T03:04:06Z",
			"attempts":[{"attempt":1,"started_at":"2026-01-02T03:04:05Z","latency_ms":12,"status_code":200,"outcome":"delivered"}]}]}`),
	})
	acc, err := c.EventCreate(context.Background(), client.EventCreateRequest{ID: "evt-1", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Equal(t, client.StateDelivered, acc.State)
	require.NotNil(t, acc.Existing, "a 200 is the same event again")
	d, ok := acc.Existing.Delivery("ep_1")
	require.True(t, ok)
	require.Len(t, d.Attempts, 1)
	require.Equal(t, 200, d.Attempts[0].StatusCode)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), d.DeliveredAt)
}

func TestProblemIsAnError(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": func(w http.ResponseWriter, r *http.Request) {
			problem(w, http.StatusConflict, `{"type":"https://hookflow.dev/problems/sequence-taken","title":"Sequence already taken",
				"status":409,"detail":"sequence 2 of correlation c is already taken by another event","instance":"/v1/events",
				"field":"sequence","high_water_mark":7,"next_sequence":3,"correlation_id":"c"}`)
		},
	})
	_, err := c.EventCreate(context.Background(), client.EventCreateRequest{ID: "e", Data: 1})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusConflict, e.Status)
	require.Equal(t, "https://hookflow.dev/problems/sequence-taken", e.Type)
	require.Equal(t, "sequence", e.Field)
	require.Equal(t, "/v1/events", e.Instance)
	require.JSONEq(t, `7`, string(e.Extensions["high_water_mark"]))
	require.JSONEq(t, `3`, string(e.Extensions["next_sequence"]))
	require.NotContains(t, e.Extensions, "field", "members with a field of their own are not extensions")
	require.Equal(t, "409 Sequence already taken: sequence 2 of correlation c is already taken by another event", err.Error())
	require.NotContains(t, fmt.Sprintf("%+v %#v", err, err), token)
}

func TestTooManyRequestsCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/events": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			problem(w, http.StatusTooManyRequests, `{"type":"https://hookflow.dev/problems/rate-limited","title":"Too Many Requests","status":429}`)
		},
		"POST /v1/dead-letters/e/replay": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
			problem(w, http.StatusServiceUnavailable, `{"type":"https://hookflow.dev/problems/temporal-unavailable","title":"Service Unavailable","status":503}`)
		},
	})
	_, err := c.EventCreate(context.Background(), client.EventCreateRequest{ID: "e", Data: 1})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	require.Equal(t, 3*time.Second, e.RetryAfter)
	require.Equal(t, "429 Too Many Requests", err.Error())

	_, err = c.DeadLetterReplay(context.Background(), "e", client.OperatorRequest{})
	require.ErrorAs(t, err, &e)
	require.InDelta(t, time.Hour, e.RetryAfter, float64(2*time.Second), "an HTTP date is read too")
}

func TestAnswerThatIsNotAProblem(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/stats": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
		},
	})
	_, err := c.Stats(context.Background(), client.StatsParams{})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusBadGateway, e.Status)
	require.Equal(t, "Bad Gateway", e.Title)
	require.Empty(t, e.Type)
	require.Equal(t, "502 Bad Gateway", err.Error())
}

func TestNoAnswerIsTheTransportsErrorWrapped(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.NotFoundHandler())
	base := hs.URL
	hs.Close() // nothing listens there any more
	c, err := client.New(base, token)
	require.NoError(t, err)
	_, err = c.EventGet(context.Background(), "evt-1")
	require.Error(t, err)
	var ue *url.Error
	require.ErrorAs(t, err, &ue, "the transport's error is wrapped")
	var e *client.Error
	require.False(t, errors.As(err, &e), "no answer is not an API error")
	require.NotContains(t, err.Error(), token)
}

func TestContextEndsTheCall(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	_, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/events/slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.EventGet(ctx, "slow")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestReadyzNotReadyGivesItsChecks(t *testing.T) {
	t.Parallel()
	_, c := newStub(t, map[string]http.HandlerFunc{
		"GET /readyz": reply(http.StatusServiceUnavailable, `{"status":"not_ready","checks":{"postgres":"unavailable","temporal":"ok"}}`),
	})
	r, err := c.Readyz(context.Background())
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusServiceUnavailable, e.Status)
	require.Equal(t, client.Readiness{Status: "not_ready", Checks: map[string]string{"postgres": "unavailable", "temporal": "ok"}}, r)
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
	all, err := c.DeadLetterListAll(context.Background(), client.DeadLetterFilter{
		CorrelationID: "order-42", EndpointID: "ep_1", Since: since, Status: client.DeadLetterAll, Limit: 1,
	})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "a", all[0].EventID)
	require.Equal(t, 1, all[0].Generation)
	require.Equal(t, "ops", all[1].SkippedBy)
	q, err := url.ParseQuery(s.last().query)
	require.NoError(t, err)
	require.Equal(t, url.Values{"correlation_id": {"order-42"}, "endpoint_id": {"ep_1"}, "since": {"2026-11-29T18:00:00Z"},
		"status": {"all"}, "limit": {"1"}, "cursor": {"c1"}}, q)
}

func TestReplayBatchSendsOnlyTheMatch(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/dead-letters/replay": reply(http.StatusAccepted, `{"replayed":2,"event_ids":["a","b"]}`),
	})
	res, err := c.DeadLetterReplayBatch(context.Background(), client.DeadLetterFilter{EndpointID: "ep_1", Status: "skipped", Limit: 5, Cursor: "x"})
	require.NoError(t, err)
	require.Equal(t, client.BatchReplay{Replayed: 2, EventIDs: []string{"a", "b"}}, res)
	require.Equal(t, "endpoint_id=ep_1", s.last().query)
	require.Empty(t, s.last().body)
	require.Empty(t, s.last().header.Get("Content-Type"), "no body, no content type")
}

func TestIDsAreOnePathSegment(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/dead-letters/a%2Fb%3Fc/skip": reply(http.StatusAccepted, `{"event_id":"a/b?c","status":"skipping"}`),
	})
	act, err := c.DeadLetterSkip(context.Background(), "a/b?c", client.OperatorRequest{Note: "why"})
	require.NoError(t, err)
	require.Equal(t, client.OperatorAction{EventID: "a/b?c", Status: "skipping"}, act)
	require.JSONEq(t, `{"note":"why"}`, s.last().body)

	n := len(s.seen)
	_, err = c.EventGet(context.Background(), "")
	require.EqualError(t, err, "event id is required")
	require.Len(t, s.seen, n, "an empty id sends nothing")
}

func TestEndpointUpdateSendsOnlyWhatChanges(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"PATCH /v1/endpoints/ep_1": reply(http.StatusOK, `{"id":"ep_1","url":"https://x.example/h","disabled":true,
			"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`),
	})
	ep, err := c.EndpointUpdate(context.Background(), "ep_1", client.EndpointUpdateRequest{Disabled: new(false)})
	require.NoError(t, err)
	require.JSONEq(t, `{"disabled":false}`, s.last().body)
	require.True(t, ep.Disabled)
}

// TestEndpointUpdateEventTypes: left out, the event types are not sent; a
// pointer to nil sends null (every type); a list is sent as it is.
func TestEndpointUpdateEventTypes(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"PATCH /v1/endpoints/ep_1": reply(http.StatusOK, `{"id":"ep_1","url":"https://x.example/h","disabled":false,"event_types":["order.*"],
			"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`),
	})
	ctx := context.Background()
	u := "https://x.example/h"
	_, err := c.EndpointUpdate(ctx, "ep_1", client.EndpointUpdateRequest{URL: &u})
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://x.example/h"}`, s.last().body)
	var every []string
	_, err = c.EndpointUpdate(ctx, "ep_1", client.EndpointUpdateRequest{EventTypes: &every})
	require.NoError(t, err)
	require.JSONEq(t, `{"event_types":null}`, s.last().body)
	ep, err := c.EndpointUpdate(ctx, "ep_1", client.EndpointUpdateRequest{EventTypes: &[]string{"order.*"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"event_types":["order.*"]}`, s.last().body)
	require.Equal(t, []string{"order.*"}, ep.EventTypes)
}

// TestEndpointSettingsSent: a create sends only the settings set; an
// update sends each one given, and a pointer to the empty value sends null
// (the server's, no headers, no limit).
func TestEndpointSettingsSent(t *testing.T) {
	t.Parallel()
	const ep = `{"id":"ep_1","url":"https://x.example/h","disabled":false,"headers":{"X-Key":"********"},"recovery_window":"10m","rate_limit":5,
		"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/endpoints":       reply(http.StatusCreated, ep),
		"PATCH /v1/endpoints/ep_1": reply(http.StatusOK, ep),
	})
	ctx := context.Background()
	created, err := c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://x.example/h",
		Headers: map[string]string{"X-Key": "k"}, RecoveryWindow: client.DurationOf(10 * time.Minute), RateLimit: 5})
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://x.example/h","headers":{"X-Key":"k"},"recovery_window":"10m0s","rate_limit":5}`, s.last().body)
	require.Equal(t, map[string]string{"X-Key": "********"}, created.Headers)
	require.Equal(t, "10m", created.RecoveryWindow)
	require.Equal(t, 5.0, created.RateLimit)

	var none map[string]string
	server, unlimited, timeout := client.Duration(""), client.Rate(0), client.Duration("2s")
	_, err = c.EndpointUpdate(ctx, "ep_1", client.EndpointUpdateRequest{Headers: &none, RecoveryWindow: &server, Timeout: &timeout, RateLimit: &unlimited})
	require.NoError(t, err)
	require.JSONEq(t, `{"headers":null,"recovery_window":null,"timeout":"2s","rate_limit":null}`, s.last().body)

	_, err = c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://x.example/h", CircuitFailureThreshold: 3, AutoReplay: true, DisableAfter: "48h"})
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://x.example/h","circuit_failure_threshold":3,"auto_replay":true,"disable_after":"48h"}`, s.last().body)
	def, off, after := client.Threshold(0), false, client.Duration("")
	_, err = c.EndpointUpdate(ctx, "ep_1", client.EndpointUpdateRequest{CircuitFailureThreshold: &def, AutoReplay: &off, DisableAfter: &after})
	require.NoError(t, err)
	require.JSONEq(t, `{"circuit_failure_threshold":null,"auto_replay":false,"disable_after":null}`, s.last().body)

	_, err = c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://x.example/h", CircuitFailureRate: 25, CircuitWindow: "2m", CircuitMinAttempts: 40})
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://x.example/h","circuit_failure_rate":25,"circuit_window":"2m","circuit_min_attempts":40}`, s.last().body)
	_, err = c.EndpointUpdate(ctx, "ep_1", client.EndpointUpdateRequest{CircuitFailureRate: &def, CircuitWindow: &after, CircuitMinAttempts: &def})
	require.NoError(t, err)
	require.JSONEq(t, `{"circuit_failure_rate":null,"circuit_window":null,"circuit_min_attempts":null}`, s.last().body)
}

func TestEndpointListAllFollowsTheCursor(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/endpoints": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("cursor") == "" {
				reply(http.StatusOK, `{"items":[{"id":"ep_a","url":"https://a.example/","event_types":["order.*"]}],"next_cursor":"c1"}`)(w, r)
				return
			}
			reply(http.StatusOK, `{"items":[{"id":"ep_b","url":"https://b.example/"}]}`)(w, r)
		},
	})
	all, err := c.EndpointListAll(context.Background(), client.EndpointListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, []string{"order.*"}, all[0].EventTypes)
	require.Nil(t, all[1].EventTypes, "every type")
	require.Equal(t, "cursor=c1&limit=1", s.last().query)
}

func TestStatsEndpointsAllFollowsTheCursor(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/stats/endpoints": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("cursor") == "" {
				reply(http.StatusOK, `{"endpoints":[{"endpoint_id":"ep_a","attempts":3}],"next_cursor":"c1"}`)(w, r)
				return
			}
			reply(http.StatusOK, `{"endpoints":[{"endpoint_id":"ep_b"}]}`)(w, r)
		},
	})
	page, err := c.StatsEndpoints(context.Background(), client.StatsEndpointsOptions{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "c1", page.NextCursor)
	require.Equal(t, "limit=1", s.last().query)
	all, err := c.StatsEndpointsAll(context.Background(), client.StatsEndpointsOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.EqualValues(t, 3, all[0].Attempts)
	require.Equal(t, "ep_b", all[1].EndpointID)
	require.Equal(t, "cursor=c1&limit=1", s.last().query)
}

func TestStatsTop(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"GET /v1/stats": reply(http.StatusOK, `{"queued":1,"in_flight":2,"delivered_last_5m":3,"dead_letters_open":4,"oldest_lag_seconds":5.5,
			"blocked_correlations":{"count":0,"top":[]},"cleaner":{"started_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z",
			"payloads_pruned":7,"attempts_deleted":8,"keys_deleted":9}}`),
	})
	st, err := c.Stats(context.Background(), client.StatsParams{Top: new(0)})
	require.NoError(t, err)
	require.Equal(t, "top=0", s.last().query)
	require.EqualValues(t, 4, st.DeadLettersOpen)
	require.NotNil(t, st.Cleaner)
	require.EqualValues(t, 9, st.Cleaner.KeysDeleted)
	_, err = c.Stats(context.Background(), client.StatsParams{})
	require.NoError(t, err)
	require.Empty(t, s.last().query)
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	s, c := newStub(t, map[string]http.HandlerFunc{
		"POST /v1/api-keys": reply(http.StatusCreated, `{"id":"key_1","name":"billing","scopes":["events:write"],"key":"hfk_x","created_at":"2026-01-02T03:04:05Z"}`),
		"GET /v1/api-keys":  reply(http.StatusOK, `{"items":[{"id":"key_1","name":"billing","scopes":["events:write"],"created_at":"2026-01-02T03:04:05Z","revoked_at":"2026-01-03T03:04:05Z"}]}`),
	})
	k, err := c.APIKeyCreate(context.Background(), client.APIKeyCreateRequest{Name: "billing", Scopes: []client.Scope{client.ScopeEventsWrite}})
	require.NoError(t, err)
	require.Equal(t, "hfk_x", k.Key)
	require.JSONEq(t, `{"name":"billing","scopes":["events:write"]}`, s.last().body)
	keys, err := c.APIKeyList(context.Background())
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.False(t, keys[0].RevokedAt.IsZero())
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "http://h/?x=1", "://bad"} {
		_, err := client.New(base, token)
		require.Error(t, err, base)
		require.NotContains(t, err.Error(), token)
	}
	_, err := client.New("http://127.0.0.1:8080", "")
	require.Error(t, err)
	c, err := client.New("https://hooks.example.com/hookflow/", token)
	require.NoError(t, err)
	require.Equal(t, "https://hooks.example.com/hookflow", c.BaseURL())
}
