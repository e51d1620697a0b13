package intake_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/intake"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"keys sorted", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"nested keys sorted", `{"z":{"y":1,"x":[{"b":1,"a":2}]},"a":null}`, `{"a":null,"z":{"x":[{"a":2,"b":1}],"y":1}}`},
		{"whitespace dropped", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } }\n", `{"a":[1,2],"b":{}}`},
		{"numbers as written", `{"f":1.50,"e":1e3,"E":2E-2,"n":-0,"big":12345678901234567890123,"i":7}`, `{"E":2E-2,"big":12345678901234567890123,"e":1e3,"f":1.50,"i":7,"n":-0}`},
		{"escapes normalised", `{"s":"\u00e9\u0041\/"}`, `{"s":"éA/"}`},
		{"HTML not escaped", `{"h":"<a href='x'>&</a>"}`, `{"h":"<a href='x'>&</a>"}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"scalars", `"x"`, `"x"`},
		{"booleans and null", `{"t":true,"f":false,"n":null}`, `{"f":false,"n":null,"t":true}`},
		{"duplicate key: last wins", `{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := intake.Canonical(json.RawMessage(c.in))
			require.NoError(t, err)
			require.Equal(t, c.want, string(got))
			// Canonical is a fixed point.
			again, err := intake.Canonical(got)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again))
		})
	}
}

func TestCanonicalRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		``,
		` `,
		`{`,
		`{"a":}`,
		`{"a":1,}`,
		`{'a':1}`,
		`{"a":1} {"b":2}`,
		`{"a":1} x`,
		`{"a":1}}`,
		`{"a":1}]`,
		`{"a":1},`,
		`{"a":1} 7`,
		`[1] [2]`,
		`NaN`,
		`{"a":01}`,
	} {
		_, err := intake.Canonical(json.RawMessage(in))
		require.Error(t, err, "%q", in)
	}
}

func TestPayloadHash(t *testing.T) {
	t.Parallel()
	hash := func(corr string, seq int64, ep, typ, data string) []byte {
		t.Helper()
		c, err := intake.Canonical(json.RawMessage(data))
		require.NoError(t, err)
		return intake.PayloadHash(corr, seq, ep, typ, c)
	}
	base := hash("order-1", 3, "ep_1", "order.updated", `{"total":42,"items":[{"sku":"a","qty":1}]}`)
	require.Len(t, base, 32)

	// Formatting is not content.
	require.Equal(t, base, hash("order-1", 3, "ep_1", "order.updated", "{\n  \"items\": [ {\"qty\":1, \"sku\":\"\\u0061\"} ],\n  \"total\": 42\n}"))

	// Every part of the content is.
	for name, other := range map[string][]byte{
		"data value":     hash("order-1", 3, "ep_1", "order.updated", `{"total":43,"items":[{"sku":"a","qty":1}]}`),
		"number written": hash("order-1", 3, "ep_1", "order.updated", `{"total":42.0,"items":[{"sku":"a","qty":1}]}`),
		"array order":    hash("order-1", 3, "ep_1", "order.updated", `{"total":42,"items":[{"qty":1,"sku":"a"},{}]}`),
		"extra key":      hash("order-1", 3, "ep_1", "order.updated", `{"total":42,"items":[{"sku":"a","qty":1}],"x":null}`),
		"correlation":    hash("order-2", 3, "ep_1", "order.updated", `{"total":42,"items":[{"sku":"a","qty":1}]}`),
		"sequence":       hash("order-1", 4, "ep_1", "order.updated", `{"total":42,"items":[{"sku":"a","qty":1}]}`),
		"endpoint":       hash("order-1", 3, "ep_2", "order.updated", `{"total":42,"items":[{"sku":"a","qty":1}]}`),
		"type":           hash("order-1", 3, "ep_1", "order.created", `{"total":42,"items":[{"sku":"a","qty":1}]}`),
	} {
		require.NotEqual(t, base, other, name)
	}
	// Parts are delimited: moving characters between them changes the hash.
	require.NotEqual(t,
		intake.PayloadHash("ab", 1, "c", "t", json.RawMessage(`{}`)),
		intake.PayloadHash("a", 1, "bc", "t", json.RawMessage(`{}`)))
	require.NotEqual(t,
		intake.PayloadHash("a1", 1, "c", "t", json.RawMessage(`{}`)),
		intake.PayloadHash("a", 11, "c", "t", json.RawMessage(`{}`)))
}

func TestValidKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v  string
		ok bool
	}{
		{"a", true},
		{"evt_01HZX", true},
		{"order-42", true},
		{"tenant:order:42", true},
		{"A-Za-z0-9_:-", true},
		{strings.Repeat("k", 255), true},
		{"", false},
		{strings.Repeat("k", 256), false},
		{"a.b", false},
		{"a/b", false},
		{"a b", false},
		{" a", false},
		{"a\n", false},
		{"a\x00b", false},
		{"é", false},
		{"ａ", false}, // full-width a
		{"a%2Fb", false},
		{"a+b", false},
		{"a,b", false},
		{"a*", false},
	}
	for _, c := range cases {
		fe := intake.ValidKey("correlation_id", c.v)
		if c.ok {
			require.Nil(t, fe, "%q", c.v)
			continue
		}
		require.NotNil(t, fe, "%q", c.v)
		require.Equal(t, "correlation_id", fe.Field)
		require.Contains(t, fe.Detail, "correlation_id")
	}
}

// A tenant ID is judged by ValidTenantID exactly as TenantIDPattern (the
// API's TenantId schema) says, and Validate judges a request's tenant_id by
// it when the request names one.
func TestValidTenantID(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(intake.TenantIDPattern)
	for _, v := range []string{
		"default", "acme", "cus_01HZX", "org:42", "A-Za-z0-9_:-", strings.Repeat("t", 200),
		"", strings.Repeat("t", 201), "a/b", "a.b", "a b", "é", "acme\n", "ａ",
	} {
		fe := intake.ValidTenantID("tenant_id", v)
		require.Equal(t, pattern.MatchString(v), fe == nil, "%q: %v", v, fe)
		if fe != nil {
			require.Equal(t, "tenant_id", fe.Field)
		}
		id := "evt-1"
		req := intake.Request{ID: &id, CorrelationID: &id, Sequence: json.RawMessage("1"), Type: &id, Data: json.RawMessage(`{}`), TenantID: &v}
		_, fe = intake.Validate(req)
		require.Equal(t, pattern.MatchString(v), fe == nil, "Validate %q: %v", v, fe)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	good := func() intake.Request {
		return intake.Request{
			ID: str("evt_1"), CorrelationID: str("order-1"), Sequence: json.RawMessage(`3`),
			EndpointID: str("ep_1"), Type: str("order.updated"), Data: json.RawMessage(`{"b":2, "a":1}`),
		}
	}
	ev, fe := intake.Validate(good())
	require.Nil(t, fe)
	require.Equal(t, "evt_1", ev.ID)
	require.EqualValues(t, 3, ev.Sequence)
	require.JSONEq(t, `{"a":1,"b":2}`, string(ev.Data))
	require.Equal(t, `{"a":1,"b":2}`, string(ev.Data), "data is stored canonical")
	require.Equal(t, intake.PayloadHash("order-1", 3, "ep_1", "order.updated", ev.Data), ev.PayloadHash)

	for _, c := range []struct {
		field string
		mod   func(*intake.Request)
	}{
		{"id", func(r *intake.Request) { r.ID = nil }},
		{"id", func(r *intake.Request) { r.ID = str("a.b") }},
		{"correlation_id", func(r *intake.Request) { r.CorrelationID = str("") }},
		{"sequence", func(r *intake.Request) { r.Sequence = nil }},
		{"sequence", func(r *intake.Request) { r.Sequence = json.RawMessage(`0`) }},
		{"sequence", func(r *intake.Request) { r.Sequence = json.RawMessage(`2.0`) }},
		{"sequence", func(r *intake.Request) { r.Sequence = json.RawMessage(`"2"`) }},
		{"endpoint_id", func(r *intake.Request) { r.EndpointID = str("ep/1") }},
		{"type", func(r *intake.Request) { r.Type = str(strings.Repeat("t", 256)) }},
		{"data", func(r *intake.Request) { r.Data = json.RawMessage(`null`) }},
		{"data", func(r *intake.Request) { r.Data = json.RawMessage(`[]`) }},
		{"data", func(r *intake.Request) { r.Data = json.RawMessage(`{"a":1}}`) }},
	} {
		r := good()
		c.mod(&r)
		_, fe := intake.Validate(r)
		require.NotNil(t, fe, c.field)
		require.Equal(t, c.field, fe.Field)
		require.False(t, fe.Reserved, c.field)
	}
	// hookflow's own forms: refused to producers (API 422, relay), so no
	// producer forges or takes the place of an operational event.
	for _, c := range []struct {
		field string
		mod   func(*intake.Request)
	}{
		{"type", func(r *intake.Request) { r.Type = str("hookflow.endpoint.disabled") }},
		{"type", func(r *intake.Request) { r.Type = str("hookflow.") }},
		{"type", func(r *intake.Request) { r.Type = str("Hookflow.endpoint.disabled") }},
		{"type", func(r *intake.Request) { r.Type = str("HOOKFLOW.x") }},
		{"id", func(r *intake.Request) { r.ID = str("hookflow-ep_abcdefghijklmnop-1") }},
		{"id", func(r *intake.Request) { r.ID = str("HOOKFLOW-ep_dev_receiver-1") }},
		{"id", func(r *intake.Request) { r.ID = str("HookFlow-x") }},
		{"correlation_id", func(r *intake.Request) { r.CorrelationID = str("hookflow:ep_abcdefghijklmnop") }},
		{"correlation_id", func(r *intake.Request) { r.CorrelationID = str("HOOKFLOW:ep_dev_receiver") }},
		{"correlation_id", func(r *intake.Request) { r.CorrelationID = str("Hookflow:") }},
	} {
		r := good()
		c.mod(&r)
		_, fe := intake.Validate(r)
		require.NotNil(t, fe, c.field)
		require.Equal(t, c.field, fe.Field)
		require.True(t, fe.Reserved, c.field)
	}
	for _, v := range []string{"hookflowx.created", "order.hookflow.x", "hookflow_x"} {
		r := good()
		r.Type = str(v)
		_, fe := intake.Validate(r)
		require.Nil(t, fe, v)
	}
	// An endpoint ID is a producer's correlation like any other: the
	// operational events' correlation is "hookflow:" and the ID.
	for _, v := range []string{"ep_abcdefghijklmnop", "ep_dev_receiver", "EP_ABCDEFGHIJKLMNOP", "hookflow", "hookflow-x", "order:hookflow:x"} {
		r := good()
		r.CorrelationID = str(v)
		_, fe := intake.Validate(r)
		require.Nil(t, fe, v)
	}
}

// TestNULRefused: a NUL character in data or metadata, as a value or a
// key, is refused naming the field (the ledger cannot store it); an
// escaped backslash followed by "u0000" is no NUL.
func TestNULRefused(t *testing.T) {
	t.Parallel()
	id, corr, typ := "e", "c", "t"
	req := func(data, metadata string) intake.Request {
		r := intake.Request{ID: &id, CorrelationID: &corr, Sequence: json.RawMessage(`1`), Type: &typ, Data: json.RawMessage(data)}
		if metadata != "" {
			r.Metadata = json.RawMessage(metadata)
		}
		return r
	}
	for _, c := range []struct{ data, metadata, field string }{
		{`{"a":"x\u0000y"}`, "", "data"},
		{`{"a\u0000":1}`, "", "data"},
		{`{"a":["\u0000"]}`, "", "data"},
		{`{}`, `{"region":"\u0000"}`, "metadata"},
	} {
		_, fe := intake.Validate(req(c.data, c.metadata))
		require.NotNil(t, fe, "%s %s", c.data, c.metadata)
		require.Equal(t, c.field, fe.Field)
		require.Contains(t, fe.Detail, "NUL")
	}
	for _, data := range []string{`{"a":"\\u0000"}`, `{"a":"\\\\\u0041"}`, `{"a":"\u0001"}`} {
		_, fe := intake.Validate(req(data, ""))
		require.Nil(t, fe, data)
	}
	require.True(t, intake.ContainsNUL([]byte(`{"a":"\\\u0000"}`)), "an escaped backslash, then a NUL")
	require.False(t, intake.ContainsNUL([]byte(`{"a":"\\u0000"}`)), "an escaped backslash, then u0000")
}

// TestValidTypeRefusesInvalidUTF8: a type (or anything that names types)
// must be UTF-8; a path parameter can carry any bytes.
func TestValidTypeRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	fe := intake.ValidType("name", "order.\xff")
	require.NotNil(t, fe)
	require.Equal(t, "name", fe.Field)
	require.Contains(t, fe.Detail, "UTF-8")
	require.Nil(t, intake.ValidType("name", "commande.créée"))
}
