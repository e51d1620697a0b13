package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/api/apigen"
)

// The server's routes, the parameters they bind and the types they read
// and answer are generated from openapi.json (api/apigen). What the
// generated code does not carry, this file takes from the same document at
// start: the scope each operation needs (its x-hookflow-scope), and the
// checks its parameters and body must pass (required members, lengths,
// patterns, enums, bounds). Only what a schema cannot say stays in the
// handlers: a URL's target, an event type's pattern, what the ledger holds.

var _ apigen.ServerInterface = (*Server)(nil)

// operation is one operation of the document, as the server enforces it.
type operation struct {
	id     string
	method string
	path   string // the document's, e.g. /v1/endpoints/{id}
	scope  Scope  // empty outside /v1
	params openapi3.Parameters
	body   *openapi3.Schema // nil when the operation takes no body
	// namesTenant: the operation takes ?tenant_id= (TenantIdQuery).
	namesTenant bool
	// public: the operation takes no credential (security: [] and
	// x-hookflow-public, the portal's code exchange); auth lets it by.
	public bool
	// anyPrincipal: every credential may run it (x-hookflow-any-principal,
	// GET /v1/session); it names no scope.
	anyPrincipal bool
}

// operationKey is where an operation's middleware leaves it in echo's
// context, for decode's body check.
const operationKey = "hookflow.operation"

// loadOperations reads the document's operations by operationId. Every
// operation under /v1 must name the scope it needs, one of Scopes: the
// document is where a route's scope is said, so a route without one, or
// with a misspelt one (which only an admin key would pass), is refused at
// start.
func loadOperations(raw []byte) (map[string]*operation, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("api: openapi.json: %w", err)
	}
	ops := map[string]*operation{}
	for path, item := range doc.Paths.Map() {
		for method, o := range item.Operations() {
			op := &operation{id: o.OperationID, method: method, path: path}
			op.params = append(op.params, item.Parameters...)
			op.params = append(op.params, o.Parameters...)
			op.namesTenant = op.params.GetByInAndName(openapi3.ParameterInQuery, "tenant_id") != nil
			if o.RequestBody != nil {
				if mt := o.RequestBody.Value.Content.Get(echo.MIMEApplicationJSON); mt != nil && mt.Schema != nil {
					op.body = mt.Schema.Value
				}
			}
			scope, _ := o.Extensions["x-hookflow-scope"].(string)
			op.scope = Scope(scope)
			op.public, _ = o.Extensions["x-hookflow-public"].(bool)
			op.anyPrincipal, _ = o.Extensions["x-hookflow-any-principal"].(bool)
			switch {
			case op.public && (o.Security == nil || len(*o.Security) != 0 || op.scope != "" || strings.Contains(path, "{")):
				return nil, fmt.Errorf("api: openapi.json: %s %s is x-hookflow-public: it must say security: [], name no scope and take no path parameter", method, path)
			case op.anyPrincipal && op.scope != "":
				return nil, fmt.Errorf("api: openapi.json: %s %s is x-hookflow-any-principal and names a scope", method, path)
			case strings.HasPrefix(path, "/v1/") && op.scope == "" && !op.public && !op.anyPrincipal:
				return nil, fmt.Errorf("api: openapi.json: %s %s names no x-hookflow-scope", method, path)
			case op.scope != "" && !slices.Contains(Scopes(), op.scope):
				return nil, fmt.Errorf("api: openapi.json: %s %s names the scope %q, which is none of %v", method, path, op.scope, Scopes())
			}
			ops[op.id] = op
		}
	}
	return ops, nil
}

// operationMiddlewares is each operation's chain, outermost first: its
// scope, the rate limits (reads on every GET under /v1, posts on
// eventCreate and endpointTest), then its parameters' checks, then the tenant its
// ?tenant_id= names (actOn). Auth runs before all of them (Server.auth, on
// every request).
func (s *Server) operationMiddlewares(ops map[string]*operation) map[string][]echo.MiddlewareFunc {
	chains := map[string][]echo.MiddlewareFunc{}
	for id, op := range ops {
		chain := []echo.MiddlewareFunc{op.enter}
		if op.scope != "" {
			chain = append(chain, require(op.scope))
		}
		switch {
		case op.method == http.MethodGet && strings.HasPrefix(op.path, "/v1/"):
			chain = append(chain, s.reads.limit)
		case id == "eventCreate" || id == "endpointTest":
			// A test event is a publish: it spends the same bucket.
			chain = append(chain, s.limits.limit)
		}
		chain = append(chain, op.checkParameters)
		if op.namesTenant {
			chain = append(chain, s.actOnQuery)
		}
		chains[id] = chain
	}
	return chains
}

// enter leaves the operation in the context.
func (op *operation) enter(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(operationKey, op)
		return next(c)
	}
}

// checkParameters checks the path and query parameters a request sends
// against their schemas; the generated wrapper then binds them. A query
// parameter the operation does not take is refused, as an unknown body
// member is: left unread it would be a silent no-op (?tenant_id= on
// POST /v1/endpoints, whose tenant rides in the body, would act on the
// key's own tenant).
func (op *operation) checkParameters(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for _, name := range slices.Sorted(maps.Keys(c.QueryParams())) {
			if op.params.GetByInAndName(openapi3.ParameterInQuery, name) == nil {
				p := fieldProblem(name, fmt.Sprintf("unknown query parameter %s: %s %s takes none of that name", name, op.method, op.path))
				p.Type = problemTypeBase + "unknown-field"
				return p
			}
		}
		for _, ref := range op.params {
			p := ref.Value
			var raw string
			switch p.In {
			case openapi3.ParameterInPath:
				raw = c.Param(p.Name)
			case openapi3.ParameterInQuery:
				vs, ok := c.QueryParams()[p.Name]
				if !ok {
					if p.Required {
						return fieldProblem(p.Name, p.Name+" is required")
					}
					continue
				}
				raw = vs[0]
			default:
				continue
			}
			if err := checkValue(p.Name, raw, p.Schema.Value); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// checkValue checks one parameter's text against its schema, read as the
// schema's type.
func checkValue(name, raw string, schema *openapi3.Schema) error {
	var v any = raw
	switch {
	case schema.Type.Is(openapi3.TypeInteger):
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fieldProblem(name, name+" must be an integer")
		}
		v = n
	case schema.Type.Is(openapi3.TypeNumber):
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fieldProblem(name, name+" must be a number")
		}
		v = f
	case schema.Type.Is(openapi3.TypeBoolean):
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fieldProblem(name, name+" must be true or false")
		}
		v = b
	}
	if err := schema.VisitJSON(v); err != nil {
		return schemaProblem(name, err)
	}
	return nil
}

// checkBody checks a decoded request body against the operation's schema.
func checkBody(c echo.Context, body []byte) error {
	op, _ := c.Get(operationKey).(*operation)
	if op == nil || op.body == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return jsonProblem(err)
	}
	if err := op.body.VisitJSON(v); err != nil {
		return bodyProblem(op.body, err)
	}
	return nil
}

// refusal is a member's x-hookflow-refusal in the document: the status its
// refusals are answered with (400 by default), and that of a value of the
// wrong kind (kind_status; 400 by default, as the JSON decoder answers).
// It holds for the member and everything in it.
type refusal struct {
	Status     int `json:"status"`
	KindStatus int `json:"kind_status"`
}

// bodyProblem is a body schema's refusal as a problem naming the member at
// fault (event_types[1], headers.x-api-key), with the status the document
// gives the member (x-hookflow-refusal). A value of the wrong kind, or not
// one of an enum's, in a list or a map names the list or the map, as the
// JSON decoder does.
func bodyProblem(root *openapi3.Schema, err error) *Problem {
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return fieldProblem("", err.Error())
	}
	var (
		field     string
		container = -1 // where field's first list index or map key starts
		rule      refusal
	)
	sch := root
	for _, part := range se.JSONPointer() {
		_, index := strconv.Atoi(part)
		switch {
		case index == nil:
			if container < 0 {
				container = len(field)
			}
			field += "[" + part + "]"
			sch = itemsOf(sch)
		default:
			next, inMap := memberOf(sch, part)
			if inMap && container < 0 {
				container = len(field)
			}
			if field != "" {
				field += "."
			}
			field += part
			sch = next
		}
		if raw, ok := extension(sch, "x-hookflow-refusal"); ok {
			b, _ := json.Marshal(raw)
			_ = json.Unmarshal(b, &rule)
		}
	}
	status := cmp.Or(rule.Status, http.StatusBadRequest)
	kind := se.SchemaField == "type" || se.SchemaField == "nullable"
	if kind {
		status = cmp.Or(rule.KindStatus, http.StatusBadRequest)
	}
	if container >= 0 && (kind || se.SchemaField == "enum") {
		field = field[:container]
	}
	var p *Problem
	switch {
	case unsupported.MatchString(se.Reason):
		name := unsupported.FindStringSubmatch(se.Reason)
		member := strings.TrimPrefix(field+"."+name[1], ".")
		p = fieldProblem(member, member+" is not taken here")
		p.Type = problemTypeBase + "unknown-field"
	case se.SchemaField == "required":
		p = fieldProblem(field, field+" is required")
	case field == "" && se.SchemaField == "minProperties":
		return problem(http.StatusBadRequest, "empty-update", "Nothing to update", "send at least one of "+strings.Join(slices.Sorted(maps.Keys(sch.Properties)), ", "))
	case field == "" && kind:
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the body must be a JSON object")
	case field == "":
		return problem(http.StatusBadRequest, "malformed-json", "Malformed JSON", "the body "+se.Reason)
	default:
		p = fieldProblem(field, field+" "+refusalDetail(se))
	}
	p.Status = status
	return p
}

// unsupported reads the member's name out of the refusal of a member the
// schema does not have (additionalProperties: false).
var unsupported = regexp.MustCompile(`^property "([^"]*)" is unsupported`)

func itemsOf(sch *openapi3.Schema) *openapi3.Schema {
	if sch == nil || sch.Items == nil {
		return nil
	}
	return sch.Items.Value
}

// memberOf is the schema of an object's member, and whether it is a map's
// (additionalProperties) rather than a named property's.
func memberOf(sch *openapi3.Schema, name string) (*openapi3.Schema, bool) {
	switch {
	case sch == nil:
		return nil, false
	case sch.Properties[name] != nil:
		return sch.Properties[name].Value, false
	case sch.AdditionalProperties.Schema != nil:
		return sch.AdditionalProperties.Schema.Value, true
	}
	return nil, false
}

func extension(sch *openapi3.Schema, name string) (any, bool) {
	if sch == nil {
		return nil, false
	}
	v, ok := sch.Extensions[name]
	return v, ok
}

// kindNames are the JSON kinds as the decoder's refusals name them.
var kindNames = map[string]string{
	openapi3.TypeString: "a string", openapi3.TypeInteger: "an integer", openapi3.TypeNumber: "a number",
	openapi3.TypeBoolean: "true or false", openapi3.TypeArray: "an array", openapi3.TypeObject: "an object",
	openapi3.TypeNull: "null",
}

// kindOf names the JSON kinds a schema takes ("a string", "an integer or
// null").
func kindOf(sch *openapi3.Schema) string {
	var kinds []string
	for _, t := range sch.Type.Slice() {
		if k, ok := kindNames[t]; ok {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return "of another JSON type"
	}
	return strings.Join(kinds, " or ")
}

// refusalDetail says what the schema asks of the value, after its name.
func refusalDetail(se *openapi3.SchemaError) string {
	sch := se.Schema
	switch se.SchemaField {
	case "type", "nullable":
		return "must be " + kindOf(sch)
	case "minItems":
		if sch.MinItems == 1 {
			return "must list at least one"
		}
		return fmt.Sprintf("must list at least %d", sch.MinItems)
	case "maxItems":
		return fmt.Sprintf("must list at most %d", *sch.MaxItems)
	case "minLength":
		if sch.MinLength == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters", sch.MinLength)
	case "maxLength":
		return fmt.Sprintf("must be at most %d characters", *sch.MaxLength)
	case "maxProperties":
		return fmt.Sprintf("may have at most %d members", *sch.MaxProps)
	case "minimum":
		return fmt.Sprintf("must be at least %v", *sch.Min)
	case "maximum":
		return fmt.Sprintf("must be at most %v", *sch.Max)
	case "pattern":
		if sch.Description != "" {
			return "is not well-formed: " + sch.Description
		}
		return "must match " + sch.Pattern
	}
	return "is refused: " + se.Reason
}

// schemaProblem is a parameter's refusal by its schema.
func schemaProblem(name string, err error) *Problem {
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		return fieldProblem(name, name+": "+se.Reason)
	}
	return fieldProblem(name, err.Error())
}

// bindingError is the generated wrapper's refusal of a parameter it could
// not bind ("Invalid format for parameter since: …").
var bindingError = regexp.MustCompile(`^Invalid format for parameter ([A-Za-z0-9_]+): `)

// parameterProblem turns the wrapper's binding error into the field problem
// the API answers; ok is false for any other error.
func parameterProblem(he *echo.HTTPError) (*Problem, bool) {
	msg, _ := he.Message.(string)
	m := bindingError.FindStringSubmatch(msg)
	if he.Code != http.StatusBadRequest || m == nil {
		return nil, false
	}
	return fieldProblem(m[1], m[1]+" is not in the form openapi.json gives it"), true
}
