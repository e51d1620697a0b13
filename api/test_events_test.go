package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/store"
)

// TestEndpointTestEvent: POST /v1/endpoints/{id}/test stores a hookflow.test
// event addressed to that endpoint alone, in its own correlation at the
// next sequence (contiguous under concurrent tests), and starts its
// workflow; a disabled endpoint is 409 and an unknown one 404, with nothing
// stored; events:test and events:write keys may send it, and events:test
// does not publish.
func TestEndpointTestEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := b.endpointCall(t, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/other"}`, http.StatusCreated)
	path := "/v1/endpoints/" + b.endpointID + "/test"

	var acc struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		Deliveries []struct {
			EndpointID string `json:"endpoint_id"`
		} `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.call(t, http.MethodPost, path, "", http.StatusAccepted)), &acc))
	require.Equal(t, store.TestEventID(b.endpointID, 1), acc.ID)
	require.Equal(t, "waiting", acc.State)
	require.Len(t, acc.Deliveries, 1, "to this endpoint only, though another takes every type")
	require.Equal(t, b.endpointID, acc.Deliveries[0].EndpointID)
	require.EqualValues(t, 1, b.starter.calls.Load(), "its workflow is started")

	var ev struct {
		Type          string `json:"type"`
		CorrelationID string `json:"correlation_id"`
		Sequence      int64  `json:"sequence"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.call(t, http.MethodGet, "/v1/events/"+acc.ID, "", http.StatusOK)), &ev))
	require.Equal(t, store.TestEventType, ev.Type)
	require.Equal(t, store.TestCorrelation(b.endpointID), ev.CorrelationID)
	require.EqualValues(t, 1, ev.Sequence)

	// Concurrent tests take the next sequences, none twice, none skipped.
	const n = 8
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, raw := b.do(t, http.MethodPost, path, "", "", b.bearer())
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("test %d: %d %s", i, resp.StatusCode, raw)
				return
			}
			var a struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(raw), &a); err != nil {
				t.Error(err)
			}
			ids[i] = a.ID
		})
	}
	wg.Wait()
	var want []string
	for seq := int64(2); seq <= n+1; seq++ {
		want = append(want, store.TestEventID(b.endpointID, seq))
	}
	slices.Sort(ids)
	slices.Sort(want)
	require.Equal(t, want, ids)

	// Each endpoint's tests are a correlation of their own.
	require.NoError(t, json.Unmarshal([]byte(b.call(t, http.MethodPost, "/v1/endpoints/"+other.ID+"/test", "", http.StatusAccepted)), &acc))
	require.Equal(t, store.TestEventID(other.ID, 1), acc.ID)

	events := b.count(t, "events")
	b.endpointCall(t, http.MethodPatch, "/v1/endpoints/"+other.ID, `{"disabled":true}`, http.StatusOK)
	resp, raw := b.do(t, http.MethodPost, "/v1/endpoints/"+other.ID+"/test", "", "", b.bearer())
	require.Equal(t, "https://hookflow.dev/problems/endpoint-disabled", requireProblem(t, resp, raw, http.StatusConflict, "")["type"])
	resp, raw = b.do(t, http.MethodPost, "/v1/endpoints/ep_nosuch/test", "", "", b.bearer())
	requireProblem(t, resp, raw, http.StatusNotFound, "")
	require.Equal(t, events, b.count(t, "events"), "a refused test stores nothing")

	// Scopes: events:test and events:write send it; events:read does not;
	// events:test does not publish.
	_, tester := b.createKey(t, "tester", api.ScopeEventsTest)
	_, writer := b.createKey(t, "writer", api.ScopeEventsWrite)
	_, reader := b.createKey(t, "reader", api.ScopeEventsRead)
	for _, key := range []string{tester, writer} {
		resp, raw := b.do(t, http.MethodPost, path, "", "", bearer(key))
		require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	}
	resp, raw = b.do(t, http.MethodPost, path, "", "", bearer(reader))
	require.Equal(t, string(api.ScopeEventsTest), requireProblem(t, resp, raw, http.StatusForbidden, "")["scope"])
	resp, raw = b.do(t, http.MethodPost, "/v1/events", "application/json",
		fmt.Sprintf(`{"id":"e1","correlation_id":"c1","sequence":1,"type":"t.x","data":{},"endpoint_id":%q}`, b.endpointID), bearer(tester))
	require.Equal(t, string(api.ScopeEventsWrite), requireProblem(t, resp, raw, http.StatusForbidden, "")["scope"])
}
