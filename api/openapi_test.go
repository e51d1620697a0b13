package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
)

type openAPIDoc struct {
	OpenAPI string `json:"openapi"`
	Paths   map[string]map[string]struct {
		Security    *[]map[string][]string     `json:"security"`
		RequestBody *json.RawMessage           `json:"requestBody"`
		Responses   map[string]json.RawMessage `json:"responses"`
	} `json:"paths"`
}

// fullServer is the API with every optional route on (metrics). It never
// touches the database: the pool connects lazily and no handler runs.
func fullServer(t *testing.T) *api.Server {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := store.New(pool)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := metrics.New(prometheus.NewRegistry(), logger)
	require.NoError(t, err)
	srv, err := api.New(api.RouterConfig{Token: testToken()}, api.RouterDeps{
		Store: st, Pool: pool, Starter: &recordingStarter{}, Temporal: fakeTemporal{}, Logger: logger, Metrics: m,
	})
	require.NoError(t, err)
	return srv
}

func loadDoc(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(api.OpenAPIDocument(), &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	return doc
}

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPIMatchesRoutes walks Echo's routes: every route is documented
// and every documented operation is routed.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := loadDoc(t)
	srv := fullServer(t)

	routed := map[string]bool{}
	for _, r := range srv.Echo().Routes() {
		if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, r.Method) {
			continue
		}
		path := echoParam.ReplaceAllString(r.Path, "{$1}")
		key := r.Method + " " + path
		routed[key] = true
		ops, ok := doc.Paths[path]
		require.True(t, ok, "route %s is not in openapi.json", key)
		_, ok = ops[strings.ToLower(r.Method)]
		require.True(t, ok, "route %s is not in openapi.json", key)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			key := strings.ToUpper(method) + " " + path
			documented = append(documented, key)
			require.True(t, routed[key], "openapi.json documents %s but no route serves it", key)
		}
	}
	sort.Strings(documented)
	require.Len(t, documented, len(routed))
}

// TestOpenAPIDocumentsStatuses checks each operation lists the statuses its
// handler answers (those the bad-input, security and e2e tests observe),
// plus the ones every /v1 call or body-taking call can get.
func TestOpenAPIDocumentsStatuses(t *testing.T) {
	t.Parallel()
	doc := loadDoc(t)
	observed := map[string][]int{
		"GET /healthz":                                          {200},
		"GET /readyz":                                           {200, 503},
		"GET /openapi.json":                                     {200},
		"POST /v1/endpoints":                                    {201, 400, 401, 403, 413, 415, 429},
		"GET /v1/endpoints":                                     {200, 400, 401, 403, 429},
		"GET /v1/endpoints/{id}":                                {200, 400, 401, 403, 404, 429},
		"GET /v1/endpoints/{id}/stats":                          {200, 400, 401, 403, 404, 429},
		"GET /v1/endpoints/{id}/url-changes":                    {200, 400, 401, 403, 404, 429},
		"PATCH /v1/endpoints/{id}":                              {200, 400, 401, 403, 404, 413, 415, 422, 429},
		"POST /v1/endpoints/{id}/rotate-secret":                 {200, 400, 401, 403, 404, 429},
		"DELETE /v1/endpoints/{id}":                             {200, 400, 401, 403, 404, 429},
		"POST /v1/events":                                       {200, 202, 400, 401, 403, 404, 409, 413, 415, 422, 429},
		"GET /v1/events/{id}":                                   {200, 400, 401, 403, 404, 429},
		"GET /v1/events/{id}/deliveries/{endpoint_id}/attempts": {200, 400, 401, 403, 404, 429},
		"GET /v1/correlations/{id}":                             {200, 400, 401, 403, 404, 429},
		"POST /v1/correlations/{id}/skip":                       {200, 400, 401, 403, 413, 415, 422, 429, 503},
		"GET /v1/dead-letters":                                  {200, 400, 401, 403, 429},
		"POST /v1/dead-letters/replay":                          {202, 400, 401, 403, 429, 503},
		"GET /v1/dead-letters/{id}":                             {200, 400, 401, 403, 404, 429},
		"POST /v1/dead-letters/{id}/replay":                     {202, 400, 401, 403, 404, 409, 413, 415, 429, 503},
		"POST /v1/dead-letters/{id}/skip":                       {202, 400, 401, 403, 404, 409, 413, 415, 429, 503},
		"GET /v1/stats":                                         {200, 400, 401, 403, 429},
		"GET /v1/stats/endpoints":                               {200, 400, 401, 403, 429},
		"POST /v1/api-keys":                                     {201, 400, 401, 403, 413, 415, 422, 429},
		"GET /v1/api-keys":                                      {200, 401, 403, 429},
		"DELETE /v1/api-keys/{id}":                              {200, 400, 401, 403, 404, 429},
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			want, ok := observed[key]
			require.True(t, ok, "no status table entry for %s: add what its handler answers", key)
			if strings.HasPrefix(path, "/v1/") {
				require.Contains(t, want, 401, key)
				require.Nil(t, op.Security, "%s: /v1 operations use the document's bearer security", key)
			} else {
				require.NotNil(t, op.Security, "%s: must declare security: [] (no token)", key)
			}
			if op.RequestBody != nil {
				require.Subset(t, want, []int{400, 413, 415}, key)
			}
			for _, code := range want {
				require.Contains(t, op.Responses, strconv.Itoa(code), "%s does not document %d", key, code)
			}
		}
	}
}

// TestOpenAPIServedWithoutToken fetches GET /openapi.json with no token.
func TestOpenAPIServedWithoutToken(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(fullServer(t).Handler())
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.JSONEq(t, string(api.OpenAPIDocument()), string(body))
}

// TestOpenAPIOperationsAreComplete holds every operation to what a client
// generator and a reader need (issue 34): an operationId, a summary, its
// error answers (a 4xx for every /v1 operation; the probes and the document
// take no input and no credentials), and an example of its answer and of
// its JSON request body. The document declares its servers, license and
// version. Redocly's linter (make lint-openapi) checks each example against
// its schema.
func TestOpenAPIOperationsAreComplete(t *testing.T) {
	var doc struct {
		Info struct {
			Version string `json:"version"`
			License *struct {
				Name string `json:"name"`
			} `json:"license"`
		} `json:"info"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Summary     string `json:"summary"`
			RequestBody *struct {
				Content map[string]struct {
					Example json.RawMessage `json:"example"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]struct {
					Example json.RawMessage `json:"example"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPIDocument(), &doc))
	require.NotEmpty(t, doc.Info.Version)
	require.NotNil(t, doc.Info.License)
	require.NotEmpty(t, doc.Info.License.Name)
	require.NotEmpty(t, doc.Servers)
	ids := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			name := strings.ToUpper(method) + " " + path
			require.NotEmpty(t, op.OperationID, "%s has no operationId", name)
			require.NotContains(t, ids, op.OperationID, "%s and %s share an operationId", name, ids[op.OperationID])
			ids[op.OperationID] = name
			require.NotEmpty(t, op.Summary, "%s has no summary", name)
			has4xx, example := false, false
			for code, r := range op.Responses {
				has4xx = has4xx || strings.HasPrefix(code, "4")
				if strings.HasPrefix(code, "2") {
					if mt, ok := r.Content["application/json"]; ok && len(mt.Example) > 0 {
						example = true
					}
				}
			}
			require.True(t, has4xx || !strings.HasPrefix(path, "/v1/"), "%s documents no 4xx answer", name)
			require.True(t, example, "%s has no example of its answer", name)
			if op.RequestBody != nil {
				if mt, ok := op.RequestBody.Content["application/json"]; ok {
					require.NotEmpty(t, mt.Example, "%s has no example of its request body", name)
				}
			}
		}
	}
}
