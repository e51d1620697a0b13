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

// TestEventTypesSeen: GET /v1/event-types lists each type once, in name
// order, with its latest event and that event's payload as a sample; a
// payload over 8 KiB or pruned has none, and voided sequences are no type.
func TestEventTypesSeen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(with map[string]string) {
		t.Helper()
		b.call(t, http.MethodPost, "/v1/events", eventBody(b.endpointID, with), http.StatusAccepted)
	}
	post(map[string]string{"id": `"t1"`, "correlation_id": `"types"`, "type": `"order.paid"`, "data": `{"n":1}`})
	post(map[string]string{"id": `"t2"`, "correlation_id": `"types"`, "sequence": "2", "type": `"order.paid"`, "data": `{"n":2}`})
	post(map[string]string{"id": `"t3"`, "correlation_id": `"types"`, "sequence": "3", "type": `"user.big"`})
	post(map[string]string{"id": `"t4"`, "correlation_id": `"types"`, "sequence": "4", "type": `"user.pruned"`})
	b.call(t, http.MethodPost, "/v1/correlations/types/skip", `{"sequences":[5]}`, http.StatusOK)
	_, err := b.pool.Exec(t.Context(), `UPDATE events SET data = jsonb_build_object('big', repeat('x', 9000)) WHERE id = 't3'`)
	require.NoError(t, err)
	_, err = b.pool.Exec(t.Context(), `UPDATE events SET data = NULL WHERE id = 't4'`)
	require.NoError(t, err)

	var page struct {
		Items []struct {
			Type        string          `json:"type"`
			LastEventID string          `json:"last_event_id"`
			Sample      json.RawMessage `json:"sample"`
			SampleBytes int             `json:"sample_bytes"`
		} `json:"items"`
		More bool `json:"more"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.call(t, http.MethodGet, "/v1/event-types", "", http.StatusOK)), &page))
	require.False(t, page.More)
	require.Len(t, page.Items, 3, "order.paid once; the voided 5 is no type")
	paid, big, pruned := page.Items[0], page.Items[1], page.Items[2]
	require.Equal(t, "order.paid", paid.Type)
	require.Equal(t, "t2", paid.LastEventID, "the latest")
	require.JSONEq(t, `{"n":2}`, string(paid.Sample))
	require.Equal(t, "user.big", big.Type)
	require.Nil(t, big.Sample, "over 8 KiB: no sample")
	require.Greater(t, big.SampleBytes, 9000)
	require.Equal(t, "user.pruned", pruned.Type)
	require.Nil(t, pruned.Sample)
	require.Zero(t, pruned.SampleBytes)
}
