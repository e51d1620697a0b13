package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
)

type endpointJSON struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	Disabled   bool      `json:"disabled"`
	EventTypes *[]string `json:"event_types"`
}

// call sends body to path as the bootstrap admin, requires status and
// returns the answer's body.
func (b *bundle) call(t *testing.T, method, path, body string, status int) string {
	t.Helper()
	resp, raw := b.do(t, method, path, "application/json", body, b.bearer())
	require.Equal(t, status, resp.StatusCode, raw)
	return raw
}

// endpointCall sends body to path and decodes the endpoint answered.
func (b *bundle) endpointCall(t *testing.T, method, path, body string, status int) endpointJSON {
	t.Helper()
	raw := b.call(t, method, path, body, status)
	var ep endpointJSON
	require.NoError(t, json.Unmarshal([]byte(raw), &ep))
	var members map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(raw), &members))
	if ep.EventTypes == nil {
		require.NotContains(t, members, "event_types", "every type is shown as no event_types")
	}
	return ep
}

// TestEndpointEventTypes: event_types are kept as sent less repeats; a
// PATCH that leaves them out keeps them, null subscribes the endpoint to
// every type again, and a refused PATCH changes nothing at all.
func TestEndpointEventTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ep := b.endpointCall(t, http.MethodPost, "/v1/endpoints",
		`{"url":"https://example.com/typed","event_types":["order.*","user.deleted","order.*"]}`, http.StatusCreated)
	require.Equal(t, []string{"order.*", "user.deleted"}, *ep.EventTypes)
	path := "/v1/endpoints/" + ep.ID
	require.Equal(t, []string{"order.*", "user.deleted"}, *b.endpointCall(t, http.MethodGet, path, "", http.StatusOK).EventTypes)

	all := b.endpointCall(t, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/all","event_types":null}`, http.StatusCreated)
	require.Nil(t, all.EventTypes, "null on creation: every type")
	star := b.endpointCall(t, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/star","event_types":["*"]}`, http.StatusCreated)
	require.Equal(t, []string{"*"}, *star.EventTypes)

	got := b.endpointCall(t, http.MethodPatch, path, `{"disabled":true}`, http.StatusOK)
	require.True(t, got.Disabled)
	require.Equal(t, []string{"order.*", "user.deleted"}, *got.EventTypes, "left out: unchanged")

	before := b.endpointRows(t)
	resp, raw := b.do(t, http.MethodPatch, path, "application/json", `{"disabled":false,"event_types":["invoice.paid","invoice.*.x"]}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "event_types[1]")
	require.Equal(t, before, b.endpointRows(t), "a refused PATCH changes nothing, not even its valid fields")

	got = b.endpointCall(t, http.MethodPatch, path, `{"event_types":["invoice.paid"]}`, http.StatusOK)
	require.Equal(t, []string{"invoice.paid"}, *got.EventTypes)
	require.True(t, got.Disabled)

	got = b.endpointCall(t, http.MethodPatch, path, `{"event_types":null}`, http.StatusOK)
	require.Nil(t, got.EventTypes, "null: every type again")
	require.Nil(t, b.endpointCall(t, http.MethodGet, path, "", http.StatusOK).EventTypes)
}

type endpointPageJSON struct {
	Items      []endpointJSON `json:"items"`
	NextCursor string         `json:"next_cursor"`
}

// TestEndpointList: pages in id order give every endpoint once, the last
// page has no cursor, each item shows its event_types, and a key that may
// only read sees URLs without their query string.
func TestEndpointList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want := []string{b.endpointID}
	for i := range 4 {
		body := fmt.Sprintf(`{"url":"https://example.com/%d?token=secret-%d","event_types":["order.%d"]}`, i, i, i)
		want = append(want, b.endpointCall(t, http.MethodPost, "/v1/endpoints", body, http.StatusCreated).ID)
	}
	slices.Sort(want)
	_, reader := b.createKey(t, "reader", api.ScopeEventsRead)

	list := func(h http.Header, query url.Values) endpointPageJSON {
		t.Helper()
		resp, raw := b.do(t, http.MethodGet, "/v1/endpoints?"+query.Encode(), "", "", h)
		require.Equal(t, http.StatusOK, resp.StatusCode, raw)
		var page endpointPageJSON
		require.NoError(t, json.Unmarshal([]byte(raw), &page))
		return page
	}
	var got, sizes []string
	q := url.Values{"limit": {"2"}}
	for {
		page := list(bearer(reader), q)
		sizes = append(sizes, fmt.Sprint(len(page.Items)))
		for _, ep := range page.Items {
			got = append(got, ep.ID)
			require.NotContains(t, ep.URL, "secret", "an events:read key sees no query string")
			if ep.ID != b.endpointID {
				require.Len(t, *ep.EventTypes, 1)
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	require.Equal(t, want, got)
	require.Equal(t, []string{"2", "2", "1"}, sizes, "the last page is the one without a cursor")

	whole := list(b.bearer(), url.Values{})
	require.Len(t, whole.Items, len(want), "the default page holds them all")
	require.Empty(t, whole.NextCursor)
	for _, ep := range whole.Items {
		if ep.ID != b.endpointID {
			require.Contains(t, ep.URL, "token=secret-", "the endpoints' managers see the URL whole")
		}
	}
	exact := list(b.bearer(), url.Values{"limit": {"5"}})
	require.Len(t, exact.Items, 5)
	require.Empty(t, exact.NextCursor, "a page that ends the list exactly has no cursor")
}

// TestEndpointBringsItsOwnSecret: POST /v1/endpoints may carry the signing
// secret (a receiver that already verifies with it); the endpoint signs with
// it, the answer shows it once, a secret that is not whsec_ and the base64 of
// 24 to 64 bytes is a 422 naming secret that creates nothing, and a PATCH
// cannot set one (rotation makes a new one).
func TestEndpointBringsItsOwnSecret(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i * 7)
	}
	brought := "whsec_" + base64.StdEncoding.EncodeToString(key)
	raw := b.call(t, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/own","secret":"`+brought+`"}`, http.StatusCreated)
	var created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &created))
	require.Equal(t, brought, created.Secret, "the answer shows the secret brought")
	var stored string
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT secret FROM endpoints WHERE id = $1", created.ID).Scan(&stored))
	require.Equal(t, brought, stored, "the endpoint signs with the secret brought")
	require.NotContains(t, b.call(t, http.MethodGet, "/v1/endpoints/"+created.ID, "", http.StatusOK), brought, "shown on creation only")

	made := b.call(t, http.MethodPost, "/v1/endpoints", `{"url":"https://example.com/made"}`, http.StatusCreated)
	require.Contains(t, made, `"secret":"whsec_`, "left out, hookflow makes one")

	before := b.endpointRows(t)
	for name, bad := range map[string]string{
		"no prefix":    base64.StdEncoding.EncodeToString(key),
		"not base64":   "whsec_not*base64",
		"too short":    "whsec_" + base64.StdEncoding.EncodeToString(key[:23]),
		"too long":     "whsec_" + base64.StdEncoding.EncodeToString(append(append(slices.Clone(key), key...), 0)),
		"empty":        "",
		"url encoding": "whsec_" + base64.URLEncoding.EncodeToString(append([]byte{0xfb, 0xff}, key...)),
	} {
		resp, raw := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/bad","secret":"`+bad+`"}`, b.bearer())
		requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "secret")
		if bad != "" {
			require.NotContains(t, raw, bad, "%s: a refused secret is not echoed", name)
		}
	}
	require.Equal(t, before, b.endpointRows(t), "a refused secret creates nothing")

	resp, raw := b.do(t, http.MethodPatch, "/v1/endpoints/"+created.ID, "application/json", `{"secret":"`+brought+`"}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusBadRequest, "secret")
	require.Equal(t, before, b.endpointRows(t), "a PATCH sets no secret")
}

// TestEndpointType: an endpoint is a webhook unless it says otherwise, and
// says so in every view; a type no transport serves is refused naming the
// field, and nothing is stored.
func TestEndpointType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	typeOf := func(raw string) any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &m))
		return m["type"]
	}
	require.Equal(t, "webhook", typeOf(b.call(t, http.MethodGet, "/v1/endpoints/"+b.endpointID, "", http.StatusOK)),
		"an endpoint made without a type is a webhook")
	raw := b.call(t, http.MethodPost, "/v1/endpoints", `{"type":"webhook","url":"https://example.com/typed"}`, http.StatusCreated)
	require.Equal(t, "webhook", typeOf(raw))

	before := b.endpointRows(t)
	resp, body := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"type":"carrier_pigeon","url":"https://example.com/coo"}`, b.bearer())
	requireProblem(t, resp, body, http.StatusBadRequest, "type")
	require.Equal(t, before, b.endpointRows(t))
	var stored string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT type FROM endpoints WHERE id = $1`, b.endpointID).Scan(&stored))
	require.Equal(t, "webhook", stored)
}
