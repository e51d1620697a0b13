package filter

import (
	"strings"
)

// cond is a compiled condition on one value: v is the value and present
// says whether the field exists at all (a missing field is not null).
// Implementations hold no state that eval changes, so one Filter serves
// every goroutine, and eval allocates nothing.
type cond interface {
	eval(v any, present bool) bool
}

// Match reports whether the event d passes the filter. A nil filter is no
// filter, and takes every event.
func (f *Filter) Match(d Doc) bool {
	if f == nil {
		return true
	}
	return f.root.eval(d.root, true)
}

type andCond []cond

func (c andCond) eval(v any, present bool) bool {
	for _, s := range c {
		if !s.eval(v, present) {
			return false
		}
	}
	return true
}

type orCond []cond

func (c orCond) eval(v any, present bool) bool {
	for _, s := range c {
		if s.eval(v, present) {
			return true
		}
	}
	return false
}

// notCond is $not, and $neq and $nin too: negating includes the missing
// field, which is MongoDB's rule ({"$neq": 1} holds where there is no
// field).
type notCond struct{ c cond }

func (c notCond) eval(v any, present bool) bool { return !c.c.eval(v, present) }

type existsCond bool

func (c existsCond) eval(_ any, present bool) bool { return present == bool(c) }

// elemTest is a test on one value, which anyElem extends to arrays.
type elemTest interface{ one(v any) bool }

// anyElem applies c to v or, when v is an array, to each element: a
// comparison matches an array holding a matching element, as in MongoDB.
// It is generic, not an interface call on a closure, so that Match
// allocates nothing.
func anyElem[T elemTest](c T, v any) bool {
	if a, ok := v.([]any); ok {
		for _, e := range a {
			if c.one(e) {
				return true
			}
		}
		return false
	}
	return c.one(v)
}

// eqCond is equality: with a scalar operand, any element of an array
// field; with an array or object operand, the whole field.
type eqCond struct {
	want   any
	scalar bool
}

func (c eqCond) eval(v any, present bool) bool {
	if !present {
		return false
	}
	if c.scalar {
		return anyElem(c, v)
	}
	return c.one(v)
}

func (c eqCond) one(v any) bool { return equal(v, c.want) }

type inCond []eqCond

func (c inCond) eval(v any, present bool) bool {
	for _, e := range c {
		if e.eval(v, present) {
			return true
		}
	}
	return false
}

type cmpOp uint8

const (
	opGT cmpOp = iota
	opGTE
	opLT
	opLTE
)

// cmpCond is $gt, $gte, $lt or $lte against a number or a string; a field
// of the other kind never matches.
type cmpCond struct {
	op  cmpOp
	num *number // nil for a string operand
	str string
}

func (c cmpCond) eval(v any, present bool) bool {
	if !present {
		return false
	}
	return anyElem(c, v)
}

func (c cmpCond) one(v any) bool {
	var r int
	switch x := v.(type) {
	case *number:
		if c.num == nil {
			return false
		}
		r = cmpNumber(x, c.num)
	case string:
		if c.num != nil {
			return false
		}
		r = strings.Compare(x, c.str)
	default:
		return false
	}
	switch c.op {
	case opGT:
		return r > 0
	case opGTE:
		return r >= 0
	case opLT:
		return r < 0
	}
	return r <= 0
}

type prefixCond string

func (c prefixCond) eval(v any, present bool) bool {
	if !present {
		return false
	}
	return anyElem(c, v)
}

func (c prefixCond) one(v any) bool {
	s, ok := v.(string)
	return ok && strings.HasPrefix(s, string(c))
}

type field struct {
	name string
	c    cond
}

// fieldsCond is an object of field names, each of which must match. On
// an array it matches when some element does (all the fields in the same
// element, as MongoDB's $elemMatch); on anything but an object the fields
// are missing.
type fieldsCond []field

func (c fieldsCond) eval(v any, _ bool) bool {
	return anyElem(c, v)
}

func (c fieldsCond) one(v any) bool {
	m, _ := v.(map[string]any)
	for _, f := range c {
		fv, ok := m[f.name]
		if !f.c.eval(fv, ok) {
			return false
		}
	}
	return true
}
