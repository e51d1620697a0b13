package api_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// eventBody is a valid event with some members replaced by raw JSON; a
// replacement of "-" removes the member.
func eventBody(endpointID string, with map[string]string) string {
	m := map[string]string{
		"id":             `"evt_1"`,
		"correlation_id": `"order-1"`,
		"sequence":       `1`,
		"endpoint_id":    fmt.Sprintf("%q", endpointID),
		"type":           `"order.updated"`,
		"data":           `{"total":42}`,
	}
	for k, v := range with {
		m[k] = v
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != "-" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q:%s", k, m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// oversizeEvent is a valid event whose body exceeds the API's limit.
func oversizeEvent(endpointID string) string {
	return eventBody(endpointID, map[string]string{"data": fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 2*testMaxBody))})
}

// TestBadInputRefusedAndNothingStored sends every kind of bad request the
// API must refuse and checks the refusal is a problem document naming the
// field at fault, and that nothing was stored or started.
func TestBadInputRefusedAndNothingStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ep := b.endpointID
	ev := func(with map[string]string) string { return eventBody(ep, with) }
	auth := "Bearer " + b.token

	cases := []struct {
		name        string
		method      string // default POST
		path        string // default /v1/events
		contentType string // default application/json; "-" for none
		auth        string // default the right bearer token; "-" for none
		body        string
		chunked     bool // send without Content-Length
		status      int
		field       string
		detail      string // a part of the detail, where it matters
	}{
		// The body as JSON.
		{name: "malformed JSON", body: `{"id":"evt_1",`, status: 400},
		{name: "not JSON at all", body: `id=evt_1`, status: 400},
		{name: "empty body", body: ``, status: 400},
		{name: "trailing data after the object", body: ev(nil) + ` {"id":"evt_2"}`, status: 400},
		{name: "trailing garbage after the object", body: ev(nil) + `x`, status: 400},
		{name: "array instead of object", body: `[` + ev(nil) + `]`, status: 400, detail: "must be a JSON object"},
		{name: "string instead of object", body: `"evt_1"`, status: 400, detail: "must be a JSON object"},
		{name: "wrong content type", contentType: "text/plain", body: ev(nil), status: 415},
		{name: "no content type", contentType: "-", body: ev(nil), status: 415},
		{name: "form content type", contentType: "application/x-www-form-urlencoded", body: ev(nil), status: 415},
		{name: "unknown field", body: ev(map[string]string{"foo": `1`}), status: 400, field: "foo"},
		// id.
		{name: "missing id", body: ev(map[string]string{"id": "-"}), status: 400, field: "id"},
		{name: "empty id", body: ev(map[string]string{"id": `""`}), status: 400, field: "id"},
		{name: "over-long id", body: ev(map[string]string{"id": `"` + strings.Repeat("a", 256) + `"`}), status: 400, field: "id"},
		{name: "dotted id", body: ev(map[string]string{"id": `"a.b"`}), status: 400, field: "id"},
		{name: "id with slash", body: ev(map[string]string{"id": `"a/b"`}), status: 400, field: "id"},
		{name: "id with space", body: ev(map[string]string{"id": `"a b"`}), status: 400, field: "id"},
		{name: "id not a string", body: ev(map[string]string{"id": `5`}), status: 400, field: "id", detail: "id must be a string"},
		{name: "null id", body: ev(map[string]string{"id": `null`}), status: 400, field: "id"},
		// correlation_id.
		{name: "missing correlation_id", body: ev(map[string]string{"correlation_id": "-"}), status: 400, field: "correlation_id"},
		{name: "dotted correlation_id", body: ev(map[string]string{"correlation_id": `"order.1"`}), status: 400, field: "correlation_id"},
		// sequence.
		{name: "missing sequence", body: ev(map[string]string{"sequence": "-"}), status: 400, field: "sequence"},
		{name: "sequence 0", body: ev(map[string]string{"sequence": `0`}), status: 400, field: "sequence"},
		{name: "sequence negative", body: ev(map[string]string{"sequence": `-1`}), status: 400, field: "sequence"},
		{name: "sequence float", body: ev(map[string]string{"sequence": `1.5`}), status: 400, field: "sequence"},
		{name: "sequence 1.0", body: ev(map[string]string{"sequence": `1.0`}), status: 400, field: "sequence"},
		{name: "sequence exponent", body: ev(map[string]string{"sequence": `1e3`}), status: 400, field: "sequence"},
		{name: "sequence string", body: ev(map[string]string{"sequence": `"3"`}), status: 400, field: "sequence"},
		{name: "sequence null", body: ev(map[string]string{"sequence": `null`}), status: 400, field: "sequence"},
		{name: "sequence beyond int64", body: ev(map[string]string{"sequence": `99999999999999999999`}), status: 400, field: "sequence"},
		{name: "sequence object", body: ev(map[string]string{"sequence": `{"n":1}`}), status: 400, field: "sequence"},
		// endpoint_id.
		{name: "unknown endpoint_id", body: ev(map[string]string{"endpoint_id": `"ep_nope"`}), status: 404, field: "endpoint_id"},
		// type.
		{name: "missing type", body: ev(map[string]string{"type": "-"}), status: 400, field: "type"},
		{name: "blank type", body: ev(map[string]string{"type": `"  "`}), status: 400, field: "type"},
		{name: "type with control character", body: ev(map[string]string{"type": `"a\nb"`}), status: 400, field: "type"},
		// hookflow's own forms (its operational events).
		{name: "operational type", body: ev(map[string]string{"type": `"hookflow.dead_letter.created"`}), status: 422, field: "type", detail: "hookflow's own operational events"},
		{name: "operational type prefix", body: ev(map[string]string{"type": `"hookflow.anything"`}), status: 422, field: "type"},
		{name: "operational id", body: ev(map[string]string{"id": `"hookflow-ep_abcdefghijklmnop-1"`}), status: 422, field: "id"},
		{name: "operational id, upper case", body: ev(map[string]string{"id": `"HOOKFLOW-ep_abcdefghijklmnop-1"`}), status: 422, field: "id"},
		{name: "operational type, mixed case", body: ev(map[string]string{"type": `"Hookflow.endpoint.disabled"`}), status: 422, field: "type"},
		{name: "operational correlation", body: ev(map[string]string{"correlation_id": `"hookflow:ep_abcdefghijklmnop"`}), status: 422, field: "correlation_id"},
		{name: "operational correlation, upper case", body: ev(map[string]string{"correlation_id": `"HOOKFLOW:ep_dev_receiver"`}), status: 422, field: "correlation_id"},
		// data.
		{name: "missing data", body: ev(map[string]string{"data": "-"}), status: 400, field: "data"},
		{name: "null data", body: ev(map[string]string{"data": `null`}), status: 400, field: "data"},
		{name: "data an array", body: ev(map[string]string{"data": `[1,2]`}), status: 400, field: "data"},
		{name: "data a string", body: ev(map[string]string{"data": `"x"`}), status: 400, field: "data"},
		{name: "data a number", body: ev(map[string]string{"data": `7`}), status: 400, field: "data"},
		// Size.
		{name: "oversize body, honest Content-Length", body: oversizeEvent(ep), status: 413, detail: "exceeds"},
		{name: "oversize body, chunked", body: oversizeEvent(ep), chunked: true, status: 413, detail: "exceeds"},
		// Auth.
		{name: "missing token", auth: "-", body: ev(nil), status: 401},
		{name: "invalid token", auth: "Bearer nope", body: ev(nil), status: 401},
		{name: "wrong scheme", auth: "Basic " + b.token, body: ev(nil), status: 401},
		{name: "token as scheme-less value", auth: b.token, body: ev(nil), status: 401},
		{name: "token prefix", auth: auth[:len(auth)-1], body: ev(nil), status: 401},
		{name: "token with suffix", auth: auth + "x", body: ev(nil), status: 401},
		{name: "empty bearer", auth: "Bearer ", body: ev(nil), status: 401},
		// Routes.
		{name: "GET dotted event id", method: "GET", path: "/v1/events/a.b", status: 400, field: "id"},
		{name: "GET correlation with dot", method: "GET", path: "/v1/correlations/a.b", status: 400, field: "id"},
		{name: "dead-letter filter bad limit", method: "GET", path: "/v1/dead-letters?limit=0", status: 400, field: "limit"},
		{name: "dead-letter filter bad since", method: "GET", path: "/v1/dead-letters?since=yesterday", status: 400, field: "since"},
		{name: "unknown route under /v1", method: "GET", path: "/v1/nothing-here", status: 404, detail: "no route for GET /v1/nothing-here"},
		{name: "unknown route at the root", method: "GET", path: "/nothing-here", status: 404},
		{name: "wrong method on events", method: "DELETE", path: "/v1/events", body: ev(nil), status: 405, detail: "DELETE is not allowed"},
		{name: "wrong method without token", method: "DELETE", path: "/v1/events", auth: "-", status: 401},
		{name: "unknown route without token", method: "GET", path: "/v1/nothing-here", auth: "-", status: 401},
		{name: "wrong method on an event", method: "PUT", path: "/v1/events/evt_1", body: ev(nil), status: 405},
		{name: "replay dotted id", path: "/v1/dead-letters/a.b/replay", status: 400, field: "id"},
		{name: "skip unknown dead letter", path: "/v1/dead-letters/evt_1/skip", status: 404},

		// Keys and who acts: the audit trail is the key's name, not a field.
		{name: "replay names who did it", path: "/v1/dead-letters/evt_1/replay", body: `{"by":"someone else"}`, status: 400, field: "by"},
		{name: "key: no name", path: "/v1/api-keys", body: `{"scopes":["events:read"]}`, status: 400, field: "name"},
		{name: "key: unknown scope", path: "/v1/api-keys", body: `{"name":"x","scopes":["root"]}`, status: 400, field: "scopes"},
		{name: "key: chosen secret", path: "/v1/api-keys", body: `{"name":"x","scopes":["admin"],"key":"hfk_mine"}`, status: 400, field: "key"},
		{name: "key: revoke dotted id", method: "DELETE", path: "/v1/api-keys/a.b", status: 400, field: "id"},
		{name: "key: revoke unknown", method: "DELETE", path: "/v1/api-keys/key_nope", status: 404},
		{name: "a revoked-looking key", method: "GET", path: "/v1/stats", auth: "Bearer hfk_notakey", status: 401},
		{name: "a key in the wrong scheme", method: "GET", path: "/v1/stats", auth: "Basic " + b.token, status: 401},

		// Endpoint creation and changes.
		{name: "endpoint: missing url", path: "/v1/endpoints", body: `{}`, status: 400, field: "url"},
		{name: "endpoint: url null", path: "/v1/endpoints", body: `{"url":null}`, status: 400, field: "url"},
		{name: "endpoint: url not a string", path: "/v1/endpoints", body: `{"url":5}`, status: 400, field: "url"},
		{name: "endpoint: ftp url", path: "/v1/endpoints", body: `{"url":"ftp://example.com/hook"}`, status: 400, field: "url"},
		{name: "endpoint: url with credentials", path: "/v1/endpoints", body: `{"url":"https://user:pass@example.com/hook"}`, status: 400, field: "url"},
		{name: "endpoint: url with user only", path: "/v1/endpoints", body: `{"url":"https://user@example.com/hook"}`, status: 400, field: "url"},
		{name: "endpoint: not a URL", path: "/v1/endpoints", body: `{"url":"not a url"}`, status: 400, field: "url"},
		{name: "endpoint: no host", path: "/v1/endpoints", body: `{"url":"https:///hook"}`, status: 400, field: "url"},
		{name: "endpoint: space in host", path: "/v1/endpoints", body: `{"url":"https://exa mple.com/"}`, status: 400, field: "url"},
		{name: "endpoint: created disabled", path: "/v1/endpoints", body: `{"url":"https://example.com/x","disabled":true}`, status: 400, field: "disabled"},
		{name: "endpoint: unknown field", path: "/v1/endpoints", body: `{"url":"https://example.com/x","signing_key":"whsec_mine"}`, status: 400, field: "signing_key"},
		{name: "endpoint: secret too short", path: "/v1/endpoints", body: `{"url":"https://example.com/x","secret":"whsec_mine"}`, status: 422, field: "secret"},
		{name: "endpoint: wrong content type", path: "/v1/endpoints", contentType: "text/plain", body: `{"url":"https://example.com/x"}`, status: 415},
		{name: "endpoint: missing token", path: "/v1/endpoints", auth: "-", body: `{"url":"https://example.com/x"}`, status: 401},
		{name: "endpoint: patch ftp url", method: "PATCH", path: "/v1/endpoints/" + ep, body: `{"url":"ftp://example.com/x"}`, status: 400, field: "url"},
		{name: "endpoint: patch nothing", method: "PATCH", path: "/v1/endpoints/" + ep, body: `{}`, status: 400},
		{name: "endpoint: patch disabled not a bool", method: "PATCH", path: "/v1/endpoints/" + ep, body: `{"disabled":"yes"}`, status: 400, field: "disabled"},
		{name: "endpoint: patch unknown endpoint", method: "PATCH", path: "/v1/endpoints/ep_nope", body: `{"disabled":true}`, status: 404},
		{name: "endpoint: rotate dotted id", path: "/v1/endpoints/a.b/rotate-secret", status: 400, field: "id"},
		{name: "endpoint: event type empty", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":["order.created",""]}`, status: 422, field: "event_types[1]"},
		{name: "endpoint: event type blank", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":["  "]}`, status: 422, field: "event_types[0]"},
		{name: "endpoint: event type control character", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":["a","b","order\u0007"]}`, status: 422, field: "event_types[2]", detail: "control characters"},
		{name: "endpoint: event type wildcard inside", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":["order.*.created"]}`, status: 422, field: "event_types[0]"},
		{name: "endpoint: event type wildcard without dot", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":["order*"]}`, status: 422, field: "event_types[0]"},
		{name: "endpoint: event type wildcard without prefix", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":[".*"]}`, status: 422, field: "event_types[0]"},
		{name: "endpoint: event types empty", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":[]}`, status: 422, field: "event_types", detail: "at least one"},
		{name: "endpoint: event types a string", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":"order.*"}`, status: 400, field: "event_types"},
		{name: "endpoint: event types not strings", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":["a",1]}`, status: 400, field: "event_types"},
		{name: "endpoint: too many event types", path: "/v1/endpoints", body: `{"url":"https://example.com/x","event_types":` + manyTypes(101) + `}`, status: 422, field: "event_types", detail: "at most 100"},
		{name: "endpoint: patch bad event type", method: "PATCH", path: "/v1/endpoints/" + ep, body: `{"event_types":["*.created"]}`, status: 422, field: "event_types[0]"},
		{name: "endpoint: patch event types empty", method: "PATCH", path: "/v1/endpoints/" + ep, body: `{"event_types":[]}`, status: 422, field: "event_types"},
		{name: "endpoint: patch good url, bad event type", method: "PATCH", path: "/v1/endpoints/" + ep, body: `{"url":"https://example.com/moved","disabled":true,"event_types":["a","b**"]}`, status: 422, field: "event_types[1]"},
		{name: "endpoint: list limit 0", method: "GET", path: "/v1/endpoints?limit=0", status: 400, field: "limit"},
		{name: "endpoint: list limit too large", method: "GET", path: "/v1/endpoints?limit=501", status: 400, field: "limit"},
		{name: "endpoint: list cursor made up", method: "GET", path: "/v1/endpoints?cursor=..", status: 400, field: "cursor"},
		{name: "endpoint: list cursor not an id", method: "GET", path: "/v1/endpoints?cursor=YS5i", status: 400, field: "cursor"},
		// A query parameter the operation does not take would be a silent
		// no-op: the tenant of POST /v1/endpoints rides in its body.
		{name: "endpoint: create with ?tenant_id=", path: "/v1/endpoints?tenant_id=acme", body: `{"url":"https://example.com/x"}`, status: 400, field: "tenant_id", detail: "unknown query parameter"},
		{name: "endpoint: list with an unknown parameter", method: "GET", path: "/v1/endpoints?limt=5", status: 400, field: "limt"},
		{name: "endpoint: rotate unknown endpoint", path: "/v1/endpoints/ep_nope/rotate-secret", status: 404},
	}

	endpointsBefore := b.endpointRows(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := cmp.Or(c.method, http.MethodPost)
			path := cmp.Or(c.path, "/v1/events")
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
				if c.chunked {
					body = io.MultiReader(body) // hides the length: sent chunked
				}
			}
			req, err := http.NewRequest(method, b.url+path, body)
			require.NoError(t, err)
			if c.chunked {
				req.ContentLength = -1
			}
			switch ct := cmp.Or(c.contentType, "application/json"); ct {
			case "-":
			default:
				if c.body != "" || method != http.MethodGet {
					req.Header.Set("Content-Type", ct)
				}
			}
			switch a := cmp.Or(c.auth, auth); a {
			case "-":
			default:
				req.Header.Set("Authorization", a)
			}
			resp, respBody := send(t, req)
			p := requireProblem(t, resp, respBody, c.status, c.field)
			require.Contains(t, p["detail"], c.detail)
			if c.status == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="hookflow"`, resp.Header.Get("WWW-Authenticate"))
			}
			if c.status == http.StatusMethodNotAllowed {
				require.NotEmpty(t, resp.Header.Get("Allow"), "a 405 names the allowed methods")
			}

			require.Zero(t, b.count(t, "events"), "a refused request stores no event")
			require.Equal(t, endpointsBefore, b.endpointRows(t), "a refused request changes no endpoint")
			require.Zero(t, b.starter.calls.Load(), "a refused request starts no workflow")
			require.Empty(t, b.starter.signalled(), "a refused request signals no workflow")
		})
	}
	require.GreaterOrEqual(t, len(cases), 20)
}

// manyTypes is a JSON array of n distinct event types.
func manyTypes(n int) string {
	types := make([]string, n)
	for i := range types {
		types[i] = fmt.Sprintf("type.%d", i)
	}
	raw, _ := json.Marshal(types)
	return string(raw)
}

// TestOversizeBodyWithLyingContentLength declares a short body and sends a
// long one. HTTP framing says the body is the declared bytes, so the API
// sees a truncated document and refuses it; the bytes after it are not a
// request either. Nothing is stored.
func TestOversizeBodyWithLyingContentLength(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := oversizeEvent(b.endpointID)
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	_, err = fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: hookflow\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n%s", b.token, body)
	require.NoError(t, err)

	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	requireProblem(t, resp, string(raw), http.StatusBadRequest, "")

	// The rest of the bytes would be read as a next request line; ending
	// the stream makes it a bad request too, or a closed connection.
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	if resp2, err := http.ReadResponse(br, nil); err == nil {
		resp2.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp2.StatusCode)
	}
	require.Zero(t, b.count(t, "events"))
	require.Zero(t, b.starter.calls.Load())
}

// TestValidEventAccepted guards the bad-input suite: the same bundle and
// body builder do produce an accepted, stored and started event.
func TestValidEventAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, nil), b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	require.Equal(t, 1, b.count(t, "events"))
	require.EqualValues(t, 1, b.starter.calls.Load())

	// The content type may carry parameters and the +json suffix.
	resp, body = b.do(t, http.MethodPost, "/v1/events", "application/json; charset=utf-8",
		eventBody(b.endpointID, map[string]string{"id": `"evt_2"`, "sequence": `2`}), b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	require.Equal(t, 2, b.count(t, "events"))
}
