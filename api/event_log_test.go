package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
)

// eventPage is a page of GET /v1/events, as its ids and deliveries.
type eventPage struct {
	Items []struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		Deliveries []struct {
			EndpointID string `json:"endpoint_id"`
		} `json:"deliveries"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func (b *bundle) eventPage(t *testing.T, query url.Values) eventPage {
	t.Helper()
	var p eventPage
	require.NoError(t, json.Unmarshal([]byte(b.call(t, http.MethodGet, "/v1/events?"+query.Encode(), "", http.StatusOK)), &p))
	return p
}

func (p eventPage) ids() []string {
	out := []string{}
	for _, it := range p.Items {
		out = append(out, it.ID)
	}
	return out
}

// TestEventLog: GET /v1/events lists the tenant's events newest first, by
// correlation, type and endpoint, pages through them all by its cursor,
// leaves voided sequences out, and refuses a cursor it did not give.
func TestEventLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := b.endpointCall(t, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/other"}`, http.StatusCreated)
	post := func(with map[string]string) {
		t.Helper()
		b.call(t, http.MethodPost, "/v1/events", eventBody(b.endpointID, with), http.StatusAccepted)
	}
	post(map[string]string{"id": `"e1"`, "correlation_id": `"log-a"`, "type": `"order.created"`})
	post(map[string]string{"id": `"e2"`, "correlation_id": `"log-a"`, "sequence": "2", "endpoint_id": `"` + other.ID + `"`})
	post(map[string]string{"id": `"e3"`, "correlation_id": `"log-b"`, "endpoint_id": "-"}) // to every endpoint: both
	b.call(t, http.MethodPost, "/v1/endpoints/"+b.endpointID+"/test", "", http.StatusAccepted)
	b.call(t, http.MethodPost, "/v1/correlations/log-a/skip", `{"sequences":[3],"note":"lost"}`, http.StatusOK)
	test := store.TestEventID(b.endpointID, 1)

	all := b.eventPage(t, nil)
	require.Equal(t, []string{test, "e3", "e2", "e1"}, all.ids(), "newest first; the voided 3 is no event")
	require.Len(t, all.Items[1].Deliveries, 2)
	require.Empty(t, all.NextCursor)
	for q, want := range map[string][]string{
		"correlation_id=log-a":                    {"e2", "e1"},
		"type=order.updated":                      {"e3", "e2"},
		"type=hookflow.test":                      {test},
		"endpoint_id=" + other.ID:                 {"e3", "e2"},
		"endpoint_id=" + b.endpointID:             {test, "e3", "e1"},
		"correlation_id=log-a&type=order.created": {"e1"},
		"correlation_id=nosuch":                   {},
	} {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		require.Equal(t, want, b.eventPage(t, v).ids(), q)
	}

	// Page by page, one at a time: the same events, in the same order.
	var walked []string
	v := url.Values{"limit": {"1"}}
	for range 10 {
		p := b.eventPage(t, v)
		walked = append(walked, p.ids()...)
		if p.NextCursor == "" {
			break
		}
		v.Set("cursor", p.NextCursor)
	}
	require.Equal(t, all.ids(), walked)

	for q, field := range map[string]string{"cursor=bm9wZQ": "cursor", "limit=201": "limit", "limit=0": "limit", "state=delivered": "state"} {
		resp, raw := b.do(t, http.MethodGet, "/v1/events?"+q, "", "", b.bearer())
		requireProblem(t, resp, raw, http.StatusBadRequest, field)
	}
}
