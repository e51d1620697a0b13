package filter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hookflow/hookflow/kit/intake"
)

// Field is the name of an endpoint's filter in the API.
const Field = "filter"

// Caps on a filter, so that what a filter costs at every acceptance is
// bounded by its size: there are no loops, and nothing to estimate.
const (
	// MaxBytes bounds a filter's canonical JSON (Raw), so the way a
	// client spaces it neither helps nor hurts.
	MaxBytes = 4096
	// MaxDepth bounds nesting: the filter object is level 1 and each
	// object or array inside it one more.
	MaxDepth = 16
	// MaxNodes bounds the keys of every object in the filter, field names
	// and operators alike (keys inside operand values count too).
	MaxNodes = 256
	// MaxIn bounds the values of one $in or $nin.
	MaxIn = 100
)

// Filter is a compiled filter: immutable, safe for concurrent use.
type Filter struct {
	root cond
	raw  json.RawMessage
}

// Raw returns the filter's canonical JSON (intake.Canonical of what was
// compiled): what to store, and what compiles to the same filter again.
// A nil filter's is nil.
func (f *Filter) Raw() json.RawMessage {
	if f == nil {
		return nil
	}
	return f.raw
}

// Compile checks raw and returns the compiled filter. Its error is an
// *intake.FieldError whose Field is the path of the fault, starting with
// "filter" ("filter", "filter.data.amount.$gt", "filter.$or[1].metadata.region"),
// and whose Detail says why in one sentence a user can act on.
func Compile(raw json.RawMessage) (*Filter, error) {
	f, fe := compile(raw)
	if fe != nil {
		return nil, fe
	}
	return f, nil
}

func compile(raw json.RawMessage) (*Filter, *intake.FieldError) {
	canon, err := intake.Canonical(raw)
	if err != nil {
		return nil, fault(Field, "filter is not valid JSON: send a JSON object, or null for no filter")
	}
	if len(canon) > MaxBytes {
		return nil, fault(Field, "filter is %d bytes, more than the %d allowed: simplify it", len(canon), MaxBytes)
	}
	if intake.ContainsNUL(canon) {
		// No event's data or metadata holds one (intake refuses it), and
		// the endpoint's row could not keep it.
		return nil, fault(Field, "filter must not contain the NUL character (\\u0000)")
	}
	v, err := decode(canon)
	if err != nil {
		return nil, fault(Field, "filter is not valid JSON: send a JSON object, or null for no filter")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault(Field, "filter must be a JSON object, or null for no filter (found %s)", kind(v))
	}
	if fe := checkDepth(v, Field, 1); fe != nil {
		return nil, fe
	}
	if n := countKeys(v); n > MaxNodes {
		return nil, fault(Field, "filter has %d fields and operators, more than the %d allowed: simplify it", n, MaxNodes)
	}
	root, fe := compileTop(m, Field)
	if fe != nil {
		return nil, fe
	}
	return &Filter{root: root, raw: canon}, nil
}

func fault(path, format string, args ...any) *intake.FieldError {
	return &intake.FieldError{Field: path, Detail: fmt.Sprintf(format, args...)}
}

func checkDepth(v any, path string, depth int) *intake.FieldError {
	switch x := v.(type) {
	case []any:
		if depth > MaxDepth {
			return fault(path, "filter nests deeper than %d levels here: flatten it", MaxDepth)
		}
		for i, e := range x {
			if fe := checkDepth(e, index(path, i), depth+1); fe != nil {
				return fe
			}
		}
	case map[string]any:
		if depth > MaxDepth {
			return fault(path, "filter nests deeper than %d levels here: flatten it", MaxDepth)
		}
		for _, k := range sortedKeys(x) {
			if fe := checkDepth(x[k], path+"."+k, depth+1); fe != nil {
				return fe
			}
		}
	}
	return nil
}

func countKeys(v any) int {
	n := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			n += countKeys(e)
		}
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += countKeys(e)
		}
	}
	return n
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// compileTop compiles a filter over the document: data, metadata and the
// logical operators over whole filters.
func compileTop(m map[string]any, path string) (cond, *intake.FieldError) {
	if len(m) == 0 {
		return nil, fault(path, "an empty filter matches every event: remove it (null means no filter)")
	}
	var fields fieldsCond
	var all andCond
	for _, k := range sortedKeys(m) {
		at := path + "." + k
		switch k {
		case "data", "metadata":
			c, fe := compileCond(m[k], at)
			if fe != nil {
				return nil, fe
			}
			fields = append(fields, field{name: k, c: c})
		case "$and", "$or":
			list, fe := filterList(m[k], at, k, func(v any, at string) (cond, *intake.FieldError) {
				sub, ok := v.(map[string]any)
				if !ok {
					return nil, fault(at, "each filter in %s must be a JSON object over data and metadata (found %s)", k, kind(v))
				}
				return compileTop(sub, at)
			})
			if fe != nil {
				return nil, fe
			}
			all = append(all, logical(k, list))
		case "$not":
			sub, ok := m[k].(map[string]any)
			if !ok {
				return nil, fault(at, "$not takes one filter, a JSON object over data and metadata (found %s)", kind(m[k]))
			}
			c, fe := compileTop(sub, at)
			if fe != nil {
				return nil, fe
			}
			all = append(all, notCond{c})
		default:
			return nil, fault(at, "filter may match only data and metadata (and combine filters with $and, $or, $not): %q is neither", k)
		}
	}
	if fields != nil {
		all = append(andCond{fields}, all...)
	}
	return simplify(all), nil
}

// filterList compiles the operands of $and or $or: an array of 1 or more.
func filterList(v any, path, op string, each func(any, string) (cond, *intake.FieldError)) ([]cond, *intake.FieldError) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return nil, fault(path, "%s takes an array of one or more conditions", op)
	}
	list := make([]cond, 0, len(a))
	for i, e := range a {
		c, fe := each(e, index(path, i))
		if fe != nil {
			return nil, fe
		}
		list = append(list, c)
	}
	return list, nil
}

func logical(op string, list []cond) cond {
	if len(list) == 1 {
		return list[0]
	}
	if op == "$or" {
		return orCond(list)
	}
	return andCond(list)
}

func simplify(all andCond) cond {
	if len(all) == 1 {
		return all[0]
	}
	return all
}

// compileCond compiles what may follow a field name: a value to equal, an
// object of operators, or an object of nested fields.
func compileCond(v any, path string) (cond, *intake.FieldError) {
	m, ok := v.(map[string]any)
	if !ok {
		return eqCond{want: v, scalar: isScalar(v)}, nil
	}
	if len(m) == 0 {
		return nil, fault(path, `an empty object matches anything: remove it, or write {"$eq": {}} to match an empty object`)
	}
	keys := sortedKeys(m)
	var op, name string
	for _, k := range keys {
		if strings.HasPrefix(k, "$") {
			op = cmpOr(op, k)
		} else {
			name = cmpOr(name, k)
		}
	}
	if op != "" && name != "" {
		return nil, fault(path, "an object may not mix operators (%s) with field names (%q): put nested fields in an object of their own", op, name)
	}
	if op == "" {
		fields := make(fieldsCond, 0, len(keys))
		for _, k := range keys {
			c, fe := compileCond(m[k], path+"."+k)
			if fe != nil {
				return nil, fe
			}
			fields = append(fields, field{name: k, c: c})
		}
		return fields, nil
	}
	all := make(andCond, 0, len(keys))
	for _, k := range keys {
		c, fe := compileOp(k, m[k], path+"."+k)
		if fe != nil {
			return nil, fe
		}
		all = append(all, c)
	}
	return simplify(all), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

const operators = "$eq, $neq, $gt, $gte, $lt, $lte, $in, $nin, $exists, $prefix, $and, $or, $not"

func compileOp(op string, v any, path string) (cond, *intake.FieldError) {
	switch op {
	case "$eq":
		return eqCond{want: v, scalar: isScalar(v)}, nil
	case "$neq":
		return notCond{eqCond{want: v, scalar: isScalar(v)}}, nil
	case "$gt", "$gte", "$lt", "$lte":
		c := cmpCond{op: opGT}
		switch op {
		case "$gte":
			c.op = opGTE
		case "$lt":
			c.op = opLT
		case "$lte":
			c.op = opLTE
		}
		switch x := v.(type) {
		case *number:
			c.num = x
		case string:
			c.str = x
		default:
			return nil, fault(path, "%s takes a number or a string (found %s)", op, kind(v))
		}
		return c, nil
	case "$in", "$nin":
		a, ok := v.([]any)
		if !ok || len(a) == 0 || len(a) > MaxIn {
			return nil, fault(path, "%s takes an array of 1 to %d values", op, MaxIn)
		}
		in := make(inCond, len(a))
		for i, e := range a {
			in[i] = eqCond{want: e, scalar: isScalar(e)}
		}
		if op == "$nin" {
			return notCond{in}, nil
		}
		return in, nil
	case "$exists":
		b, ok := v.(bool)
		if !ok {
			return nil, fault(path, "$exists takes true or false (found %s)", kind(v))
		}
		return existsCond(b), nil
	case "$prefix":
		s, ok := v.(string)
		if !ok {
			return nil, fault(path, "$prefix takes a string (found %s)", kind(v))
		}
		return prefixCond(s), nil
	case "$and", "$or":
		list, fe := filterList(v, path, op, compileCond)
		if fe != nil {
			return nil, fe
		}
		return logical(op, list), nil
	case "$not":
		c, fe := compileCond(v, path)
		if fe != nil {
			return nil, fe
		}
		return notCond{c}, nil
	}
	return nil, fault(path, "unknown operator %s: use one of %s", op, operators)
}

// kind names a JSON value's type for an error message.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case *number:
		return "a number"
	case []any:
		return "an array"
	}
	return "an object"
}
