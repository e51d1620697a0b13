package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/hookflow/hookflow/internal/filter"
)

// benchFilter is what a subscriber might write: large orders from the EU,
// not tests, with a line item of one SKU family, at or after a date.
const benchFilter = `{
	"data": {
		"amount": {"$gte": 1000},
		"currency": {"$in": ["EUR", "GBP", "CHF"]},
		"customer": {"tier": {"$in": ["gold", "platinum"]}, "test": {"$neq": true}},
		"items": {"sku": {"$prefix": "HW-"}, "qty": {"$gt": 0}},
		"created_at": {"$gte": "2026-01-01T00:00:00Z"}
	},
	"metadata": {"region": {"$or": [{"$eq": "eu"}, {"$prefix": "eu-"}]}},
	"$not": {"data": {"status": {"$in": ["cancelled", "refunded"]}}}
}`

const benchData = `{"amount":1249.90,"created_at":"2026-03-14T09:26:53Z","currency":"EUR",` +
	`"customer":{"email":"a@example.com","id":"cus_8842","tier":"gold"},` +
	`"id":"ord_1","items":[{"qty":1,"sku":"SW-100"},{"qty":2,"sku":"HW-220"},{"qty":1,"sku":"HW-310"}],` +
	`"status":"paid"}`

const benchMetadata = `{"region":"eu-west-1","source":"checkout"}`

func BenchmarkMatch(b *testing.B) {
	f, err := filter.Compile(json.RawMessage(benchFilter))
	if err != nil {
		b.Fatal(err)
	}
	d, err := filter.NewDoc(json.RawMessage(benchData), json.RawMessage(benchMetadata))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(d) {
			b.Fatal("the filter must take the doc")
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	raw := json.RawMessage(benchFilter)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := filter.Compile(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewDoc(b *testing.B) {
	data, metadata := json.RawMessage(benchData), json.RawMessage(benchMetadata)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := filter.NewDoc(data, metadata); err != nil {
			b.Fatal(err)
		}
	}
}
