package filter_test

import (
	"encoding/json"
	"fmt"

	"github.com/hookflow/hookflow/internal/filter"
)

func ExampleCompile() {
	f, err := filter.Compile(json.RawMessage(`{
		"data": {"amount": {"$gte": 1000}, "customer": {"tier": {"$in": ["gold", "platinum"]}}},
		"metadata": {"region": {"$or": [{"$eq": "eu"}, {"$prefix": "eu-"}]}}
	}`))
	if err != nil {
		panic(err)
	}
	for _, ev := range []struct{ data, metadata string }{
		{`{"amount": 1249.90, "customer": {"tier": "gold"}}`, `{"region": "eu-west-1"}`},
		{`{"amount": 999, "customer": {"tier": "gold"}}`, `{"region": "eu"}`},
		{`{"amount": 5000, "customer": {"tier": "gold"}}`, ``},
	} {
		d, err := filter.NewDoc(json.RawMessage(ev.data), json.RawMessage(ev.metadata))
		if err != nil {
			panic(err)
		}
		fmt.Println(f.Match(d))
	}
	fmt.Println(string(f.Raw()))
	// Output:
	// true
	// false
	// false
	// {"data":{"amount":{"$gte":1000},"customer":{"tier":{"$in":["gold","platinum"]}}},"metadata":{"region":{"$or":[{"$eq":"eu"},{"$prefix":"eu-"}]}}}
}

func ExampleCompile_refused() {
	_, err := filter.Compile(json.RawMessage(`{"$or": [{"data": {"a": 1}}, {"metadata": {"region": {"$gt": true}}}]}`))
	fmt.Println(err)
	// Output:
	// $gt takes a number or a string (found a boolean)
}
