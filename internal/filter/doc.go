// Package filter is the language of an endpoint's filter: a JSON match, in
// the style of Hookdeck Outpost's and MongoDB's, over the event's data and
// the producer's metadata. It is evaluated at acceptance, where types are
// routed, so an event a filter leaves out never enters that endpoint's lane.
//
// # The document
//
// A filter reads the document
//
//	{"data": <the event's data, an object>, "metadata": <the producer's metadata, an object; absent when none was sent>}
//
// # The filter
//
// A filter is a JSON object. At its top level the keys are "data",
// "metadata" and the logical operators:
//
//	"$and": [filter, ...]   every filter matches (1 or more)
//	"$or":  [filter, ...]   some filter matches (1 or more)
//	"$not": filter          the filter does not match
//
// Any other key is refused. All the keys of an object must hold; a key
// written twice keeps its last value, as everywhere hookflow reads JSON. The empty
// filter {} is refused, anywhere: one that matches every event is better
// written as no filter (null).
//
// Below a field name, the value is a condition on that field:
//
//   - a string, number, boolean or null: the field equals it;
//   - an array: the field is an equal array (deep equality);
//   - an object of operators (every key starts with "$"), all of which must
//     hold;
//   - an object of field names (no key starts with "$"): the field is an
//     object whose named fields match, each its own condition, as in
//     {"data": {"customer": {"tier": "gold"}}}. Field names are literal:
//     "a.b" is one key with a dot in it, not a path.
//
// An object that mixes operators and field names is refused.
//
// # Operators
//
//	$eq      any JSON value      the field equals it
//	$neq     any JSON value      the field does not equal it
//	$gt $gte $lt $lte
//	         a number or string  the field is greater (or equal), less (or equal)
//	$in      [value, ...]        the field equals one of 1 to MaxIn values
//	$nin     [value, ...]        the field equals none of them
//	$exists  true or false       the field is present (even as null), or absent
//	$prefix  a string            the field is a string starting with it
//	$and     [condition, ...]    every condition holds on the same field
//	$or      [condition, ...]    some condition holds on the same field
//	$not     condition           the condition does not hold on the field
//
// For example {"data": {"amount": {"$not": {"$gt": 5}}}} or
// {"metadata": {"region": {"$or": [{"$eq": "eu"}, {"$prefix": "eu-"}]}}}.
//
// # Values
//
// Numbers are compared as numbers, exactly: 1, 1.0 and 1e0 are equal,
// everywhere (in $eq, $in and inside arrays and objects compared whole),
// and 9007199254740993 is greater than 9007199254740992, which a float64
// cannot tell apart. Strings compare bytewise, which orders ISO 8601
// timestamps of one format by time. $gt, $gte, $lt and $lte never match a
// field of the other kind (a string against a number, a number against a
// string, or any other type). Two objects are equal when they have the
// same keys with equal values; two arrays when they have the same length
// and equal elements in order.
//
// # Arrays in the event
//
// A comparison with a scalar operand ($eq or equality with a string,
// number, boolean or null, $gt, $gte, $lt, $lte, $in, $prefix) against a
// field holding an array matches when any element matches, as in MongoDB:
// {"tags": "vip"} matches {"tags": ["new", "vip"]}. $neq and $nin match
// when no element does. An array or object operand is compared with the
// whole field. An object of field names against an array matches when one
// element matches all of it, as MongoDB's $elemMatch:
// {"items": {"sku": "A1", "qty": {"$gt": 5}}} matches when one item has
// both. $exists looks at presence only.
//
// # Missing fields
//
// A field that is absent (not null: absent) matches no comparison, but for
// $neq, $nin and {"$exists": false}, which match it: this is MongoDB's
// rule, and it makes $neq the exact negation of $eq. So {"region":
// {"$neq": "eu"}} takes every event without a region, and {"region": null}
// only one whose region is null. $not negates whatever is inside it,
// absence included. A field inside something that is not an object is
// absent.
//
// # Limits
//
// A filter is at most MaxBytes of canonical JSON, MaxDepth levels deep,
// MaxNodes keys in all, and MaxIn values in one $in or $nin, so its cost at
// acceptance is bounded by its size: there are no loops and no functions.
//
// # Why not CEL
//
// A filter is data: the portal edits it as JSON, the API stores and shows
// it as JSON, its cost is bounded by its size without a cost estimator,
// and it needs no dependency.
package filter
