package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
)

// createKey makes an API key through the API (as the bootstrap admin) and
// returns its id and secret.
func (b *bundle) createKey(t *testing.T, name string, scopes ...api.Scope) (id, key string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"name": name, "scopes": scopes})
	require.NoError(t, err)
	resp, raw := b.do(t, http.MethodPost, "/v1/api-keys", "application/json", string(body), b.bearer())
	require.Equal(t, http.StatusCreated, resp.StatusCode, raw)
	var k struct {
		ID     string   `json:"id"`
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
		Key    string   `json:"key"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &k))
	require.Equal(t, name, k.Name)
	require.True(t, strings.HasPrefix(k.Key, api.KeyPrefix), k.Key)
	return k.ID, k.Key
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// routeScopes is the scope every /v1 route needs (admin may do anything).
// TestScopeMatrix fails when a route is missing here, so a new route has to
// say what it needs.
var routeScopes = map[string]api.Scope{
	"POST /v1/endpoints":                                  api.ScopeEndpointsWrite,
	"GET /v1/endpoints":                                   api.ScopeEventsRead,
	"GET /v1/endpoints/:id":                               api.ScopeEventsRead,
	"GET /v1/endpoints/:id/stats":                         api.ScopeEventsRead,
	"GET /v1/endpoints/:id/url-changes":                   api.ScopeAdmin,
	"PATCH /v1/endpoints/:id":                             api.ScopeEndpointsWrite,
	"POST /v1/endpoints/:id/rotate-secret":                api.ScopeEndpointsWrite,
	"DELETE /v1/endpoints/:id":                            api.ScopeEndpointsWrite,
	"POST /v1/endpoints/:id/test":                         api.ScopeEventsTest,
	"POST /v1/correlations/:id/skip":                      api.ScopeDeadLettersWrite,
	"POST /v1/events":                                     api.ScopeEventsWrite,
	"GET /v1/events":                                      api.ScopeEventsRead,
	"GET /v1/event-types":                                 api.ScopeEventsRead,
	"GET /v1/event-types/:name":                           api.ScopeEventsRead,
	"PUT /v1/event-types/:name":                           api.ScopeEndpointsWrite,
	"DELETE /v1/event-types/:name":                        api.ScopeEndpointsWrite,
	"POST /v1/event-types/import":                         api.ScopeEndpointsWrite,
	"GET /v1/events/:id":                                  api.ScopeEventsRead,
	"GET /v1/correlations/:id":                            api.ScopeEventsRead,
	"GET /v1/dead-letters":                                api.ScopeEventsRead,
	"POST /v1/dead-letters/replay":                        api.ScopeDeadLettersWrite,
	"GET /v1/dead-letters/:id":                            api.ScopeEventsRead,
	"POST /v1/dead-letters/:id/replay":                    api.ScopeDeadLettersWrite,
	"POST /v1/dead-letters/:id/skip":                      api.ScopeDeadLettersWrite,
	"GET /v1/stats":                                       api.ScopeEventsRead,
	"GET /v1/stats/endpoints":                             api.ScopeEventsRead,
	"GET /v1/events/:id/deliveries/:endpoint_id/attempts": api.ScopeEventsRead,
	"POST /v1/api-keys":                                   api.ScopeTenantsWrite,
	"GET /v1/api-keys":                                    api.ScopeAdmin,
	"DELETE /v1/api-keys/:id":                             api.ScopeAdmin,
	"PUT /v1/tenants/:id":                                 api.ScopeTenantsWrite,
	"GET /v1/tenants/:id":                                 api.ScopeTenantsWrite,
	"PATCH /v1/tenants/:id":                               api.ScopeTenantsWrite,
	"GET /v1/tenants":                                     api.ScopeTenantsWrite,
	"GET /v1/tenants/:id/stats":                           api.ScopeTenantsWrite,
	"GET /v1/stats/tenants":                               api.ScopeTenantsWrite,
	"POST /v1/tenants/:id/portal-sessions":                api.ScopeTenantsWrite,
	"DELETE /v1/tenants/:id/portal-sessions":              api.ScopeTenantsWrite,
	"DELETE /v1/tenants/:id/portal-sessions/:sid":         api.ScopeTenantsWrite,
	// Every credential may run these (and the code exchange needs none).
	"POST /v1/portal/session": anyScope,
	"GET /v1/session":         anyScope,
}

// anyScope marks a route that names no scope: every key may run it.
const anyScope api.Scope = ""

// TestScopeMatrix: every /v1 route with a key of every scope: allowed (the
// route's scope, or admin) or 403 naming the scope the route needs.
func TestScopeMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keys := map[api.Scope]string{}
	for _, sc := range api.Scopes() {
		_, keys[sc] = b.createKey(t, "only "+string(sc), sc)
	}
	var routes []string
	for _, r := range b.server.Echo().Routes() {
		if strings.HasPrefix(r.Path, "/v1/") {
			routes = append(routes, r.Method+" "+r.Path)
		}
	}
	require.NotEmpty(t, routes)
	for _, route := range routes {
		need, ok := routeScopes[route]
		require.True(t, ok, "route %s has no entry in routeScopes: say which scope it needs", route)
		method, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(path, ":id", "nosuch_1")
		for _, sc := range api.Scopes() {
			resp, body := b.do(t, method, path, "application/json", "{}", bearer(keys[sc]))
			// events:write includes events:test: whoever may publish may test.
			allowed := need == anyScope || sc == need || sc == api.ScopeAdmin || need == api.ScopeEventsTest && sc == api.ScopeEventsWrite
			if allowed {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode,
					"%s with %s: %s", route, sc, body)
				continue
			}
			p := requireProblem(t, resp, body, http.StatusForbidden, "")
			require.Equal(t, string(need), p["scope"], "%s with %s", route, sc)
			require.Contains(t, p["detail"], string(need))
		}
	}
}

// TestRevokedKeyIsRefusedAtOnceEverywhere: a revoked key gets 401 on its
// next request, from this API process and from another one on the same
// database.
func TestRevokedKeyIsRefusedAtOnceEverywhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := httptest.NewServer(b.newServer(t, nil).Handler())
	t.Cleanup(other.Close)
	id, key := b.createKey(t, "reader", api.ScopeEventsRead)
	for _, base := range []string{b.url, other.URL} {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/stats", nil)
		req.Header = bearer(key)
		resp, body := send(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	resp, body := b.do(t, http.MethodDelete, "/v1/api-keys/"+id, "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"revoked_at"`)
	for _, base := range []string{b.url, other.URL} {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/stats", nil)
		req.Header = bearer(key)
		resp, body := send(t, req)
		requireProblem(t, resp, body, http.StatusUnauthorized, "")
	}
	// Listed, as revoked.
	resp, body = b.do(t, http.MethodGet, "/v1/api-keys", "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var listed struct {
		Items []struct {
			ID        string     `json:"id"`
			Name      string     `json:"name"`
			Scopes    []string   `json:"scopes"`
			CreatedAt *time.Time `json:"created_at"`
			RevokedAt *time.Time `json:"revoked_at"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &listed))
	require.Len(t, listed.Items, 1, body)
	k := listed.Items[0]
	require.Equal(t, []any{id, "reader", []string{"events:read"}}, []any{k.ID, k.Name, k.Scopes}, body)
	require.NotNil(t, k.CreatedAt, body)
	require.NotNil(t, k.RevokedAt, body)
}

// TestKeySecretIsShownOnce: after its creation, a key's secret appears in
// no log line, no database column and no answer of the API.
func TestKeySecretIsShownOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, key := b.createKey(t, "writer", api.ScopeEventsWrite, api.ScopeEventsRead)
	// Use it, fail with it, revoke it: everything that might log it.
	resp, body := b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, nil), bearer(key))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	resp, _ = b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/x"}`, bearer(key))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = b.do(t, http.MethodGet, "/v1/stats", "", "", bearer(key+"x"))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	var answers []string
	for _, path := range []string{"/v1/api-keys", "/v1/events/evt_1"} {
		_, body := b.do(t, http.MethodGet, path, "", "", b.bearer())
		answers = append(answers, body)
	}
	_, body = b.do(t, http.MethodDelete, "/v1/api-keys/"+id, "", "", b.bearer())
	answers = append(answers, body)

	secret := strings.TrimPrefix(key, api.KeyPrefix)
	for _, a := range answers {
		require.NotContains(t, a, secret)
	}
	require.Contains(t, b.logs.String(), "api key created", "the log was captured")
	require.NotContains(t, b.logs.String(), secret)
	for _, table := range b.tables(t) {
		rows, err := b.pool.Query(context.Background(), fmt.Sprintf("SELECT row_to_json(t)::text FROM %s t", table))
		require.NoError(t, err)
		for rows.Next() {
			var row string
			require.NoError(t, rows.Scan(&row))
			require.NotContains(t, row, secret, "table %s", table)
		}
		require.NoError(t, rows.Err())
	}
}

// tables lists every table of the bundle's database.
func (b *bundle) tables(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, out, "api_keys")
	return out
}

// TestEventsRateLimitPerKey: past its rate, a key's posts are answered 429
// with Retry-After and nothing is stored; another key is not held back.
func TestEventsRateLimitPerKey(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.EventsPerSecond, c.EventsBurst = 0.01, 2 })
	_, first := b.createKey(t, "first", api.ScopeEventsWrite)
	_, second := b.createKey(t, "second", api.ScopeEventsWrite)
	post := func(key, id string) (*http.Response, string) {
		return b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, map[string]string{"id": `"` + id + `"`, "correlation_id": `"c-` + id + `"`}), bearer(key))
	}
	for _, id := range []string{"evt_a", "evt_b"} {
		resp, body := post(first, id)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	}
	resp, body := post(first, "evt_c")
	requireProblem(t, resp, body, http.StatusTooManyRequests, "")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, 2, b.count(t, "events"), "a refused post stores nothing")
	resp, body = post(second, "evt_d")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body, "another key has its own bucket")
}

// TestKeyCreationRefusesBadInput: a key needs a name and known scopes, and
// only an admin may make one; nothing is stored otherwise.
func TestKeyCreationRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, writer := b.createKey(t, "writer", api.ScopeEventsWrite)
	before := b.count(t, "api_keys")
	for _, tc := range []struct {
		body, field string
		status      int
	}{
		{`{"scopes":["events:read"]}`, "name", 400},
		{`{"name":"  ","scopes":["events:read"]}`, "name", 400},
		{`{"name":"x","scopes":[]}`, "scopes", 400},
		{`{"name":"x","scopes":["events:delete"]}`, "scopes", 400},
		{`{"name":"x","scopes":"admin"}`, "scopes", 400},
		{`{"name":"x","scopes":["admin"],"key":"hfk_mine"}`, "key", 400},
		{`{"name":"` + strings.Repeat("n", 101) + `","scopes":["admin"]}`, "name", 400},
	} {
		resp, body := b.do(t, http.MethodPost, "/v1/api-keys", "application/json", tc.body, b.bearer())
		requireProblem(t, resp, body, tc.status, tc.field)
	}
	resp, body := b.do(t, http.MethodPost, "/v1/api-keys", "application/json", `{"name":"x","scopes":["admin"]}`, bearer(writer))
	requireProblem(t, resp, body, http.StatusForbidden, "")
	resp, body = b.do(t, http.MethodDelete, "/v1/api-keys/key_nosuch", "", "", b.bearer())
	requireProblem(t, resp, body, http.StatusNotFound, "")
	require.Equal(t, before, b.count(t, "api_keys"))
}

// TestReadsRateLimitPerKey: past its rate, a key's GETs are answered 429
// with Retry-After, before anything is read; another key, and the same
// key's posts, have buckets of their own.
func TestReadsRateLimitPerKey(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.ReadsPerSecond, c.ReadsBurst = 0.01, 2 })
	_, first := b.createKey(t, "first", api.ScopeEventsRead, api.ScopeEventsWrite)
	_, second := b.createKey(t, "second", api.ScopeEventsRead)
	get := func(key, path string) (*http.Response, string) {
		return b.do(t, http.MethodGet, path, "", "", bearer(key))
	}
	for _, path := range []string{"/v1/endpoints", "/v1/stats"} {
		resp, body := get(first, path)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	resp, body := get(first, "/v1/dead-letters")
	requireProblem(t, resp, body, http.StatusTooManyRequests, "")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, body, "may read 0.01 times per second (bursts of 2)")
	resp, body = get(second, "/v1/dead-letters")
	require.Equal(t, http.StatusOK, resp.StatusCode, body, "another key has its own bucket")
	resp, body = b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, map[string]string{"id": `"evt_r"`, "correlation_id": `"c-r"`}), bearer(first))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body, "posts have a bucket of their own")
}
