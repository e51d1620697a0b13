package filter_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/filter"
	"github.com/hookflow/hookflow/kit/intake"
)

// matchCase is one row of testdata/match.json: a filter, an event and
// whether the filter takes it.
type matchCase struct {
	Name     string          `json:"name"`
	Filter   json.RawMessage `json:"filter"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
	Match    bool            `json:"match"`
}

func TestMatch(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/match.json")
	require.NoError(t, err)
	var cases []matchCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			f, err := filter.Compile(c.Filter)
			require.NoError(t, err)
			d, err := filter.NewDoc(c.Data, c.Metadata)
			require.NoError(t, err)
			require.Equal(t, c.Match, f.Match(d), "filter %s on data %s metadata %s", c.Filter, c.Data, c.Metadata)
			// What is stored compiles to a filter that decides the same.
			again, err := filter.Compile(f.Raw())
			require.NoError(t, err)
			require.Equal(t, c.Match, again.Match(d))
		})
	}
}

// requireRefused compiles raw and holds its error to the path and a
// fragment of the detail a user reads.
func requireRefused(t *testing.T, raw, path, detail string) {
	t.Helper()
	f, err := filter.Compile(json.RawMessage(raw))
	require.Error(t, err, "filter %s", raw)
	require.Nil(t, f)
	var fe *intake.FieldError
	require.True(t, errors.As(err, &fe), "error %T is not an *intake.FieldError", err)
	require.Equal(t, path, fe.Field, "filter %s: %s", raw, fe.Detail)
	require.Contains(t, fe.Detail, detail)
	require.False(t, fe.Reserved)
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ filter, path, detail string }{
		{`{}`, "filter", "null means no filter"},
		{`null`, "filter", "must be a JSON object, or null for no filter (found null)"},
		{`[]`, "filter", "must be a JSON object"},
		{`"x"`, "filter", "must be a JSON object"},
		{`{"data": `, "filter", "not valid JSON"},
		{`{"data": 1} {}`, "filter", "not valid JSON"},
		{``, "filter", "not valid JSON"},
		{`{"type": "order"}`, "filter.type", `filter may match only data and metadata`},
		{`{"data": {"a": 1}, "headers": {"x": 1}}`, "filter.headers", `"headers" is neither`},
		{`{"$nor": []}`, "filter.$nor", "filter may match only data and metadata"},
		{`{"$and": []}`, "filter.$and", "$and takes an array of one or more"},
		{`{"$or": {"data": {}}}`, "filter.$or", "$or takes an array of one or more"},
		{`{"$or": [{"data": {"a": 1}}, {"region": "eu"}]}`, "filter.$or[1].region", "filter may match only data and metadata"},
		{`{"$or": [{"data": {"a": 1}}, {"metadata": {"region": {"$gt": true}}}]}`, "filter.$or[1].metadata.region.$gt", "$gt takes a number or a string (found a boolean)"},
		{`{"$or": [{"data": {"a": 1}}, "x"]}`, "filter.$or[1]", "must be a JSON object over data and metadata (found a string)"},
		{`{"$and": [{}]}`, "filter.$and[0]", "an empty filter matches every event"},
		{`{"$not": [{"data": {"a": 1}}]}`, "filter.$not", "$not takes one filter"},
		{`{"$not": {}}`, "filter.$not", "an empty filter"},
		{`{"data": {}}`, "filter.data", "an empty object matches anything"},
		{`{"data": {"customer": {}}}`, "filter.data.customer", `{"$eq": {}}`},
		{`{"data": {"amount": {"$gt": 5, "currency": "EUR"}}}`, "filter.data.amount", `may not mix operators ($gt) with field names ("currency")`},
		{`{"data": {"amount": {"$foo": 5}}}`, "filter.data.amount.$foo", "unknown operator $foo: use one of $eq, $neq"},
		{`{"data": {"amount": {"$ne": 5}}}`, "filter.data.amount.$ne", "unknown operator $ne"},
		{`{"data": {"amount": {"$gt": null}}}`, "filter.data.amount.$gt", "$gt takes a number or a string (found null)"},
		{`{"data": {"amount": {"$gte": [1]}}}`, "filter.data.amount.$gte", "$gte takes a number or a string (found an array)"},
		{`{"data": {"amount": {"$lt": {}}}}`, "filter.data.amount.$lt", "$lt takes a number or a string (found an object)"},
		{`{"data": {"amount": {"$lte": false}}}`, "filter.data.amount.$lte", "$lte takes a number or a string"},
		{`{"data": {"r": {"$in": "eu"}}}`, "filter.data.r.$in", "$in takes an array of 1 to 100 values"},
		{`{"data": {"r": {"$in": []}}}`, "filter.data.r.$in", "$in takes an array of 1 to 100 values"},
		{`{"data": {"r": {"$nin": []}}}`, "filter.data.r.$nin", "$nin takes an array of 1 to 100 values"},
		{`{"data": {"r": {"$exists": 1}}}`, "filter.data.r.$exists", "$exists takes true or false (found a number)"},
		{`{"data": {"r": {"$prefix": 1}}}`, "filter.data.r.$prefix", "$prefix takes a string (found a number)"},
		{`{"data": {"r": {"$or": []}}}`, "filter.data.r.$or", "$or takes an array of one or more conditions"},
		{`{"data": {"r": {"$and": {"$eq": 1}}}}`, "filter.data.r.$and", "$and takes an array"},
		{`{"data": {"r": {"$or": [{"$eq": "eu"}, {"$prefx": "eu-"}]}}}`, "filter.data.r.$or[1].$prefx", "unknown operator"},
		{`{"data": {"r": {"$not": {}}}}`, "filter.data.r.$not", "an empty object matches anything"},
		{`{"data": {"r": {"$not": {"$gt": "a", "x": 1}}}}`, "filter.data.r.$not", "may not mix operators"},
		{`{"data": {"a": {"b": {"c": {"$exists": "yes"}}}}}`, "filter.data.a.b.c.$exists", "$exists takes true or false (found a string)"},
	} {
		t.Run(c.filter, func(t *testing.T) {
			t.Parallel()
			requireRefused(t, c.filter, c.path, c.detail)
		})
	}
}

func TestCompileRawIsCanonical(t *testing.T) {
	t.Parallel()
	f, err := filter.Compile(json.RawMessage(" {\"metadata\" : {\"r\": \"<eu>\"},\n \"data\": {\"n\": {\"$gt\": 1.50}}} "))
	require.NoError(t, err)
	require.JSONEq(t, `{"data":{"n":{"$gt":1.50}},"metadata":{"r":"<eu>"}}`, string(f.Raw()))
	require.Equal(t, `{"data":{"n":{"$gt":1.50}},"metadata":{"r":"<eu>"}}`, string(f.Raw()))
}

func TestNewDocRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ data, metadata, err string }{
		{`[1]`, ``, "decode data: not a JSON object"},
		{`{"a":`, ``, "decode data"},
		{``, ``, "decode data"},
		{`{}`, `"eu"`, "decode metadata: not a JSON object"},
		{`{}`, `{} x`, "decode metadata"},
	} {
		_, err := filter.NewDoc(json.RawMessage(c.data), json.RawMessage(c.metadata))
		require.ErrorContains(t, err, c.err, "data %q metadata %q", c.data, c.metadata)
	}
}

// TestZeroDoc holds a Doc nobody built to "no data, no metadata" rather
// than a panic.
func TestZeroDoc(t *testing.T) {
	t.Parallel()
	f, err := filter.Compile(json.RawMessage(`{"data": {"$exists": false}}`))
	require.NoError(t, err)
	require.True(t, f.Match(filter.Doc{}))
}

func TestNilFilterTakesEverything(t *testing.T) {
	t.Parallel()
	var f *filter.Filter
	d, err := filter.NewDoc(json.RawMessage(`{"a": 1}`), nil)
	require.NoError(t, err)
	require.True(t, f.Match(d))
	require.Nil(t, f.Raw())
}

// nestedFields builds {"data": {"f": {"f": ... 1}}} with depth levels of
// objects in all, the filter object included.
func nestedFields(depth int) string {
	return `{"data": ` + strings.Repeat(`{"f": `, depth-1) + `1` + strings.Repeat(`}`, depth-1) + `}`
}

func TestMaxDepth(t *testing.T) {
	t.Parallel()
	_, err := filter.Compile(json.RawMessage(nestedFields(filter.MaxDepth)))
	require.NoError(t, err)
	path := "filter.data" + strings.Repeat(".f", filter.MaxDepth-1)
	requireRefused(t, nestedFields(filter.MaxDepth+1), path, "deeper than 16 levels")

	// Arrays are levels too, inside an operand as anywhere.
	deepArray := `{"data": {"t": {"$eq": ` + strings.Repeat(`[`, filter.MaxDepth-3) + strings.Repeat(`]`, filter.MaxDepth-3) + `}}}`
	_, err = filter.Compile(json.RawMessage(deepArray))
	require.NoError(t, err)
	deeper := `{"data": {"t": {"$eq": ` + strings.Repeat(`[`, filter.MaxDepth-2) + strings.Repeat(`]`, filter.MaxDepth-2) + `}}}`
	requireRefused(t, deeper, "filter.data.t.$eq"+strings.Repeat("[0]", filter.MaxDepth-3), "deeper than 16 levels")
}

// manyFields builds a filter with n keys in all: data and n-1 fields.
func manyFields(n int) string {
	fields := make([]string, n-1)
	for i := range fields {
		fields[i] = fmt.Sprintf(`"k%d":1`, i)
	}
	return `{"data":{` + strings.Join(fields, ",") + `}}`
}

func TestMaxNodes(t *testing.T) {
	t.Parallel()
	f, err := filter.Compile(json.RawMessage(manyFields(filter.MaxNodes)))
	require.NoError(t, err)
	require.LessOrEqual(t, len(f.Raw()), filter.MaxBytes, "the cap on nodes must be reachable within the cap on bytes")
	requireRefused(t, manyFields(filter.MaxNodes+1), "filter", "257 fields and operators, more than the 256 allowed")
}

// inValues builds a filter with one $in of n values.
func inValues(op string, n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	return `{"data":{"n":{"` + op + `":[` + strings.Join(vals, ",") + `]}}}`
}

func TestMaxIn(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"$in", "$nin"} {
		f, err := filter.Compile(json.RawMessage(inValues(op, filter.MaxIn)))
		require.NoError(t, err)
		d, err := filter.NewDoc(json.RawMessage(`{"n": 99.0}`), nil)
		require.NoError(t, err)
		require.Equal(t, op == "$in", f.Match(d))
		requireRefused(t, inValues(op, filter.MaxIn+1), "filter.data.n."+op, "takes an array of 1 to 100 values")
	}
}

// sized builds a filter whose canonical JSON is exactly n bytes.
func sized(n int) string {
	const head, tail = `{"data":{"s":"`, `"}}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestMaxBytes(t *testing.T) {
	t.Parallel()
	f, err := filter.Compile(json.RawMessage(sized(filter.MaxBytes)))
	require.NoError(t, err)
	require.Len(t, f.Raw(), filter.MaxBytes)
	requireRefused(t, sized(filter.MaxBytes+1), "filter", "4097 bytes, more than the 4096 allowed")

	// Spacing is not counted: the cap is on the canonical form.
	spaced := strings.Replace(sized(filter.MaxBytes), `{"data":`, `{  "data" :  `+strings.Repeat(" ", 100), 1)
	_, err = filter.Compile(json.RawMessage(spaced))
	require.NoError(t, err)
}

// TestMatchConcurrent shares one filter and one doc between goroutines,
// as acceptance does, for the race detector to watch.
func TestMatchConcurrent(t *testing.T) {
	t.Parallel()
	f, err := filter.Compile(json.RawMessage(benchFilter))
	require.NoError(t, err)
	d, err := filter.NewDoc(json.RawMessage(benchData), json.RawMessage(benchMetadata))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if !f.Match(d) {
					t.Error("the benchmark's filter must take its doc")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestMatchDoesNotAllocate(t *testing.T) {
	f, err := filter.Compile(json.RawMessage(benchFilter))
	require.NoError(t, err)
	d, err := filter.NewDoc(json.RawMessage(benchData), json.RawMessage(benchMetadata))
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(100, func() { f.Match(d) }))
}

// TestCompileRefusesNUL: a NUL character, in a value or a key, is refused
// naming the filter; no event's data could hold one.
func TestCompileRefusesNUL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{"data":{"a":"x\u0000"}}`, `{"data":{"a\u0000":1}}`, `{"metadata":{"r":{"$in":["\u0000"]}}}`} {
		_, err := filter.Compile(json.RawMessage(raw))
		var fe *intake.FieldError
		require.ErrorAs(t, err, &fe, raw)
		require.Equal(t, "filter", fe.Field)
		require.Contains(t, fe.Detail, "NUL")
	}
	_, err := filter.Compile(json.RawMessage(`{"data":{"a":"\\u0000"}}`))
	require.NoError(t, err, "an escaped backslash, then u0000, is text")
}
