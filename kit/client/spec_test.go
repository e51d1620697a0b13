package client

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// specPath is the API's OpenAPI document, in the repository beside this
// module: the client is held to the document the API itself is tested
// against (api/openapi_test.go).
const specPath = "../../api/openapi.json"

type spec struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

type schema struct {
	Ref        string             `json:"$ref"`
	Type       jsonType           `json:"type"`
	Format     string             `json:"format"`
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *schema            `json:"items"`
	AllOf      []*schema          `json:"allOf"`
}

// jsonType is a schema's type: one name, or (OpenAPI 3.1) a name and
// "null" for a value that may be null, which the client carries in the
// name's type (a nil slice or pointer is null).
type jsonType string

func (j *jsonType) UnmarshalJSON(raw []byte) error {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		*j = jsonType(one)
		return nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		return err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == "null" })
	if len(names) != 1 {
		return fmt.Errorf("type %s: one type, or one and null", raw)
	}
	*j = jsonType(names[0])
	return nil
}

func readSpec(t *testing.T) spec {
	t.Helper()
	raw, err := os.ReadFile(specPath)
	require.NoError(t, err, "the client is checked against the API's OpenAPI document at %s", specPath)
	var s spec
	require.NoError(t, json.Unmarshal(raw, &s))
	return s
}

// operationIDs lists every operationId of the document.
func (s spec) operationIDs(t *testing.T) []string {
	var ids []string
	for path, ops := range s.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string `json:"operationId"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			require.NotEmpty(t, op.OperationID, "%s %s has no operationId", method, path)
			ids = append(ids, op.OperationID)
		}
	}
	sort.Strings(ids)
	return ids
}

// helpers are the exported methods of *Client that are no operation.
var helpers = []string{"BaseURL", "DeadLetterListAll", "EndpointListAll", "EventAttemptsAll", "StatsEndpointsAll"}

// TestEveryOperationHasAMethod: every operationId has a method of *Client
// of the same name but for letter case (eventCreate → EventCreate,
// apiKeyCreate → APIKeyCreate, openapi → OpenAPI), and every other exported
// method is a known helper, so an operation added to the API or dropped
// from it fails here until the client follows.
func TestEveryOperationHasAMethod(t *testing.T) {
	t.Parallel()
	ids := readSpec(t).operationIDs(t)
	require.NotEmpty(t, ids)
	ct := reflect.TypeFor[*Client]()
	methods := map[string]bool{}
	for i := range ct.NumMethod() {
		methods[ct.Method(i).Name] = true
	}
	var missing []string
	for _, id := range ids {
		found := ""
		for name := range methods {
			if strings.EqualFold(name, id) {
				found = name
			}
		}
		if found == "" {
			missing = append(missing, id)
			continue
		}
		delete(methods, found)
		m, _ := ct.MethodByName(found)
		require.Equal(t, "context.Context", m.Type.In(1).String(), "%s takes a context first", found)
		require.Equal(t, "error", m.Type.Out(m.Type.NumOut()-1).String(), "%s returns an error last", found)
	}
	require.Empty(t, missing, "operations of %s without a method of *Client", specPath)
	for _, h := range helpers {
		delete(methods, h)
	}
	require.Empty(t, methods, "methods of *Client that are no operation of %s (add helpers to the list)", specPath)
}

// schemaTypes are the document's schemas and the types that carry them.
var schemaTypes = map[string]reflect.Type{
	"Readiness":          reflect.TypeFor[Readiness](),
	"EndpointCreate":     reflect.TypeFor[EndpointCreateRequest](),
	"EndpointUpdate":     reflect.TypeFor[EndpointUpdateRequest](),
	"Endpoint":           reflect.TypeFor[Endpoint](),
	"EndpointWithSecret": reflect.TypeFor[EndpointWithSecret](),
	"EndpointDeleted":    reflect.TypeFor[EndpointDeleted](),
	"EndpointPage":       reflect.TypeFor[EndpointPage](),
	"URLChange":          reflect.TypeFor[URLChange](),
	"EventCreate":        reflect.TypeFor[EventCreateRequest](),
	"Accepted":           reflect.TypeFor[Accepted](),
	"Attempt":            reflect.TypeFor[Attempt](),
	"AttemptPage":        reflect.TypeFor[AttemptPage](),
	"Event":              reflect.TypeFor[Event](),
	"Correlation":        reflect.TypeFor[Correlation](),
	"CorrelationSkip":    reflect.TypeFor[CorrelationSkipRequest](),
	"CorrelationVoided":  reflect.TypeFor[CorrelationVoided](),
	"Lane":               reflect.TypeFor[Lane](),
	"Delivery":           reflect.TypeFor[Delivery](),
	"EndpointStats":      reflect.TypeFor[EndpointStats](),
	"EndpointHealth":     reflect.TypeFor[EndpointHealth](),
	"EndpointsHealth":    reflect.TypeFor[EndpointsHealth](),
	"CircuitState":       reflect.TypeFor[CircuitState](),
	"DeadLetter":         reflect.TypeFor[DeadLetter](),
	"DeadLetterPage":     reflect.TypeFor[DeadLetterPage](),
	"BatchReplay":        reflect.TypeFor[BatchReplay](),
	"Operator":           reflect.TypeFor[OperatorRequest](),
	"OperatorAction":     reflect.TypeFor[OperatorAction](),
	"Stats":              reflect.TypeFor[Stats](),
	"BlockedCorrelation": reflect.TypeFor[BlockedCorrelation](),
	"APIKeyCreate":       reflect.TypeFor[APIKeyCreateRequest](),
	"APIKey":             reflect.TypeFor[APIKey](),
	"APIKeyCreated":      reflect.TypeFor[APIKeyCreated](),
	"State":              reflect.TypeFor[State](),
	"Scope":              reflect.TypeFor[Scope](),
	"DeadLetterStatus":   reflect.TypeFor[string](), // the DeadLetter* constants
}

// leftOut are properties of the document the client does not send, and
// why.
var leftOut = map[string]string{
	"EndpointCreate.disabled": "the API refuses it: an endpoint is created enabled",
}

// TestTypesCarryTheSchemas: every schema's properties are the JSON fields of
// its type (nested objects and arrays too) with matching JSON types, and a
// required property is never omitted when empty.
func TestTypesCarryTheSchemas(t *testing.T) {
	t.Parallel()
	s := readSpec(t)
	for name, sc := range s.Components.Schemas {
		switch name {
		case "Key": // a string pattern
			continue
		case "Problem": // read into Error
			var props []string
			for p := range sc.Properties {
				props = append(props, p)
			}
			var known []string
			for p := range problemFields {
				known = append(known, p)
			}
			require.ElementsMatch(t, props, known, "Problem's members are the fields of Error")
			continue
		}
		typ, ok := schemaTypes[name]
		if !assertf(t, ok, "schema %s has no client type", name) {
			continue
		}
		s.compare(t, name, sc, typ)
	}
}

// compare holds typ to sc, at path (for messages).
func (s spec) compare(t *testing.T, path string, sc *schema, typ reflect.Type) {
	t.Helper()
	sc = s.resolve(sc)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case len(sc.Properties) > 0:
		if !assertf(t, typ.Kind() == reflect.Struct, "%s: an object with properties, carried by %s", path, typ) {
			return
		}
		fields := jsonFields(typ)
		for prop, psc := range sc.Properties {
			f, ok := fields[prop]
			delete(fields, prop)
			if !ok {
				_, excused := leftOut[path+"."+prop]
				assertf(t, excused, "%s.%s: no field of %s carries it", path, prop, typ)
				continue
			}
			if slices.Contains(sc.Required, prop) {
				assertf(t, !f.omitted, "%s.%s is required, yet %s omits it when empty", path, prop, typ)
			}
			s.compare(t, path+"."+prop, psc, f.typ)
		}
		for extra := range fields {
			assertf(t, false, "%s: %s has a field %q the document does not know", path, typ, extra)
		}
	case sc.Type == "array":
		if assertf(t, typ.Kind() == reflect.Slice, "%s: an array, carried by %s", path, typ) && sc.Items != nil {
			s.compare(t, path+"[]", sc.Items, typ.Elem())
		}
	case sc.Type == "string" && sc.Format == "date-time":
		assertf(t, typ == reflect.TypeFor[time.Time](), "%s: a date-time, carried by %s", path, typ)
	case sc.Type == "string":
		assertf(t, typ.Kind() == reflect.String, "%s: a string, carried by %s", path, typ)
	case sc.Type == "integer":
		assertf(t, typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64, "%s: an integer, carried by %s", path, typ)
	case sc.Type == "number":
		assertf(t, typ.Kind() == reflect.Float64, "%s: a number, carried by %s", path, typ)
	case sc.Type == "boolean":
		assertf(t, typ.Kind() == reflect.Bool, "%s: a boolean, carried by %s", path, typ)
	case sc.Type == "object":
		ok := typ.Kind() == reflect.Map || typ == reflect.TypeFor[json.RawMessage]()
		assertf(t, ok, "%s: an object without properties, carried by %s", path, typ)
	default: // any JSON value
		assertf(t, typ.Kind() == reflect.Interface || typ == reflect.TypeFor[json.RawMessage](), "%s: any JSON value, carried by %s", path, typ)
	}
}

// resolve follows a $ref and merges allOf.
func (s spec) resolve(sc *schema) *schema {
	if sc.Ref != "" {
		return s.resolve(s.Components.Schemas[strings.TrimPrefix(sc.Ref, "#/components/schemas/")])
	}
	if len(sc.AllOf) == 0 {
		return sc
	}
	merged := &schema{Type: "object", Properties: map[string]*schema{}}
	for _, part := range sc.AllOf {
		part = s.resolve(part)
		for k, v := range part.Properties {
			merged.Properties[k] = v
		}
		merged.Required = append(merged.Required, part.Required...)
	}
	return merged
}

type jsonField struct {
	typ     reflect.Type
	omitted bool // omitempty or omitzero
}

// jsonFields are the JSON members of struct typ, embedded structs' included.
func jsonFields(typ reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitted: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")}
	}
	return out
}

func assertf(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}
