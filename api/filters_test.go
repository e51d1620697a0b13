package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/kit/intake"
)

// TestEndpointFilter: a filter is stored in its canonical form and shown;
// a PATCH that leaves it out keeps it, null removes it; a filter that does
// not compile is a 422 naming its path, and changes nothing, at creation
// as on a PATCH.
func TestEndpointFilter(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 64 << 10 })
	raw := b.call(t, http.MethodPost, "/v1/endpoints",
		`{"url":"https://example.com/big","event_types":["order.*"],"filter":{ "data": {"amount": {"$gte": 1000.50}} }}`, http.StatusCreated)
	var ep struct {
		ID     string          `json:"id"`
		Filter json.RawMessage `json:"filter"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &ep))
	require.JSONEq(t, `{"data":{"amount":{"$gte":1000.50}}}`, string(ep.Filter))
	require.Contains(t, raw, "1000.50", "numbers are kept as written")
	path := "/v1/endpoints/" + ep.ID
	require.Contains(t, b.call(t, http.MethodGet, path, "", http.StatusOK), `"filter":{"data":{"amount":{"$gte":1000.50}}}`)
	require.Contains(t, b.call(t, http.MethodPatch, path, `{"disabled":false}`, http.StatusOK), `"filter":`, "left out: unchanged")

	for body, field := range map[string]string{
		`{"filter":{"data":{"amount":{"$gt":true}}}}`:   "filter.data.amount.$gt",
		`{"filter":{"body":{"a":1}}}`:                   "filter.body",
		`{"filter":{"$or":[{"data":{"a":1}},{"x":1}]}}`: "filter.$or[1].x",
		`{"filter":{}}`:                        "filter",
		`{"filter":{"data":{"a":{"$in":[]}}}}`: "filter.data.a.$in",
	} {
		before := b.endpointRows(t)
		resp, answer := b.do(t, http.MethodPatch, path, "application/json", strings.Replace(body, "{", `{"disabled":true,`, 1), b.bearer())
		requireProblem(t, resp, answer, http.StatusUnprocessableEntity, field)
		require.Equal(t, before, b.endpointRows(t), "a refused PATCH changes nothing: %s", body)
		resp, answer = b.do(t, http.MethodPost, "/v1/endpoints", "application/json",
			strings.Replace(body, "{", `{"url":"https://example.com/refused",`, 1), b.bearer())
		requireProblem(t, resp, answer, http.StatusUnprocessableEntity, field)
		require.Equal(t, before, b.endpointRows(t), "a refused create stores nothing: %s", body)
	}
	big := fmt.Sprintf(`{"filter":{"data":{"a":%q}}}`, strings.Repeat("x", 5000))
	resp, answer := b.do(t, http.MethodPatch, path, "application/json", big, b.bearer())
	requireProblem(t, resp, answer, http.StatusUnprocessableEntity, "filter")

	require.NotContains(t, b.call(t, http.MethodPatch, path, `{"filter":null}`, http.StatusOK), `"filter"`, "null removes it")
}

// TestEventFilteredOut: an event a filter leaves out is answered, and
// shown, with the endpoint named in filtered_out and no delivery to it;
// its metadata is kept and shown; metadata that is not an object, or
// larger than its cap, is refused and nothing is stored.
func TestEventFilteredOut(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 64 << 10 })
	raw := b.call(t, http.MethodPost, "/v1/endpoints",
		`{"url":"https://example.com/eu","event_types":["order.*"],"filter":{"metadata":{"region":"eu"}}}`, http.StatusCreated)
	var ep struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &ep))
	// The bundle's own endpoint takes every type, unfiltered.
	post := func(id string, seq int, metadata string) string {
		body := fmt.Sprintf(`{"id":%q,"correlation_id":"c-filter","sequence":%d,"type":"order.created","data":{"n":%d}%s}`, id, seq, seq, metadata)
		return b.call(t, http.MethodPost, "/v1/events", body, http.StatusAccepted)
	}
	var got struct {
		Deliveries []struct {
			EndpointID string `json:"endpoint_id"`
		} `json:"deliveries"`
		FilteredOut []string        `json:"filtered_out"`
		Metadata    json.RawMessage `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(post("us", 1, `,"metadata":{"region":"us"}`)), &got))
	require.Equal(t, []string{ep.ID}, got.FilteredOut)
	require.Len(t, got.Deliveries, 1)
	require.Equal(t, b.endpointID, got.Deliveries[0].EndpointID)
	got.FilteredOut = nil
	require.NoError(t, json.Unmarshal([]byte(b.call(t, http.MethodGet, "/v1/events/us", "", http.StatusOK)), &got))
	require.Equal(t, []string{ep.ID}, got.FilteredOut)
	require.JSONEq(t, `{"region":"us"}`, string(got.Metadata))

	got.FilteredOut = nil
	require.NoError(t, json.Unmarshal([]byte(post("eu", 2, `,"metadata":{"region":"eu"}`)), &got))
	require.Empty(t, got.FilteredOut)
	require.Len(t, got.Deliveries, 2)

	for metadata, detail := range map[string]string{
		`,"metadata":["eu"]`: "metadata must be an object",
		fmt.Sprintf(`,"metadata":{"a":%q}`, strings.Repeat("x", intake.MaxMetadataBytes)): "at most 4096 bytes",
	} {
		resp, answer := b.do(t, http.MethodPost, "/v1/events", "application/json",
			fmt.Sprintf(`{"id":"refused","correlation_id":"c-filter","sequence":3,"type":"order.created","data":{}%s}`, metadata), b.bearer())
		p := requireProblem(t, resp, answer, http.StatusBadRequest, "metadata")
		require.Contains(t, p["detail"], detail)
		b.call(t, http.MethodGet, "/v1/events/refused", "", http.StatusNotFound)
	}
}

// TestStoredFilterCompilesAsWritten: a filter at its size cap whose
// numbers a jsonb column would spell out in full (1e99 as a hundred
// digits) is kept as written, so events of its types are still accepted
// and judged by it.
func TestStoredFilterCompilesAsWritten(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 64 << 10 })
	in := strings.TrimSuffix(strings.Repeat("1e99,", 50), ",")
	b.call(t, http.MethodPost, "/v1/endpoints",
		`{"url":"https://example.com/huge","event_types":["order.*"],"filter":{"data":{"n":{"$in":[`+in+`]}}}}`, http.StatusCreated)
	raw := b.call(t, http.MethodPost, "/v1/events", `{"id":"huge-1","correlation_id":"c-huge","sequence":1,"type":"order.created","data":{"n":1e99}}`, http.StatusAccepted)
	require.NotContains(t, raw, "filtered_out", "1e99 is in the filter's list")
	raw = b.call(t, http.MethodPost, "/v1/events", `{"id":"huge-2","correlation_id":"c-huge","sequence":2,"type":"order.created","data":{"n":2}}`, http.StatusAccepted)
	require.Contains(t, raw, "filtered_out")
}
