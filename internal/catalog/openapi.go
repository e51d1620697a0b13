package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hookflow/hookflow/kit/intake"
)

// Entry is a type's entry as a request states it: what EventTypePut stores.
type Entry struct {
	Name        string
	Description string
	// Schema is the schema of the event's data (JSON); Example, when not
	// nil, a data that matches it.
	Schema  json.RawMessage
	Example json.RawMessage
}

// Check judges an entry: the name (ValidName, named nameField), the
// description (named descField), the schema (it compiles) and the example
// (at most MaxExampleBytes, and valid against the schema: an example that
// breaks its own schema would teach a subscriber the wrong payload), these
// two named under prefix ("" for a PUT's body, the media type's path for
// an import's). It returns the entry with its schema and example written
// canonically (intake.Canonical): what is judged is what is stored, and
// the same content written otherwise is the same text.
func Check(nameField, descField, prefix string, e Entry) (Entry, *intake.FieldError) {
	if fe := ValidName(nameField, e.Name); fe != nil {
		return Entry{}, fe
	}
	if fe := ValidDescription(descField, e.Description); fe != nil {
		return Entry{}, fe
	}
	if len(e.Schema) == 0 || string(e.Schema) == "null" {
		return Entry{}, &intake.FieldError{Field: prefix + "schema", Detail: prefix + "schema is required (a JSON Schema of the event's data)"}
	}
	schema, err := intake.Canonical(e.Schema)
	if err != nil {
		return Entry{}, &intake.FieldError{Field: prefix + "schema", Detail: prefix + "schema is not valid JSON"}
	}
	e.Schema = schema
	s, fe := Compile(prefix+"schema", e.Schema)
	if fe != nil {
		return Entry{}, fe
	}
	if e.Example == nil {
		return e, nil
	}
	example, err := intake.Canonical(e.Example)
	if err != nil {
		return Entry{}, &intake.FieldError{Field: prefix + "example", Detail: prefix + "example is not valid JSON"}
	}
	e.Example = example
	if len(e.Example) > MaxExampleBytes {
		return Entry{}, &intake.FieldError{Field: prefix + "example", Detail: fmt.Sprintf("%sexample must be at most %d bytes of JSON (found %d)", prefix, MaxExampleBytes, len(e.Example))}
	}
	if fe := exampleNUL(prefix+"example", e.Example); fe != nil {
		return Entry{}, fe
	}
	if fe := s.Validate(prefix+"example", e.Example); fe != nil {
		return Entry{}, fe
	}
	return e, nil
}

// componentsRef is how an OpenAPI document refers to one of its schemas;
// defsRef is where Import puts it in the schema it writes.
const (
	componentsRef = "#/components/schemas/"
	defsRef       = "#/$defs/"
)

// Import reads an OpenAPI 3.1 document's webhooks: one entry per webhook,
// named by its key, whose schema is its post's application/json request
// body's (with every #/components/schemas/X it reaches, transitively,
// copied into the schema's own $defs and its references rewritten to
// them, so it compiles alone), whose description is the operation's
// summary and description (or the path item's), and whose example is the
// media type's example. Entries come in name order, each judged by Check.
// A refusal names the document's path at fault (webhooks["order.paid"].post).
func Import(raw json.RawMessage) ([]Entry, *intake.FieldError) {
	var doc struct {
		OpenAPI    *string                    `json:"openapi"`
		Webhooks   map[string]json.RawMessage `json:"webhooks"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, &intake.FieldError{Field: "openapi", Detail: "the document is not a JSON OpenAPI document: " + oneLine(err.Error())}
	}
	if doc.OpenAPI == nil || !strings.HasPrefix(*doc.OpenAPI, "3.1") {
		// 3.0's schemas are not JSON Schema 2020-12 (nullable, exclusive
		// bounds as booleans): read as such, they would mean something else.
		return nil, &intake.FieldError{Field: "openapi", Detail: "openapi must be 3.1.x: only OpenAPI 3.1's schemas are JSON Schema draft 2020-12"}
	}
	if len(doc.Webhooks) == 0 {
		return nil, &intake.FieldError{Field: "webhooks", Detail: "webhooks must name at least one webhook"}
	}
	if len(doc.Webhooks) > MaxTypes {
		return nil, &intake.FieldError{Field: "webhooks", Detail: fmt.Sprintf("webhooks must name at most %d webhooks (found %d)", MaxTypes, len(doc.Webhooks))}
	}
	components := map[string]any{}
	for name, s := range doc.Components.Schemas {
		v, err := decode(s)
		if err != nil {
			return nil, &intake.FieldError{Field: "components.schemas" + key(name), Detail: "not valid JSON"}
		}
		components[name] = v
	}
	var out []Entry
	for _, name := range slices.Sorted(maps.Keys(doc.Webhooks)) {
		at := "webhooks" + key(name)
		e, fe := webhook(at, name, doc.Webhooks[name], components)
		if fe != nil {
			return nil, fe
		}
		e, fe = Check(at, at+".post.description", at+".post.requestBody.content[\"application/json\"].", e)
		if fe != nil {
			return nil, fe
		}
		out = append(out, e)
	}
	return out, nil
}

// webhook reads one webhook's path item into an entry.
func webhook(at, name string, raw json.RawMessage, components map[string]any) (Entry, *intake.FieldError) {
	var item struct {
		Ref         *string `json:"$ref"`
		Summary     string  `json:"summary"`
		Description string  `json:"description"`
		Post        *struct {
			Summary     string `json:"summary"`
			Description string `json:"description"`
			RequestBody *struct {
				Ref     *string `json:"$ref"`
				Content map[string]struct {
					Schema  json.RawMessage `json:"schema"`
					Example json.RawMessage `json:"example"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"post"`
	}
	if err := json.Unmarshal(raw, &item); err != nil {
		return Entry{}, &intake.FieldError{Field: at, Detail: at + " must be a path item object: " + oneLine(err.Error())}
	}
	switch {
	case item.Ref != nil:
		return Entry{}, &intake.FieldError{Field: at + ".$ref", Detail: at + " must be written out, not a $ref"}
	case item.Post == nil:
		return Entry{}, &intake.FieldError{Field: at + ".post", Detail: at + " must have a post operation: its request body is the event's data"}
	case item.Post.RequestBody == nil:
		return Entry{}, &intake.FieldError{Field: at + ".post.requestBody", Detail: at + ".post must have a requestBody"}
	case item.Post.RequestBody.Ref != nil:
		return Entry{}, &intake.FieldError{Field: at + ".post.requestBody.$ref", Detail: at + ".post.requestBody must be written out, not a $ref"}
	}
	mt, ok := item.Post.RequestBody.Content["application/json"]
	if !ok || len(mt.Schema) == 0 {
		return Entry{}, &intake.FieldError{Field: at + `.post.requestBody.content["application/json"].schema`, Detail: at + ".post.requestBody must have an application/json schema"}
	}
	schema, fe := standalone(at+`.post.requestBody.content["application/json"].schema`, mt.Schema, components)
	if fe != nil {
		return Entry{}, fe
	}
	var parts []string
	for _, p := range []string{cmpOr(item.Post.Summary, item.Summary), cmpOr(item.Post.Description, item.Description)} {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	e := Entry{Name: name, Description: strings.Join(parts, "\n\n"), Schema: schema}
	if len(mt.Example) > 0 {
		e.Example = mt.Example
	}
	return e, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// standalone rewrites a schema that refers to the document's components
// into one that holds them: each #/components/schemas/X reached from it
// (and from those, transitively) is copied into its $defs as X and every
// reference is rewritten to #/$defs/X. A component's reference to its own
// $defs (#/$defs/y, read as the component's) is rewritten to
// #/$defs/X/$defs/y, where they now are: left as written it would resolve
// against the new root's $defs, to another schema or to a component of the
// same name.
func standalone(at string, raw json.RawMessage, components map[string]any) (json.RawMessage, *intake.FieldError) {
	root, err := decode(raw)
	if err != nil {
		return nil, &intake.FieldError{Field: at, Detail: at + " is not valid JSON"}
	}
	defs := map[string]any{}
	var pending []string
	// comp is the component being copied ("" for the webhook's schema).
	var walk func(comp, path string, v any) (any, *intake.FieldError)
	walk = func(comp, path string, v any) (any, *intake.FieldError) {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for _, k := range slices.Sorted(maps.Keys(v)) {
				child := v[k]
				if s, ok := child.(string); ok && k == "$ref" && strings.HasPrefix(s, componentsRef) {
					name := strings.TrimPrefix(s, componentsRef)
					if _, ok := components[name]; !ok || strings.Contains(name, "/") {
						return nil, &intake.FieldError{Field: path + key(k), Detail: fmt.Sprintf("%s refers to %s, which the document's components.schemas does not hold", path+key(k), s)}
					}
					if _, seen := defs[name]; !seen {
						defs[name] = nil
						pending = append(pending, name)
					}
					out[k] = defsRef + name
					continue
				}
				if s, ok := child.(string); ok && k == "$ref" && comp != "" && strings.HasPrefix(s, defsRef) {
					out[k] = defsRef + comp + "/$defs/" + strings.TrimPrefix(s, defsRef)
					continue
				}
				c, fe := walk(comp, path+key(k), child)
				if fe != nil {
					return nil, fe
				}
				out[k] = c
			}
			return out, nil
		case []any:
			out := make([]any, len(v))
			for i, child := range v {
				c, fe := walk(comp, fmt.Sprintf("%s[%d]", path, i), child)
				if fe != nil {
					return nil, fe
				}
				out[i] = c
			}
			return out, nil
		}
		return v, nil
	}
	rewritten, fe := walk("", at, root)
	if fe != nil {
		return nil, fe
	}
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		d, fe := walk(name, "components.schemas"+key(name), components[name])
		if fe != nil {
			return nil, fe
		}
		defs[name] = d
	}
	if len(defs) > 0 {
		obj, ok := rewritten.(map[string]any)
		if !ok {
			return nil, &intake.FieldError{Field: at, Detail: at + " must be a schema object"}
		}
		own, _ := obj["$defs"].(map[string]any)
		merged := map[string]any{}
		for k, v := range own {
			merged[k] = v
		}
		for k, v := range defs {
			if _, clash := merged[k]; clash {
				return nil, &intake.FieldError{Field: at + ".$defs" + key(k), Detail: fmt.Sprintf("%s.$defs%s is also the name of a component it refers to", at, key(k))}
			}
			merged[k] = v
		}
		obj["$defs"] = merged
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rewritten); err != nil {
		return nil, &intake.FieldError{Field: at, Detail: at + " could not be written: " + oneLine(err.Error())}
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// decode reads JSON keeping numbers as written.
func decode(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
