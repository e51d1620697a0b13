package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EventFilter is an endpoint's filter as the runs set it and the checks
// read it: the event's data.amount at least MinAmount (when above 0) and
// its metadata.region equal to Region (when not ""). Takes is the checks'
// own reading, written apart from internal/filter, so that they hold
// hookflow's routing to it. A nil filter takes every event.
type EventFilter struct {
	MinAmount int64
	Region    string
}

// JSON is f in hookflow's filter language, as an endpoint is given it.
func (f *EventFilter) JSON() json.RawMessage {
	m := map[string]any{}
	if f.MinAmount > 0 {
		m["data"] = map[string]any{"amount": map[string]any{"$gte": f.MinAmount}}
	}
	if f.Region != "" {
		m["metadata"] = map[string]any{"region": f.Region}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // a map of strings and numbers always marshals
	}
	return b
}

// Takes reports whether f takes an event with amount in its data and
// region in its metadata ("" when it has none).
func (f *EventFilter) Takes(amount int64, region string) bool {
	if f == nil {
		return true
	}
	return (f.MinAmount <= 0 || amount >= f.MinAmount) && (f.Region == "" || region == f.Region)
}

func (f *EventFilter) String() string {
	if f == nil {
		return "no filter"
	}
	var parts []string
	if f.MinAmount > 0 {
		parts = append(parts, fmt.Sprintf("amount >= %d", f.MinAmount))
	}
	if f.Region != "" {
		parts = append(parts, "region "+f.Region)
	}
	return strings.Join(parts, " and ")
}
