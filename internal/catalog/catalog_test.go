package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const orderSchema = `{
  "type": "object",
  "required": ["order_id", "amount", "items"],
  "properties": {
    "order_id": {"type": "string"},
    "amount": {"type": "number", "minimum": 0},
    "region": {"enum": ["eu", "us"]},
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
    "meta data": {"type": "object", "additionalProperties": {"type": "integer"}}
  },
  "$defs": {"item": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}}
}`

func mustCompile(t *testing.T, schema string) *Schema {
	t.Helper()
	s, fe := Compile("schema", json.RawMessage(schema))
	require.Nil(t, fe)
	return s
}

func TestValidateNamesTheFailingPath(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, orderSchema)
	require.Nil(t, s.Validate("data", json.RawMessage(`{"order_id":"42","amount":12.5,"items":[{"sku":"a"}]}`)))
	for data, field := range map[string]string{
		`{"order_id":"42","amount":"12","items":[]}`:                               "data.amount",
		`{"order_id":"42","amount":-1,"items":[]}`:                                 "data.amount",
		`{"order_id":"42","amount":1,"items":[{"sku":"a"},{"sku":"b"},{"sku":3}]}`: "data.items[2].sku",
		`{"order_id":"42","amount":1,"items":[{"sku":"a"},{"qty":1}]}`:             "data.items[1]",
		`{"order_id":"42","amount":1,"items":[],"region":"mars"}`:                  "data.region",
		`{"order_id":"42","amount":1,"items":[],"meta data":{"a.b":"x"}}`:          `data["meta data"]["a.b"]`,
		`{"amount":1,"items":[]}`:                                                  "data",
	} {
		fe := s.Validate("data", json.RawMessage(data))
		require.NotNil(t, fe, data)
		require.Equal(t, field, fe.Field, data)
		require.NotContains(t, fe.Detail, "\n")
		require.True(t, strings.HasPrefix(fe.Detail, field+" does not match the type's schema: "), fe.Detail)
	}
}

func TestCompileNamesTheFault(t *testing.T) {
	t.Parallel()
	for schema, field := range map[string]string{
		`{"type":"object","properties":{"amount":{"type":"money"}}}`:        "schema.properties.amount.type",
		`{"type":"object","properties":{"items":{"minItems":-1}}}`:          "schema.properties.items.minItems",
		`{"$schema":"http://json-schema.org/draft-07/schema#"}`:             "schema.$schema",
		`{"properties":{"a":{"$ref":"https://example.com/s.json"}}}`:        "schema.properties.a.$ref",
		`{"properties":{"a":{"$ref":"other.json#/x"}}}`:                     "schema.properties.a.$ref",
		`{"properties":{"a":{"$ref":"#/$defs/missing"}}}`:                   "schema",
		`{"$id":"https://example.com/root","allOf":[{"$ref":"#/$defs/x"}]}`: "schema",
		`[1,2]`:                                "schema",
		`"object"`:                             "schema",
		`{"type":"object"`:                     "schema",
		`{"properties":{"a":{"pattern":"("}}}`: "schema.properties.a.pattern",
	} {
		_, fe := Compile("schema", json.RawMessage(schema))
		require.NotNil(t, fe, schema)
		require.Equal(t, field, fe.Field, "%s: %s", schema, fe.Detail)
		require.NotContains(t, fe.Detail, "\n")
	}
	mustCompile(t, `true`)
	mustCompile(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`)
}

// A reference that resolves outside the schema by an $id is refused by
// the loader, which fetches nothing: the test would hang or fail on a
// machine without a network were it fetched.
func TestCompileFetchesNothing(t *testing.T) {
	t.Parallel()
	_, fe := Compile("schema", json.RawMessage(`{"$id":"https://schemas.example.com/a.json","$defs":{"b":{"$id":"b.json","$ref":"#/x"}},"$ref":"b.json"}`))
	require.NotNil(t, fe)
	require.Equal(t, "schema.$ref", fe.Field)
	_, fe = Compile("schema", json.RawMessage(`{"$defs":{"b":{"$id":"https://127.0.0.1:1/b.json","properties":{"x":{"$ref":"#/nope"}}}},"$ref":"#/$defs/b"}`))
	require.NotNil(t, fe)
	// An embedded resource naming a metaschema of its own reaches the
	// loader, which refuses it.
	_, fe = Compile("schema", json.RawMessage(`{"$defs":{"x":{"$id":"https://a.example/x","$schema":"https://127.0.0.1:1/meta"}}}`))
	require.NotNil(t, fe)
	require.Contains(t, fe.Detail, "outside the schema")
}

func TestCaps(t *testing.T) {
	t.Parallel()
	big := `{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	_, fe := Compile("schema", json.RawMessage(big))
	require.NotNil(t, fe)
	require.Contains(t, fe.Detail, fmt.Sprint(MaxSchemaBytes))
	justFits := `{"description":"` + strings.Repeat("x", MaxSchemaBytes-len(`{"description":""}`)) + `"}`
	mustCompile(t, justFits)

	require.Nil(t, ValidDescription("description", strings.Repeat("é", MaxDescription)))
	fe = ValidDescription("description", strings.Repeat("é", MaxDescription+1))
	require.NotNil(t, fe)
	require.Equal(t, "description", fe.Field)

	e := Entry{Name: "order.paid", Schema: json.RawMessage(`{"type":"object"}`)}
	_, fe = Check("name", "description", "", e)
	require.Nil(t, fe)
	e.Example = json.RawMessage(`{"note":"` + strings.Repeat("x", MaxExampleBytes) + `"}`)
	_, fe = Check("name", "description", "", e)
	require.NotNil(t, fe)
	require.Equal(t, "example", fe.Field)
	e.Example = json.RawMessage(`[1]`)
	_, fe = Check("name", "description", "", e)
	require.NotNil(t, fe)
	require.Equal(t, "example", fe.Field)

	for name, reserved := range map[string]bool{"": false, " ": false, strings.Repeat("a", 256): false, "a\x01": false, "hookflow.test": true, "HookFlow.x": true} {
		fe := ValidName("name", name)
		require.NotNil(t, fe, "%q", name)
		require.Equal(t, reserved, fe.Reserved, "%q", name)
	}
	require.Nil(t, ValidName("name", "order/paid v2"))
}

func TestCacheCompilesOnceAndStaysBounded(t *testing.T) {
	t.Parallel()
	c := NewCache(3)
	a, fe := c.Schema("schema", json.RawMessage(orderSchema))
	require.Nil(t, fe)
	again, fe := c.Schema("schema", json.RawMessage(orderSchema))
	require.Nil(t, fe)
	require.Same(t, a, again, "a schema seen before is not compiled again")
	for i := range 10 {
		_, fe := c.Schema("schema", json.RawMessage(fmt.Sprintf(`{"maxProperties":%d}`, i)))
		require.Nil(t, fe)
		require.LessOrEqual(t, c.Len(), 3)
	}
	require.Equal(t, 3, c.Len())
	other, fe := c.Schema("schema", json.RawMessage(orderSchema))
	require.Nil(t, fe)
	require.NotSame(t, a, other, "the least recently used schema was evicted")
	_, fe = c.Schema("schema", json.RawMessage(`{"type":1}`))
	require.NotNil(t, fe)
	require.Equal(t, 3, c.Len(), "a schema that does not compile is not kept")
	require.Equal(t, CacheSize, NewCache(0).max)
}

func TestImportRewritesComponentsIntoDefs(t *testing.T) {
	t.Parallel()
	doc := `{
	  "openapi": "3.1.0",
	  "info": {"title": "shop", "version": "1"},
	  "webhooks": {
	    "order.paid": {"post": {"summary": "An order was paid", "description": "Sent once the payment clears.",
	      "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"},
	        "example": {"order_id": "42", "lines": [{"sku": "a"}]}}}}}},
	    "order.refunded": {"post": {"requestBody": {"content": {"application/json": {"schema":
	      {"type": "object", "properties": {"amount": {"$ref": "#/components/schemas/Money"}}}}}}}}
	  },
	  "components": {"schemas": {
	    "Order": {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"},
	      "lines": {"type": "array", "items": {"$ref": "#/components/schemas/Line"}}}},
	    "Line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}},
	    "Money": {"type": "integer"},
	    "Unused": {"type": "string"}
	  }}
	}`
	entries, fe := Import(json.RawMessage(doc))
	require.Nil(t, fe)
	require.Len(t, entries, 2)
	paid := entries[0]
	require.Equal(t, "order.paid", paid.Name)
	require.Equal(t, "An order was paid\n\nSent once the payment clears.", paid.Description)
	require.JSONEq(t, `{"$ref":"#/$defs/Order","$defs":{
	  "Order":{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},"lines":{"type":"array","items":{"$ref":"#/$defs/Line"}}}},
	  "Line":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}}}`, string(paid.Schema))
	require.JSONEq(t, `{"order_id":"42","lines":[{"sku":"a"}]}`, string(paid.Example))
	s := mustCompile(t, string(paid.Schema))
	fe = s.Validate("data", json.RawMessage(`{"order_id":"42","lines":[{"sku":1}]}`))
	require.NotNil(t, fe)
	require.Equal(t, "data.lines[0].sku", fe.Field)
	require.Equal(t, "order.refunded", entries[1].Name)
	require.Equal(t, "", entries[1].Description)
	require.JSONEq(t, `{"type":"object","properties":{"amount":{"$ref":"#/$defs/Money"}},"$defs":{"Money":{"type":"integer"}}}`, string(entries[1].Schema))
}

func TestImportNamesTheFault(t *testing.T) {
	t.Parallel()
	hook := func(body string) string {
		return `{"openapi":"3.1.0","webhooks":{"order.paid":` + body + `},"components":{"schemas":{"Ok":{"type":"string"}}}}`
	}
	const schemaAt = `webhooks["order.paid"].post.requestBody.content["application/json"].schema`
	for doc, field := range map[string]string{
		`{"openapi":"3.0.3","webhooks":{}}`:         "openapi",
		`{"webhooks":{}}`:                           "openapi",
		`{"openapi":"3.1.0"}`:                       "webhooks",
		`not json`:                                  "openapi",
		hook(`{"get":{}}`):                          `webhooks["order.paid"].post`,
		hook(`{"post":{}}`):                         `webhooks["order.paid"].post.requestBody`,
		hook(`{"$ref":"#/components/pathItems/x"}`): `webhooks["order.paid"].$ref`,
		hook(`{"post":{"requestBody":{"content":{"text/plain":{"schema":{}}}}}}`):                                                                     schemaAt,
		hook(`{"post":{"requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Missing"}}}}}}`):                          schemaAt + ".$ref",
		hook(`{"post":{"requestBody":{"content":{"application/json":{"schema":{"properties":{"a":{"type":"nope"}}}}}}}}`):                             schemaAt + ".properties.a.type",
		hook(`{"post":{"requestBody":{"content":{"application/json":{"schema":{"type":"object"},"example":[]}}}}}`):                                   `webhooks["order.paid"].post.requestBody.content["application/json"].example`,
		hook(`{"post":{"description":"` + strings.Repeat("d", MaxDescription+1) + `","requestBody":{"content":{"application/json":{"schema":{}}}}}}`): `webhooks["order.paid"].post.description`,
		`{"openapi":"3.1.0","webhooks":{"hookflow.x":{"post":{"requestBody":{"content":{"application/json":{"schema":{}}}}}}}}`:                       `webhooks["hookflow.x"]`,
	} {
		_, fe := Import(json.RawMessage(doc))
		require.NotNil(t, fe, doc)
		require.Equal(t, field, fe.Field, "%s: %s", doc, fe.Detail)
	}
}
