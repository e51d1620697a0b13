package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
)

// fullServer is the API with every optional route on (metrics). It never
// touches the database: the pool connects lazily and no handler runs.
func fullServer(t *testing.T) *api.Server {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := metrics.New(prometheus.NewRegistry(), logger)
	require.NoError(t, err)
	srv, err := api.New(api.RouterConfig{Token: testToken()}, api.RouterDeps{
		Store: st, Pool: pool, Starter: &recordingStarter{}, Temporal: fakeTemporal{}, Logger: logger, Metrics: m, Transports: transportsFor(t, egress.Policy{}),
	})
	require.NoError(t, err)
	return srv
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
// generator and a reader need: an operationId, a summary, its
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
