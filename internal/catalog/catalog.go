// Package catalog is the event-type catalog's judgement: what a type's
// entry may hold (a name, a description, a JSON Schema of the event's data
// and an example), the schema compiled once and kept (Cache), and an
// event's data validated against it, with the failing path named as the
// API names a field (data.items[2].sku).
//
// A schema is JSON Schema draft 2020-12, and it stands alone: every
// reference in it is to itself (#…). Nothing is fetched, ever: the
// compiler's loader refuses every URL, so neither a test nor the server
// makes an outbound call for a tenant's schema, and a schema cannot make
// the server probe an address (the SSRF a remote $ref would be).
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/hookflow/hookflow/kit/intake"
)

// The catalog's caps. Each bounds what one request or one tenant can make
// the server hold or do per event.
const (
	// MaxSchemaBytes bounds a schema as sent: a schema this size already
	// describes a payload far richer than a webhook's, and every accepted
	// event of the type is validated against it.
	MaxSchemaBytes = 64 << 10
	// MaxExampleBytes bounds the example, shown to a subscriber beside
	// the schema.
	MaxExampleBytes = 16 << 10
	// MaxDescription bounds the description, in characters: a paragraph,
	// not a manual.
	MaxDescription = 2000
	// MaxTypes is the most entries one tenant's catalog holds.
	MaxTypes = 1000
	// MaxSchemaDepth bounds how deeply a schema's objects and arrays
	// nest, and MaxSubschemas how many objects and booleans (the values
	// a subschema can be) it holds: compiling costs more per subschema the
	// deeper it sits, so within both caps the worst schema compiles in tens
	// of milliseconds, where a 48 KiB chain of nested "not" took minutes.
	MaxSchemaDepth = 32
	MaxSubschemas  = 1000
	// MaxExpansion bounds how many subschemas judge one value of the
	// data, references followed: a few bytes of $defs referring twice to
	// the next (a0 → a1, a1 …) make it double at each step, and every
	// value of every event pays for it. With it, a value is judged by no
	// more subschemas than a schema may hold.
	MaxExpansion = MaxSubschemas
	// CacheSize is how many compiled schemas a Cache keeps by default: a
	// compiled schema is a few times its source, so the default bounds a
	// process's cache to a few tens of MiB even at MaxSchemaBytes each.
	CacheSize = 512
)

// Draft is the one dialect the catalog takes, as $schema names it. A
// schema that names none is read as this one.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// ValidName checks a type's name as the catalog keeps it: the rule of an
// event's type (intake.ValidType), and none of hookflow's own (those
// starting with intake.ReservedTypePrefix, in any case), which no producer
// can send and so no catalog can describe.
func ValidName(field, name string) *intake.FieldError {
	if fe := intake.ValidType(field, name); fe != nil {
		return fe
	}
	if intake.Reserved(name, intake.ReservedTypePrefix) {
		return &intake.FieldError{Field: field, Reserved: true,
			Detail: fmt.Sprintf("%s must not start with %q, in any case: those are hookflow's own operational events", field, intake.ReservedTypePrefix)}
	}
	return nil
}

// ValidDescription checks a description: at most MaxDescription
// characters of valid UTF-8, without NUL (which Postgres text cannot
// hold).
func ValidDescription(field, d string) *intake.FieldError {
	if !utf8.ValidString(d) {
		return &intake.FieldError{Field: field, Detail: field + " must be valid UTF-8"}
	}
	if strings.ContainsRune(d, 0) {
		return &intake.FieldError{Field: field, Detail: field + " must not contain NUL (\\u0000)"}
	}
	if n := utf8.RuneCountInString(d); n > MaxDescription {
		return &intake.FieldError{Field: field, Detail: fmt.Sprintf("%s must be at most %d characters (found %d)", field, MaxDescription, n)}
	}
	return nil
}

// Schema is a compiled schema of an event's data.
type Schema struct {
	s *jsonschema.Schema
}

// refuseAll is the compiler's loader: a schema refers only to itself.
type refuseAll struct{}

func (refuseAll) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema: a schema refers only to itself (#…); put what it needs under $defs", url)
}

// base is the schema's own address: a reference that is not a fragment
// resolves against it, to an address the loader refuses.
const base = "urn:hookflow:event-type"

// Compile checks a schema (field names it in errors, "schema") and
// compiles it: at most MaxSchemaBytes, a JSON object or boolean, draft
// 2020-12, valid against its metaschema, and every $ref to itself. A
// refusal is an *intake.FieldError naming the path of the fault
// (schema.properties.amount.type).
//
// It also refuses references that cycle without reading further into the
// data ({"$ref":"#"}), which would refuse every event. Its caps
// (MaxSchemaBytes, MaxSchemaDepth, MaxSubschemas, MaxExpansion) are for
// what a request sends; a stored schema, judged by them when it was sent,
// is compiled by CompileStored.
func Compile(field string, raw json.RawMessage) (*Schema, *intake.FieldError) {
	if len(raw) > MaxSchemaBytes {
		return nil, &intake.FieldError{Field: field, Detail: fmt.Sprintf("%s must be at most %d bytes of JSON (found %d)", field, MaxSchemaBytes, len(raw))}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &intake.FieldError{Field: field, Detail: field + " is not valid JSON"}
	}
	// Walked before compiling: the compiler's cost grows faster than the
	// schema, so what it is given must already be bounded.
	subschemas := 0
	if fe := inspect(field, doc, 1, &subschemas); fe != nil {
		return nil, fe
	}
	s, fe := compile(field, doc)
	if fe != nil {
		return nil, fe
	}
	cyclic, fe := expansion(field, s.s)
	if fe != nil {
		return nil, fe
	}
	// Probing costs a validation per JSON type (a long enum, a long
	// pattern): paid only by a schema whose references do loop.
	if cyclic {
		if fe := refCycle(field, s); fe != nil {
			return nil, fe
		}
	}
	return s, nil
}

// expansion refuses a schema in which some value of the data would be
// judged by more than MaxExpansion subschemas, references followed: it
// counts, for each subschema reachable from root, those applied to the
// same value (through $ref, allOf, not, if …), each reference counted
// every time it is followed. A cycle of them counts once, and is reported
// (cyclic) for refCycle to judge: one through a condition on the data
// ({"if":…,"then":{"$ref":"#"}}) may never be met.
func expansion(field string, root *jsonschema.Schema) (cyclic bool, _ *intake.FieldError) {
	const inProgress = -1
	counts := map[*jsonschema.Schema]int{}
	var count func(s *jsonschema.Schema) int
	count = func(s *jsonschema.Schema) int {
		switch n, ok := counts[s]; {
		case ok && n == inProgress:
			cyclic = true
			return 0
		case ok:
			return n
		}
		counts[s] = inProgress
		n := 1
		for _, c := range samePlace(s) {
			// Stopped past the cap: the sum must not overflow.
			if n += count(c); n > MaxExpansion {
				break
			}
		}
		counts[s] = n
		return n
	}
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		if count(s) > MaxExpansion {
			return cyclic, &intake.FieldError{Field: field, Detail: fmt.Sprintf("%s judges one value by more than %d subschemas, references followed (at %s): a schema must not multiply them",
				field, MaxExpansion, pointer(s.Location))}
		}
		stack = append(stack, samePlace(s)...)
		stack = append(stack, deeper(s)...)
	}
	return cyclic, nil
}

// samePlace is the subschemas applied to the same value as s.
func samePlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		out = append(out, s.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return slices.DeleteFunc(out, func(c *jsonschema.Schema) bool { return c == nil })
}

// deeper is the subschemas applied to values inside s's (its
// properties, items, …).
func deeper(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	out = append(out, s.PrefixItems...)
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		out = append(out, s.Properties[k])
	}
	// Sorted by pattern, so a refusal names the same place every time.
	patterns := slices.SortedFunc(maps.Keys(s.PatternProperties), func(a, b jsonschema.Regexp) int { return strings.Compare(a.String(), b.String()) })
	for _, p := range patterns {
		out = append(out, s.PatternProperties[p])
	}
	return slices.DeleteFunc(out, func(c *jsonschema.Schema) bool { return c == nil })
}

// CompileStored compiles a schema Compile accepted when it was stored,
// without the caps on what a request sends: they may have changed since,
// and a type's stored schema must keep judging its events.
func CompileStored(field string, raw json.RawMessage) (*Schema, *intake.FieldError) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &intake.FieldError{Field: field, Detail: field + " is not valid JSON"}
	}
	return compile(field, doc)
}

// inspect refuses a value nested more than MaxSchemaDepth deep (depth is
// v's), more than MaxSubschemas objects and booleans in all (counted in
// n), and any NUL in a key or a string, naming where.
func inspect(path string, v any, depth int, n *int) *intake.FieldError {
	switch v.(type) {
	case map[string]any, bool:
		if *n++; *n > MaxSubschemas {
			return &intake.FieldError{Field: path, Detail: fmt.Sprintf("%s holds more than %d subschemas (objects and booleans): a schema must hold at most %d", path, MaxSubschemas, MaxSubschemas)}
		}
	}
	switch v := v.(type) {
	case map[string]any, []any:
		if depth > MaxSchemaDepth {
			return &intake.FieldError{Field: path, Detail: fmt.Sprintf("%s nests objects and arrays more than %d deep", path, MaxSchemaDepth)}
		}
	case string:
		return noNUL(path, v)
	}
	return children(path, v, func(p, k string, child any) *intake.FieldError {
		if fe := noNUL(p, k); fe != nil {
			return fe
		}
		return inspect(p, child, depth+1, n)
	})
}

// children calls f on each element of an object (in key order, with its
// key) or array (key ""), with its path.
func children(path string, v any, f func(path, k string, child any) *intake.FieldError) *intake.FieldError {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if fe := f(path+key(k), k, v[k]); fe != nil {
				return fe
			}
		}
	case []any:
		for i, e := range v {
			if fe := f(path+"["+strconv.Itoa(i)+"]", "", e); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// noNUL refuses a NUL in s, which Postgres text cannot hold: a schema or
// an example holding one could not be read back as text.
func noNUL(path, s string) *intake.FieldError {
	if strings.ContainsRune(s, 0) {
		return &intake.FieldError{Field: path, Detail: path + " must not contain NUL (\\u0000)"}
	}
	return nil
}

// exampleNUL refuses an example (JSON) holding a NUL, naming where.
func exampleNUL(field string, raw json.RawMessage) *intake.FieldError {
	v, err := decode(raw)
	if err != nil {
		return &intake.FieldError{Field: field, Detail: field + " is not valid JSON"}
	}
	var walk func(path, k string, v any) *intake.FieldError
	walk = func(path, k string, v any) *intake.FieldError {
		if fe := noNUL(path, k); fe != nil {
			return fe
		}
		if s, ok := v.(string); ok {
			return noNUL(path, s)
		}
		return children(path, v, walk)
	}
	return walk(field, "", v)
}

// refCycle refuses a schema whose references lead back to where they
// started without reading further into the data ({"$ref":"#"}): every
// event would be refused for it. The validator finds such a cycle only
// when it meets it, so a value of each JSON type is validated as a probe.
func refCycle(field string, s *Schema) *intake.FieldError {
	for _, probe := range []any{nil, false, json.Number("0"), "", []any{}, map[string]any{}} {
		var ve *jsonschema.ValidationError
		if !errors.As(s.s.Validate(probe), &ve) {
			continue
		}
		if c := findCycle(ve); c != nil {
			return &intake.FieldError{Field: field, Detail: fmt.Sprintf("%s refers to itself in a cycle (%s and %s lead to the same place without reading further into the data)",
				field, pointer(c.KeywordLocation1), pointer(c.KeywordLocation2))}
		}
	}
	return nil
}

func findCycle(e *jsonschema.ValidationError) *kind.RefCycle {
	if c, ok := e.ErrorKind.(*kind.RefCycle); ok {
		return c
	}
	for _, cause := range e.Causes {
		if c := findCycle(cause); c != nil {
			return c
		}
	}
	return nil
}

// pointer is a keyword location without the schema's own address.
func pointer(loc string) string {
	_, frag, _ := strings.Cut(loc, "#")
	return "#" + frag
}

// compile compiles a schema already read (doc), draft 2020-12 unless it
// names it, every $ref to itself.
func compile(field string, doc any) (*Schema, *intake.FieldError) {
	switch d := doc.(type) {
	case bool:
	case map[string]any:
		if v, ok := d["$schema"]; ok && v != Draft && v != Draft+"#" {
			return nil, &intake.FieldError{Field: field + ".$schema", Detail: fmt.Sprintf("%s.$schema must be %q (JSON Schema draft 2020-12) or left out", field, Draft)}
		}
	default:
		return nil, &intake.FieldError{Field: field, Detail: field + " must be a JSON Schema: an object (or true/false)"}
	}
	// A remote reference is named where it is written; the loader
	// refusing every URL is the backstop for one that resolves elsewhere
	// by an $id.
	if fe := localRefs(field, doc); fe != nil {
		return nil, fe
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseAll{})
	if err := c.AddResource(base, doc); err != nil {
		return nil, &intake.FieldError{Field: field, Detail: oneLine(err.Error())}
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, compileError(field, doc, err)
	}
	return &Schema{s: s}, nil
}

// localRefs refuses a $ref or $dynamicRef that is not a fragment (#…),
// naming where it is written.
func localRefs(path string, v any) *intake.FieldError {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := path + key(k)
			if s, ok := v[k].(string); ok && (k == "$ref" || k == "$dynamicRef") && !strings.HasPrefix(s, "#") {
				return &intake.FieldError{Field: p, Detail: fmt.Sprintf("%s refers outside the schema (%q): a schema refers only to itself (#…); put what it needs under $defs", p, s)}
			}
			if fe := localRefs(p, v[k]); fe != nil {
				return fe
			}
		}
	case []any:
		for i, e := range v {
			if fe := localRefs(path+"["+strconv.Itoa(i)+"]", e); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// compileError names the fault of a schema that does not compile: where
// the metaschema refuses it, or the reference that leads nowhere.
func compileError(field string, doc any, err error) *intake.FieldError {
	var sv *jsonschema.SchemaValidationError
	if errors.As(err, &sv) {
		var ve *jsonschema.ValidationError
		if errors.As(sv.Err, &ve) {
			leaf := firstLeaf(ve)
			p := field + instancePath(doc, leaf.InstanceLocation)
			return &intake.FieldError{Field: p, Detail: fmt.Sprintf("%s is not a valid JSON Schema: %s", p, reason(leaf))}
		}
	}
	var nf *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &nf) {
		_, frag, _ := strings.Cut(nf.URL, "#")
		return &intake.FieldError{Field: field, Detail: fmt.Sprintf("%s refers to #%s, which it does not hold", field, frag)}
	}
	return &intake.FieldError{Field: field, Detail: fmt.Sprintf("%s does not compile: %s", field, oneLine(strings.ReplaceAll(err.Error(), base, "")))}
}

// Validate checks data (JSON) against the schema. A refusal is an
// *intake.FieldError whose Field is the failing value's path under field
// ("data", "data.items[2].sku") and whose Detail is why, in one line.
//
// A number too large or too small to be read as a fraction (1e9999999,
// which an outbox's data may hold exactly) cannot be compared with a
// bound: the validator panics on one, and the event is refused, naming it.
func (s *Schema) Validate(field string, data json.RawMessage) (fe *intake.FieldError) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &intake.FieldError{Field: field, Detail: field + " is not valid JSON"}
	}
	defer func() {
		if r := recover(); r != nil {
			p, ok := unjudgeable(field, v)
			if !ok {
				panic(r)
			}
			fe = &intake.FieldError{Field: p, Detail: p + " is a number beyond what the type's schema can judge: write it with a smaller exponent"}
		}
	}()
	err = s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &intake.FieldError{Field: field, Detail: oneLine(err.Error())}
	}
	leaf := firstLeaf(ve)
	p := field + instancePath(v, leaf.InstanceLocation)
	return &intake.FieldError{Field: p, Detail: fmt.Sprintf("%s does not match the type's schema: %s", p, reason(leaf))}
}

// unjudgeable finds the first number in v (under path) that the validator
// cannot read as a fraction, as it reads every number it compares.
func unjudgeable(path string, v any) (string, bool) {
	found := ""
	var walk func(p, _ string, v any) *intake.FieldError
	walk = func(p, _ string, v any) *intake.FieldError {
		if n, ok := v.(json.Number); ok {
			if _, ok := new(big.Rat).SetString(string(n)); !ok {
				found = p
				return &intake.FieldError{}
			}
			return nil
		}
		return children(p, v, walk)
	}
	walk(path, "", v)
	return found, found != ""
}

// firstLeaf is the first cause with none of its own: the most precise
// reason (under anyOf or oneOf, the first branch's).
func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

// reason is the validator's words for a failure, in English; a printer is
// made per failure, which is the rare path.
func reason(e *jsonschema.ValidationError) string {
	return oneLine(e.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// instancePath writes a JSON pointer's tokens as the API names a field:
// .key for a plain key, [i] for an index, ["k.y"] for any other key. Walking
// the value tells an array's "2" from an object's.
func instancePath(v any, tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		switch cur := v.(type) {
		case []any:
			b.WriteString("[" + t + "]")
			if i, err := strconv.Atoi(t); err == nil && i >= 0 && i < len(cur) {
				v = cur[i]
			} else {
				v = nil
			}
		case map[string]any:
			b.WriteString(key(t))
			v = cur[t]
		default:
			b.WriteString(key(t))
			v = nil
		}
	}
	return b.String()
}

// key is .k for a key made of letters, digits, _ and $ (not starting with
// a digit), and ["k"] otherwise, so a path reads back unambiguously.
func key(k string) string {
	plain := k != ""
	for i, r := range k {
		if !(r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + k
	}
	q, _ := json.Marshal(k)
	return "[" + string(q) + "]"
}
