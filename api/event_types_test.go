package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/catalog"
)

type eventTypeJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	Version     int             `json:"version"`
}

func (b *bundle) eventTypeCall(t *testing.T, method, path, body string, status int) eventTypeJSON {
	t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	resp, raw := b.do(t, method, path, ct, body, b.bearer())
	require.Equal(t, status, resp.StatusCode, raw)
	var e eventTypeJSON
	if raw != "" {
		require.NoError(t, json.Unmarshal([]byte(raw), &e), raw)
	}
	return e
}

const paidSchema = `{"type":"object","required":["order_id","total"],"properties":{"order_id":{"type":"string"},"total":{"type":"number","minimum":0},
  "lines":{"type":"array","items":{"$ref":"#/$defs/line"}}},"$defs":{"line":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}}}`

// TestEventTypePutGetDelete: a PUT creates (201, version 1), the same
// content again is 200 with the version kept, a change raises it; GET
// shows it; DELETE removes it (204, then 404).
func TestEventTypePutGetDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/v1/event-types/order.paid"
	body := `{"description":"An order was paid.","schema":` + paidSchema + `,"example":{"order_id":"42","total":1}}`
	created := b.eventTypeCall(t, http.MethodPut, path, body, http.StatusCreated)
	require.Equal(t, "order.paid", created.Name)
	require.Equal(t, 1, created.Version)
	require.JSONEq(t, paidSchema, string(created.Schema))
	require.JSONEq(t, `{"order_id":"42","total":1}`, string(created.Example))

	same := b.eventTypeCall(t, http.MethodPut, path, body, http.StatusOK)
	require.Equal(t, 1, same.Version, "the same content again: idempotent")
	changed := b.eventTypeCall(t, http.MethodPut, path, `{"description":"Paid.","schema":`+paidSchema+`}`, http.StatusOK)
	require.Equal(t, 2, changed.Version)
	require.Nil(t, changed.Example, "an example left out is none")

	got := b.eventTypeCall(t, http.MethodGet, path, "", http.StatusOK)
	require.Equal(t, changed, got)

	// A name with a / is a type like any other, percent-encoded.
	slashed := b.eventTypeCall(t, http.MethodPut, "/v1/event-types/"+url.PathEscape("billing/invoice v2"), `{"schema":true}`, http.StatusCreated)
	require.Equal(t, "billing/invoice v2", slashed.Name)
	require.Equal(t, "billing/invoice v2", b.eventTypeCall(t, http.MethodGet, "/v1/event-types/billing%2Finvoice%20v2", "", http.StatusOK).Name)
	// "import" is a name too, for every method but the import's POST.
	b.eventTypeCall(t, http.MethodPut, "/v1/event-types/import", `{"schema":{}}`, http.StatusCreated)
	require.Equal(t, "import", b.eventTypeCall(t, http.MethodGet, "/v1/event-types/import", "", http.StatusOK).Name)

	require.Equal(t, changed, b.eventTypeCall(t, http.MethodDelete, path, "", http.StatusOK), "the entry as it was")
	resp, raw := b.do(t, http.MethodGet, path, "", "", b.bearer())
	requireProblem(t, resp, raw, http.StatusNotFound, "")
	resp, raw = b.do(t, http.MethodDelete, path, "", "", b.bearer())
	requireProblem(t, resp, raw, http.StatusNotFound, "")
}

// TestEventTypePutRefusals: each refusal is a problem naming the field,
// and stores nothing.
func TestEventTypePutRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		path, body string
		status     int
		field      string
	}{
		{"/v1/event-types/order.paid", `{"schema":{"type":"object","properties":{"total":{"type":"money"}}}}`, 422, "schema.properties.total.type"},
		{"/v1/event-types/order.paid", `{"schema":{"properties":{"a":{"$ref":"https://example.com/a.json"}}}}`, 422, "schema.properties.a.$ref"},
		{"/v1/event-types/order.paid", `{"schema":{"$ref":"#/$defs/nope"}}`, 422, "schema"},
		{"/v1/event-types/order.paid", `{"schema":{"$schema":"http://json-schema.org/draft-07/schema#"}}`, 422, "schema.$schema"},
		{"/v1/event-types/order.paid", `{"schema":"object"}`, 422, "schema"},
		{"/v1/event-types/order.paid", `{"schema":` + paidSchema + `,"example":{"order_id":"42","total":-1}}`, 422, "example.total"},
		{"/v1/event-types/order.paid", `{"description":"` + strings.Repeat("d", catalog.MaxDescription+1) + `"}`, 400, "description"},
		{"/v1/event-types/order.paid", `{"description":"no schema"}`, 400, "schema"},
		{"/v1/event-types/order.paid", `{"schema":{},"extra":1}`, 400, "extra"},
		{"/v1/event-types/hookflow.test", `{"schema":{}}`, 422, "name"},
		{"/v1/event-types/HookFlow.x", `{"schema":{}}`, 422, "name"},
		{"/v1/event-types/a%01b", `{"schema":{}}`, 422, "name"},
		{"/v1/event-types/" + strings.Repeat("t", 256), `{"schema":{}}`, 400, "name"},
	} {
		resp, raw := b.do(t, http.MethodPut, c.path, "application/json", c.body, b.bearer())
		requireProblem(t, resp, raw, c.status, c.field)
	}
	require.Zero(t, b.count(t, "event_types"), "a refusal stores nothing")
	resp, raw := b.do(t, http.MethodPut, "/v1/event-types/x", "text/plain", `{"schema":{}}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusUnsupportedMediaType, "")
}

// TestEventTypeCaps: a schema past 64 KiB is refused naming it; a
// catalog at its cap takes no new type (an update still passes).
func TestEventTypeCaps(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 1 << 20 })
	big := `{"schema":{"description":"` + strings.Repeat("x", catalog.MaxSchemaBytes) + `"}}`
	resp, raw := b.do(t, http.MethodPut, "/v1/event-types/big", "application/json", big, b.bearer())
	p := requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "schema")
	require.Contains(t, p["detail"], fmt.Sprint(catalog.MaxSchemaBytes))

	entries := make([]catalog.Entry, catalog.MaxTypes)
	for i := range entries {
		entries[i] = catalog.Entry{Name: fmt.Sprintf("t.%04d", i), Schema: json.RawMessage(`true`)}
	}
	_, _, err := b.store.EventTypesPut(context.Background(), entries, catalog.MaxTypes)
	require.NoError(t, err)
	resp, raw = b.do(t, http.MethodPut, "/v1/event-types/one.more", "application/json", `{"schema":{}}`, b.bearer())
	p = requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "")
	require.Equal(t, "https://hookflow.dev/problems/event-type-limit", p["type"])
	require.EqualValues(t, catalog.MaxTypes, p["limit"])
	b.eventTypeCall(t, http.MethodPut, "/v1/event-types/t.0001", `{"schema":{}}`, http.StatusOK)
	require.Equal(t, catalog.MaxTypes, b.count(t, "event_types"))
}

type eventTypePageJSON struct {
	Items []struct {
		Type        string         `json:"type"`
		LastEventID string         `json:"last_event_id"`
		Catalog     *eventTypeJSON `json:"catalog"`
	} `json:"items"`
	More       bool   `json:"more"`
	NextCursor string `json:"next_cursor"`
}

// TestEventTypeListMergesSeenAndCatalogued: one item per name, in name
// order, a type seen and catalogued carrying both; pages give each once.
func TestEventTypeListMergesSeenAndCatalogued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, typ := range []string{"b.seen", "c.both"} {
		body := fmt.Sprintf(`{"id":"ev-%d","correlation_id":"k","sequence":%d,"type":%q,"data":{"order_id":"1","total":1}}`, i, i+1, typ)
		resp, raw := b.do(t, http.MethodPost, "/v1/events", "application/json", body, b.bearer())
		require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	}
	for _, typ := range []string{"a.catalogued", "c.both", "d.catalogued"} {
		b.eventTypeCall(t, http.MethodPut, "/v1/event-types/"+typ, `{"schema":`+paidSchema+`}`, http.StatusCreated)
	}
	var names []string
	q := url.Values{"limit": {"2"}}
	for {
		resp, raw := b.do(t, http.MethodGet, "/v1/event-types?"+q.Encode(), "", "", b.bearer())
		require.Equal(t, http.StatusOK, resp.StatusCode, raw)
		var page eventTypePageJSON
		require.NoError(t, json.Unmarshal([]byte(raw), &page))
		for _, it := range page.Items {
			names = append(names, it.Type)
			switch it.Type {
			case "c.both":
				require.Equal(t, "ev-1", it.LastEventID)
				require.NotNil(t, it.Catalog)
				require.Equal(t, 1, it.Catalog.Version)
			case "b.seen":
				require.Nil(t, it.Catalog)
			default:
				require.Empty(t, it.LastEventID)
				require.NotNil(t, it.Catalog)
			}
		}
		require.Equal(t, page.More, page.NextCursor != "")
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	require.Equal(t, []string{"a.catalogued", "b.seen", "c.both", "d.catalogued"}, names)
	resp, raw := b.do(t, http.MethodGet, "/v1/event-types?cursor=%21%21", "", "", b.bearer())
	requireProblem(t, resp, raw, http.StatusBadRequest, "cursor")
}

const shopDocument = `{
  "openapi": "3.1.0",
  "info": {"title": "shop", "version": "1"},
  "webhooks": {
    "order.paid": {"post": {"summary": "An order was paid.",
      "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"}, "example": {"order_id": "42", "lines": [{"sku": "a"}]}}}},
      "responses": {"200": {"description": "ok"}}}},
    "order.refunded": {"post": {"description": "Money went back.",
      "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["amount"], "properties": {"amount": {"$ref": "#/components/schemas/Money"}}}}}},
      "responses": {"200": {"description": "ok"}}}}
  },
  "components": {"schemas": {
    "Order": {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}, "lines": {"type": "array", "items": {"$ref": "#/components/schemas/Line"}}}},
    "Line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}},
    "Money": {"type": "integer", "minimum": 0}
  }}
}`

type importJSON struct {
	Items []struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
		Result  string `json:"result"`
	} `json:"items"`
}

func (b *bundle) importDoc(t *testing.T, doc string, status int) (importJSON, string) {
	t.Helper()
	resp, raw := b.do(t, http.MethodPost, "/v1/event-types/import", "application/json", doc, b.bearer())
	require.Equal(t, status, resp.StatusCode, raw)
	var out importJSON
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal([]byte(raw), &out))
	}
	return out, raw
}

// TestEventTypeImport: two webhooks, one behind a $ref (itself with a
// $ref), become two entries whose schemas stand alone; importing again
// changes nothing; a changed document updates what changed; the imported
// schema then judges events at acceptance.
func TestEventTypeImport(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 1 << 20 })
	out, _ := b.importDoc(t, shopDocument, http.StatusOK)
	require.Len(t, out.Items, 2)
	require.Equal(t, "order.paid", out.Items[0].Name)
	require.Equal(t, "created", out.Items[0].Result)
	require.Equal(t, "order.refunded", out.Items[1].Name)
	require.Equal(t, "created", out.Items[1].Result)

	paid := b.eventTypeCall(t, http.MethodGet, "/v1/event-types/order.paid", "", http.StatusOK)
	require.Equal(t, "An order was paid.", paid.Description)
	require.JSONEq(t, `{"$ref":"#/$defs/Order","$defs":{
	  "Order":{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},"lines":{"type":"array","items":{"$ref":"#/$defs/Line"}}}},
	  "Line":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}}}`, string(paid.Schema))
	require.JSONEq(t, `{"order_id":"42","lines":[{"sku":"a"}]}`, string(paid.Example))
	require.Equal(t, "Money went back.", b.eventTypeCall(t, http.MethodGet, "/v1/event-types/order.refunded", "", http.StatusOK).Description)

	out, _ = b.importDoc(t, shopDocument, http.StatusOK)
	require.Equal(t, "unchanged", out.Items[0].Result)
	require.Equal(t, "unchanged", out.Items[1].Result)
	out, _ = b.importDoc(t, strings.Replace(shopDocument, `"minimum": 0`, `"minimum": 1`, 1), http.StatusOK)
	require.Equal(t, "unchanged", out.Items[0].Result)
	require.Equal(t, "updated", out.Items[1].Result)
	require.Equal(t, 2, out.Items[1].Version)

	resp, raw := b.do(t, http.MethodPost, "/v1/events", "application/json",
		`{"id":"bad-line","correlation_id":"o","sequence":1,"type":"order.paid","data":{"order_id":"42","lines":[{"sku":"a"},{"sku":false}]}}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "data.lines[1].sku")
}

// TestEventTypeImportRefusals: a document that cannot be imported is a
// 422 naming its path, and stores nothing, not even its webhooks that
// were fine.
func TestEventTypeImportRefusals(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 1 << 20 })
	for doc, field := range map[string]string{
		strings.Replace(shopDocument, `"3.1.0"`, `"3.0.3"`, 1):                                          "openapi",
		strings.Replace(shopDocument, `"#/components/schemas/Money"`, `"#/components/schemas/Cash"`, 1): `webhooks["order.refunded"].post.requestBody.content["application/json"].schema.properties.amount.$ref`,
		strings.Replace(shopDocument, `"type": "integer", "minimum": 0`, `"type": "cash"`, 1):           `webhooks["order.refunded"].post.requestBody.content["application/json"].schema.$defs.Money.type`,
		strings.Replace(shopDocument, `"order.refunded": {"post"`, `"order.refunded": {"get"`, 1):       `webhooks["order.refunded"].post`,
		strings.Replace(shopDocument, `"order.refunded"`, `"hookflow.refunded"`, 1):                     `webhooks["hookflow.refunded"]`,
		`{"openapi":"3.1.0","webhooks":{}}`:                                                             "webhooks",
	} {
		resp, raw := b.do(t, http.MethodPost, "/v1/event-types/import", "application/json", doc, b.bearer())
		requireProblem(t, resp, raw, http.StatusUnprocessableEntity, field)
	}
	require.Zero(t, b.count(t, "event_types"), "a refused import stores nothing")
	resp, raw := b.do(t, http.MethodPost, "/v1/event-types/import", "application/json", `[1]`, b.bearer())
	requireProblem(t, resp, raw, http.StatusBadRequest, "")
}

// TestEventTypeScopes: an events:read key reads the catalog and changes
// nothing; an endpoints:write key changes it.
func TestEventTypeScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, reader := b.createKey(t, "reader", api.ScopeEventsRead)
	_, writer := b.createKey(t, "writer", api.ScopeEndpointsWrite)
	resp, raw := b.do(t, http.MethodPut, "/v1/event-types/a", "application/json", `{"schema":{}}`, bearer(writer))
	require.Equal(t, http.StatusCreated, resp.StatusCode, raw)
	resp, raw = b.do(t, http.MethodGet, "/v1/event-types/a", "", "", bearer(reader))
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	for _, m := range []string{http.MethodPut, http.MethodDelete} {
		resp, raw = b.do(t, m, "/v1/event-types/a", "application/json", `{"schema":{}}`, bearer(reader))
		requireProblem(t, resp, raw, http.StatusForbidden, "")
	}
	resp, raw = b.do(t, http.MethodPost, "/v1/event-types/import", "application/json", shopDocument, bearer(reader))
	requireProblem(t, resp, raw, http.StatusForbidden, "")
}

// TestEventCreateSchemaViolation: an event whose data breaks its type's
// schema is a 422 naming the failing path, with the type and version,
// and leaves no event, no delivery and no workflow; a valid one is
// accepted; a type without an entry passes as before.
func TestEventCreateSchemaViolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.eventTypeCall(t, http.MethodPut, "/v1/event-types/order.paid", `{"schema":`+paidSchema+`}`, http.StatusCreated)
	b.eventTypeCall(t, http.MethodPut, "/v1/event-types/order.paid", `{"description":"v2","schema":`+paidSchema+`}`, http.StatusOK)
	post := func(id string, seq int, typ, data string) (*http.Response, string) {
		return b.do(t, http.MethodPost, "/v1/events", "application/json",
			fmt.Sprintf(`{"id":%q,"correlation_id":"order-1","sequence":%d,"type":%q,"data":%s}`, id, seq, typ, data), b.bearer())
	}
	resp, raw := post("bad", 1, "order.paid", `{"order_id":"1","total":3,"lines":[{"sku":"a"},{"sku":"b"},{"sku":9}]}`)
	p := requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "data.lines[2].sku")
	require.Equal(t, "https://hookflow.dev/problems/schema-violation", p["type"])
	require.Equal(t, "order.paid", p["event_type"])
	require.EqualValues(t, 2, p["schema_version"])
	require.Contains(t, p["detail"], "data.lines[2].sku does not match the type's schema")
	resp, raw = post("bad-2", 1, "order.paid", `{"order_id":"1"}`)
	requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "data")
	require.Zero(t, b.count(t, "events"), "nothing stored")
	require.Zero(t, b.count(t, "deliveries"), "no lane entered")
	require.Zero(t, b.starter.calls.Load(), "no workflow started")

	resp, raw = post("good", 1, "order.paid", `{"order_id":"1","total":3,"lines":[{"sku":"a"}]}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	resp, raw = post("free", 2, "order.shipped", `{"anything":true}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	require.Equal(t, 2, b.count(t, "events"))
}

// TestEventTypeSchemaKeptAsWritten: a schema is stored as the text the API
// judged (written canonically), not as jsonb rewrites it (1e99 spelled
// out in 100 digits, a bound numeric cannot hold refused): so a small
// schema of large numbers is stored, read back as written, and judges
// its events; the same schema written otherwise is unchanged.
func TestEventTypeSchemaKeptAsWritten(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.MaxBodyBytes = 64 << 10 })
	nums := strings.TrimSuffix(strings.Repeat("1e99,", 1400), ",")
	schema := `{"default":[` + nums + `],"properties":{"n":{"maximum":1e300,"multipleOf":1e-20000}},"type":"object"}`
	put := b.eventTypeCall(t, http.MethodPut, "/v1/event-types/order.paid", `{"schema":`+schema+`,"example":{"n":1E2}}`, http.StatusCreated)
	require.Equal(t, schema, string(put.Schema))
	require.Equal(t, `{"n":1E2}`, string(put.Example))
	got := b.eventTypeCall(t, http.MethodGet, "/v1/event-types/order.paid", "", http.StatusOK)
	require.Equal(t, schema, string(got.Schema))
	spaced := strings.ReplaceAll(strings.ReplaceAll(schema, ",", ", "), ":", " : ")
	again := b.eventTypeCall(t, http.MethodPut, "/v1/event-types/order.paid", `{"schema":`+spaced+`,"example":{ "n" : 1E2 }}`, http.StatusOK)
	require.Equal(t, 1, again.Version, "the same content written otherwise is unchanged")

	post := func(id, data string) (*http.Response, string) {
		return b.do(t, http.MethodPost, "/v1/events", "application/json",
			fmt.Sprintf(`{"id":%q,"correlation_id":%q,"sequence":1,"type":"order.paid","data":%s}`, id, id, data), b.bearer())
	}
	resp, raw := post("fits", `{"n":3}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	resp, raw = post("breaks", `{"n":1e301}`)
	requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "data.n")
}

// TestEventTypeRefusesNUL: Postgres text cannot hold NUL, so a
// description, schema, example or imported document holding one is a 422
// naming where, and nothing is stored.
func TestEventTypeRefusesNUL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for body, field := range map[string]string{
		`{"description":"a\u0000b","schema":{}}`:          "description",
		`{"schema":{"const":"a\u0000b"}}`:                 "schema.const",
		`{"schema":{"required":["\u0000"]}}`:              "schema.required[0]",
		`{"schema":{},"example":{"a":"\u0000"}}`:          "example.a",
		`{"schema":{},"example":{"list":["x","\u0000"]}}`: "example.list[1]",
	} {
		resp, raw := b.do(t, http.MethodPut, "/v1/event-types/order.paid", "application/json", body, b.bearer())
		requireProblem(t, resp, raw, http.StatusUnprocessableEntity, field)
	}
	resp, raw := b.do(t, http.MethodPost, "/v1/event-types/import", "application/json",
		`{"openapi":"3.1.0","webhooks":{"t":{"post":{"description":"\u0000","requestBody":{"content":{"application/json":{"schema":{}}}}}}}}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "webhooks.t.post.description")
	require.Zero(t, b.count(t, "event_types"), "a refusal stores nothing")
}

// TestEventTypeNameCheckedOnEveryMethod: GET and DELETE check the name in
// the path as PUT does, a 400 naming it rather than a query with a name
// no type can have.
func TestEventTypeNameCheckedOnEveryMethod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		// A control character, a blank name, and bytes that are not UTF-8.
		for _, name := range []string{"a%01b", "%20", "order.%FF"} {
			resp, raw := b.do(t, method, "/v1/event-types/"+name, "", "", b.bearer())
			requireProblem(t, resp, raw, http.StatusBadRequest, "name")
		}
	}
}

// TestEventTypeRefusesSchemasThatCannotJudge: a schema whose references
// cycle would refuse every event, and one nested past the cap would cost
// too much to compile: each is a 422 naming the schema when it is put.
func TestEventTypeRefusesSchemasThatCannotJudge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, raw := b.do(t, http.MethodPut, "/v1/event-types/cyc", "application/json", `{"schema":{"$ref":"#"}}`, b.bearer())
	p := requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "schema")
	require.Contains(t, p["detail"], "cycle")
	deep := strings.Repeat(`{"not":`, catalog.MaxSchemaDepth) + `{}` + strings.Repeat(`}`, catalog.MaxSchemaDepth)
	resp, raw = b.do(t, http.MethodPut, "/v1/event-types/deep", "application/json", `{"schema":`+deep+`}`, b.bearer())
	p = requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "schema"+strings.Repeat(".not", catalog.MaxSchemaDepth))
	require.Contains(t, p["detail"], fmt.Sprint(catalog.MaxSchemaDepth))
	require.Zero(t, b.count(t, "event_types"))
}
