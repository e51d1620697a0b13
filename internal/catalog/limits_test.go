package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nots is a schema of n "not" nested in one another: JSON n+1 deep.
func nots(n int) string {
	return strings.Repeat(`{"not":`, n) + `{}` + strings.Repeat(`}`, n)
}

// The compiler's cost grows faster than the schema (a 48 KiB chain of
// "not" took minutes), so how deep a schema nests is capped before it is
// compiled, naming the cap.
func TestCompileCapsNestingDepth(t *testing.T) {
	t.Parallel()
	mustCompile(t, nots(MaxSchemaDepth-1))
	_, fe := Compile("schema", json.RawMessage(nots(MaxSchemaDepth)))
	require.NotNil(t, fe)
	require.Equal(t, "schema"+strings.Repeat(".not", MaxSchemaDepth), fe.Field)
	require.Contains(t, fe.Detail, fmt.Sprintf("more than %d deep", MaxSchemaDepth))
	// Arrays nest as objects do.
	_, fe = Compile("schema", json.RawMessage(`{"enum":[`+strings.Repeat("[", MaxSchemaDepth)+strings.Repeat("]", MaxSchemaDepth)+`]}`))
	require.NotNil(t, fe)
	require.Contains(t, fe.Detail, fmt.Sprintf("more than %d deep", MaxSchemaDepth))
}

// How many subschemas (objects and booleans) a schema holds is capped as
// well: within 64 KiB, thousands of shallow ones cost as much to compile.
func TestCompileCapsSubschemas(t *testing.T) {
	t.Parallel()
	// all is the root and n subschemas under it.
	all := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = []string{`{}`, `true`}[i%2]
		}
		return `{"allOf":[` + strings.Join(items, ",") + `]}`
	}
	mustCompile(t, all(MaxSubschemas-1))
	_, fe := Compile("schema", json.RawMessage(all(MaxSubschemas)))
	require.NotNil(t, fe)
	require.True(t, strings.HasPrefix(fe.Field, "schema.allOf["), fe.Field)
	require.Contains(t, fe.Detail, fmt.Sprintf("more than %d subschemas", MaxSubschemas))
	// Numbers and strings are not subschemas: a long enum is not refused.
	mustCompile(t, `{"enum":[`+strings.TrimSuffix(strings.Repeat(`1,`, 2*MaxSubschemas), ",")+`]}`)
}

// A schema whose references lead back to themselves without reading
// further into the data refuses every event ("reference cycle"): it is
// refused when it is put instead. Recursion through the data is fine.
func TestCompileRefusesAReferenceCycle(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{"$ref":"#"}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"type":"object","allOf":[{"$ref":"#"}]}`,
		`{"$dynamicAnchor":"n","anyOf":[{"$dynamicRef":"#n"}]}`,
	} {
		_, fe := Compile("schema", json.RawMessage(s))
		require.NotNil(t, fe, s)
		require.Equal(t, "schema", fe.Field, s)
		require.Contains(t, fe.Detail, "schema refers to itself in a cycle", s)
	}
	s := mustCompile(t, `{"type":"object","properties":{"child":{"$ref":"#"},"n":{"type":"integer"}}}`)
	fe := s.Validate("data", json.RawMessage(`{"child":{"child":{"n":"x"}}}`))
	require.NotNil(t, fe)
	require.Equal(t, "data.child.child.n", fe.Field)
}

// A number the validator cannot read as a fraction (1e9999999) made it
// panic comparing it with a bound; it is a violation naming the number.
func TestValidateANumberBeyondJudgement(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"properties":{"a":{"type":"array","items":{"maximum":1}}}}`)
	for data, field := range map[string]string{
		`{"a":[0,1e9999999]}`:  "data.a[1]",
		`{"a":[-1e-9999999]}`:  "data.a[0]",
		`{"a":[0.5,1,0]}`:      "",
		`{"a":[2],"b":1e9999}`: "data.a[0]",
	} {
		fe := s.Validate("data", json.RawMessage(data))
		if field == "" {
			require.Nil(t, fe, data)
			continue
		}
		require.NotNil(t, fe, data)
		require.Equal(t, field, fe.Field, data)
	}
	fe := s.Validate("data", json.RawMessage(`{"a":[1e9999999]}`))
	require.Contains(t, fe.Detail, "data.a[0] is a number beyond what the type's schema can judge")
}

// Postgres text cannot hold NUL: a description, schema or example holding
// one is refused, naming where, rather than failing to be stored.
func TestCheckRefusesNUL(t *testing.T) {
	t.Parallel()
	ok := Entry{Name: "order.paid", Schema: json.RawMessage(`{"type":"object"}`)}
	for field, e := range map[string]Entry{
		"description":                  {Name: ok.Name, Description: "a\x00b", Schema: ok.Schema},
		"schema.const":                 {Name: ok.Name, Schema: json.RawMessage(`{"const":"a\u0000b"}`)},
		`schema.properties["a\u0000"]`: {Name: ok.Name, Schema: json.RawMessage(`{"properties":{"a\u0000":{}}}`)},
		"example.note":                 {Name: ok.Name, Schema: ok.Schema, Example: json.RawMessage(`{"note":"\u0000"}`)},
		`example["\u0000"]`:            {Name: ok.Name, Schema: ok.Schema, Example: json.RawMessage(`{"\u0000":1}`)},
	} {
		_, fe := Check("name", "description", "", e)
		require.NotNil(t, fe, field)
		require.Equal(t, field, fe.Field)
		require.Contains(t, fe.Detail, "must not contain NUL")
	}
	doc := `{"openapi":"3.1.0","webhooks":{"t":{"post":{"requestBody":{"content":{"application/json":{"schema":{"const":"\u0000"}}}}}}}}`
	_, fe := Import(json.RawMessage(doc))
	require.NotNil(t, fe)
	require.Equal(t, `webhooks.t.post.requestBody.content["application/json"].schema.const`, fe.Field)
}

// What Check judges is what is stored: the schema and example written
// canonically, numbers as written (jsonb would spell 1e99 out in 100
// digits), so the same content written otherwise is the same text.
func TestCheckWritesCanonically(t *testing.T) {
	t.Parallel()
	e, fe := Check("name", "description", "", Entry{Name: "order.paid",
		Schema:  json.RawMessage(`{ "type" : "object",  "default" : [1e99, 1.50] }`),
		Example: json.RawMessage(`{ "z": 1e2, "a": [ ] }`)})
	require.Nil(t, fe)
	require.Equal(t, `{"default":[1e99,1.50],"type":"object"}`, string(e.Schema))
	require.Equal(t, `{"a":[],"z":1e2}`, string(e.Example))
	// A bound numeric cannot hold is kept as written.
	e, fe = Check("name", "description", "", Entry{Name: "tiny", Schema: json.RawMessage(`{"multipleOf":1e-20000}`)})
	require.Nil(t, fe)
	require.Equal(t, `{"multipleOf":1e-20000}`, string(e.Schema))
}

// The caps are for what a request sends: a stored schema, judged by them
// when it was put, is compiled at acceptance whatever its size, so no
// change of a cap (or of how it is counted) refuses every event of a type.
func TestCacheCompilesAStoredSchemaPastTheCaps(t *testing.T) {
	t.Parallel()
	big := `{"type":"object","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	_, fe := Compile("schema", json.RawMessage(big))
	require.NotNil(t, fe)
	s, fe := NewCache(0).Schema("schema", json.RawMessage(big))
	require.Nil(t, fe)
	require.Nil(t, s.Validate("data", json.RawMessage(`{}`)))
	deep, fe := NewCache(0).Schema("schema", json.RawMessage(nots(2*MaxSchemaDepth)))
	require.Nil(t, fe)
	require.Nil(t, deep.Validate("data", json.RawMessage(`{}`)))
}

// A component's reference to its own $defs (#/$defs/line) means the
// component's: copied into the schema's $defs, it is rewritten to where
// they now are, and does not land on a component of the same name.
func TestImportKeepsAComponentsOwnDefs(t *testing.T) {
	t.Parallel()
	doc := `{"openapi":"3.1.0","webhooks":{"order.paid":{"post":{"requestBody":{"content":{"application/json":{"schema":
	  {"type":"object","properties":{"o":{"$ref":"#/components/schemas/Order"},"l":{"$ref":"#/components/schemas/line"}}}}}}}}},
	  "components":{"schemas":{
	    "Order":{"type":"object","$defs":{"line":{"type":"object","required":["sku"]}},"properties":{"line":{"$ref":"#/$defs/line"}}},
	    "line":{"type":"string"}
	  }}}`
	entries, fe := Import(json.RawMessage(doc))
	require.Nil(t, fe)
	s := mustCompile(t, string(entries[0].Schema))
	require.Nil(t, s.Validate("data", json.RawMessage(`{"o":{"line":{"sku":"x"}},"l":"a string"}`)))
	fe = s.Validate("data", json.RawMessage(`{"o":{"line":"just a string"}}`))
	require.NotNil(t, fe)
	require.Equal(t, "data.o.line", fe.Field)
	fe = s.Validate("data", json.RawMessage(`{"l":{"sku":"x"}}`))
	require.NotNil(t, fe)
	require.Equal(t, "data.l", fe.Field)
}

// References multiply what judges one value: a few hundred bytes of $defs,
// each referring twice to the next, would judge every value of every
// event by 2^n subschemas. Past MaxExpansion, references followed, the
// schema is refused when it is put.
func TestCompileCapsExpansion(t *testing.T) {
	t.Parallel()
	// The root, k references each to a (2 each) and j booleans.
	refs := func(k, j int) string {
		items := slices.Repeat([]string{`{"$ref":"#/$defs/a"}`}, k)
		items = append(items, slices.Repeat([]string{`true`}, j)...)
		return `{"$defs":{"a":{}},"allOf":[` + strings.Join(items, ",") + `]}`
	}
	k := (MaxExpansion - 2) / 2
	mustCompile(t, refs(k, MaxExpansion-1-2*k))
	_, fe := Compile("schema", json.RawMessage(refs(k, MaxExpansion-2*k)))
	require.NotNil(t, fe)
	require.Equal(t, "schema", fe.Field)
	require.Contains(t, fe.Detail, fmt.Sprintf("more than %d subschemas, references followed", MaxExpansion))

	var defs []string
	for i := range 30 {
		defs = append(defs, fmt.Sprintf(`"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]}`, i, i+1, i+1))
	}
	bomb := `{"$defs":{` + strings.Join(defs, ",") + `,"a30":{}},"properties":{"x":{"$ref":"#/$defs/a0"}}}`
	_, fe = Compile("schema", json.RawMessage(bomb))
	require.NotNil(t, fe)
	require.Contains(t, fe.Detail, "references followed")
	// A schema referring to one definition from many places is not one.
	mustCompile(t, orderSchema)
}
