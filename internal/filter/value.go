package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookflow/hookflow/kit/intake"
)

// Values, in an event and in a filter's operands alike, are what
// encoding/json decodes into any, but for numbers: nil, bool, string,
// *number, []any and map[string]any.

// decode reads one JSON value with numbers kept exact.
func decode(raw []byte) (any, error) {
	v, err := intake.Decode(raw)
	if err != nil {
		return nil, err
	}
	return convert(v)
}

// convert replaces every json.Number in v by its *number, in place.
func convert(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		n, ok := parseNumber(string(x))
		if !ok {
			return nil, fmt.Errorf("parse number %q", string(x))
		}
		return &n, nil
	case []any:
		for i, e := range x {
			c, err := convert(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	case map[string]any:
		for k, e := range x {
			c, err := convert(e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
	}
	return v, nil
}

// isScalar tells the operands that an array field is searched for (any
// element matching) from those compared with the whole field.
func isScalar(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
		return false
	}
	return true
}

// equal is deep equality, numbers compared as numbers.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case *number:
		y, ok := b.(*number)
		return ok && cmpNumber(x, y) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// Doc is an event as filters read it, decoded once and shared by every
// endpoint's filter: read-only after NewDoc, so safe for concurrent use.
type Doc struct {
	root map[string]any
}

// NewDoc decodes data (a JSON object, canonical) and metadata (nil/empty
// when the producer sent none; JSON null is taken as none too). Its error
// says which of the two is malformed.
func NewDoc(data, metadata json.RawMessage) (Doc, error) {
	d, err := decodeObject(data)
	if err != nil {
		return Doc{}, fmt.Errorf("decode data: %w", err)
	}
	root := map[string]any{"data": d}
	if len(bytes.TrimSpace(metadata)) > 0 && string(bytes.TrimSpace(metadata)) != "null" {
		m, err := decodeObject(metadata)
		if err != nil {
			return Doc{}, fmt.Errorf("decode metadata: %w", err)
		}
		root["metadata"] = m
	}
	return Doc{root: root}, nil
}

func decodeObject(raw json.RawMessage) (map[string]any, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}
