package filter_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hookflow/hookflow/internal/filter"
	"github.com/hookflow/hookflow/kit/intake"
)

// fuzzDocs are the events every compiled filter is run on: objects,
// arrays, big and small numbers, nulls, and no metadata.
var fuzzDocs = [][2]string{
	{`{}`, ``},
	{benchData, benchMetadata},
	{`{"a":[1,"1",true,null,{"a":[]},[1]],"n":-0.0e-5,"s":"","o":{"":{"$eq":1}}}`, `{"a":1e999999999999999999999}`},
	{`{"data":{"data":1},"metadata":null,"$and":[]}`, `{}`},
}

func FuzzCompile(f *testing.F) {
	raw, err := os.ReadFile("testdata/match.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases []matchCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add([]byte(c.Filter))
	}
	f.Add([]byte(benchFilter))
	f.Add([]byte(`{"$or":[{"data":{"a":{"$not":{"$in":[1,"x",null,[],{}]}}}},{"$not":{"metadata":{"$exists":false}}}]}`))
	f.Add([]byte(`{"data":{"a":{"$and":[{"$gte":"a"},{"$lte":1e-400}]}}}`))

	docs := make([]filter.Doc, len(fuzzDocs))
	for i, d := range fuzzDocs {
		if docs[i], err = filter.NewDoc(json.RawMessage(d[0]), json.RawMessage(d[1])); err != nil {
			f.Fatal(err)
		}
	}

	f.Fuzz(func(t *testing.T, raw []byte) {
		flt, err := filter.Compile(raw)
		if err != nil {
			var fe *intake.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not an *intake.FieldError: %v", err, err)
			}
			if fe.Field != "filter" && !strings.HasPrefix(fe.Field, "filter.") {
				t.Fatalf("field %q does not start with filter", fe.Field)
			}
			if fe.Detail == "" {
				t.Fatal("empty detail")
			}
			return
		}
		if len(flt.Raw()) > filter.MaxBytes {
			t.Fatalf("raw of %d bytes compiled", len(flt.Raw()))
		}
		again, err := filter.Compile(flt.Raw())
		if err != nil {
			t.Fatalf("raw %s does not compile again: %v", flt.Raw(), err)
		}
		if string(again.Raw()) != string(flt.Raw()) {
			t.Fatalf("raw %s compiles to raw %s", flt.Raw(), again.Raw())
		}
		for _, d := range docs {
			if flt.Match(d) != again.Match(d) {
				t.Fatalf("raw %s decides otherwise once recompiled", flt.Raw())
			}
		}
	})
}
