// Package eventtypes decides which events an endpoint is subscribed to: the
// patterns of its event_types, what a valid one is, and whether an event's
// type matches them.
//
// A pattern is one of
//   - "*": every type;
//   - "prefix.*": every type that starts with "prefix." ("order.*" matches
//     "order.created" and "order.a.b", not "order" nor "orders.x"), as Svix
//     and Convoy read a trailing wildcard;
//   - anything else: that exact type.
//
// A list with no pattern (nil) is every type. A pattern obeys the rule an
// event's type does (intake.ValidType), and "*" may appear only as the whole
// pattern or as the last character after a ".": a type with a "*" elsewhere
// cannot be named exactly (a wildcard is what "*" means to a reader).
//
// Matches here and the store's EndpointsSubscribed query implement the same
// rule; the store's tests hold both to one table.
package eventtypes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hookflow/hookflow/kit/intake"
)

// Field is the name of an endpoint's list of patterns in the API; errors
// name it, or one of its items as event_types[i].
const Field = "event_types"

// MaxPatterns bounds a list: each event's routing reads every endpoint's
// list, and a hundred names is far more than a subscriber spells out.
const MaxPatterns = 100

// All is the pattern that matches every type.
const All = "*"

// wildcard ends a prefix pattern.
const wildcard = ".*"

// Validate checks every pattern and the length of the list. Its error is an
// *intake.FieldError naming the list (event_types) or the pattern at fault
// (event_types[2]). A nil or empty list is valid: it is every type.
func Validate(patterns []string) error {
	if len(patterns) > MaxPatterns {
		return &intake.FieldError{Field: Field, Detail: fmt.Sprintf("%s lists at most %d patterns (found %d)", Field, MaxPatterns, len(patterns))}
	}
	for i, p := range patterns {
		if fe := validPattern(fmt.Sprintf("%s[%d]", Field, i), p); fe != nil {
			return fe
		}
	}
	return nil
}

func validPattern(field, p string) *intake.FieldError {
	if fe := intake.ValidType(field, p); fe != nil {
		return fe
	}
	if p == All {
		return nil
	}
	rest := strings.TrimSuffix(p, wildcard)
	if strings.Contains(rest, "*") {
		return &intake.FieldError{Field: field, Detail: fmt.Sprintf(`%s: "*" may only stand alone ("*") or end a prefix ("order.*")`, field)}
	}
	if rest != p && strings.TrimSpace(rest) == "" {
		return &intake.FieldError{Field: field, Detail: fmt.Sprintf(`%s: a wildcard needs a prefix before ".*" ("order.*"), or "*" for every type`, field)}
	}
	return nil
}

// Normalize is Validate for a list a client sent, which must name at least
// one pattern (an endpoint subscribed to nothing would never be sent
// anything: leaving the list out means every type). It returns the list
// without repeats, in the order given.
func Normalize(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, &intake.FieldError{Field: Field, Detail: fmt.Sprintf(`%s must list at least one pattern; leave it out, or send null or ["*"], for every type`, Field)}
	}
	if err := Validate(patterns); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Matches reports whether eventType is one the patterns subscribe to; a nil
// or empty list subscribes to every type.
func Matches(patterns []string, eventType string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		switch {
		case p == All, p == eventType:
			return true
		case strings.HasSuffix(p, wildcard) && strings.HasPrefix(eventType, p[:len(p)-1]):
			return true
		}
	}
	return false
}

// MostShared is the most of the lists in others that match one type that
// patterns matches too: how many other endpoints share the busiest type a
// new list of patterns would subscribe to. Types that start with reserved
// ("" for none) are not counted: hookflow's operational types, which no
// producer may send, are routed and capped by a rule of their own. It is exact, not a bound: the
// busiest type is one of the exact types named (by patterns or by others)
// or, for a prefix ("order.*", or "*"), a type under it that no longer
// pattern names, and only those candidates are counted. Each is counted
// against indexes of the others' patterns, so the work is the candidates
// times the prefixes of each (a type has few dots), not times every list.
func MostShared(patterns []string, others [][]string, reserved string) int {
	all := []int{}               // lists of every type
	exact := map[string][]int{}  // type -> lists naming it
	prefix := map[string][]int{} // "order." -> lists with "order.*"
	// The types to count: each exact type named, and for each prefix a
	// type under it that nothing longer names, "order." + NUL (a NUL
	// cannot be in a valid type, so it is no exact type).
	candidates := map[string]bool{"\x00": true}
	add := func(p string, i int) {
		switch {
		case p == All:
			if i >= 0 {
				all = append(all, i)
			}
		case strings.HasSuffix(p, wildcard):
			if i >= 0 {
				prefix[p[:len(p)-1]] = append(prefix[p[:len(p)-1]], i)
			}
			candidates[p[:len(p)-1]+"\x00"] = true
		default:
			if i >= 0 {
				exact[p] = append(exact[p], i)
			}
			candidates[p] = true
		}
	}
	for i, list := range others {
		if len(list) == 0 {
			add(All, i)
		}
		for _, p := range list {
			add(p, i)
		}
	}
	for _, p := range patterns {
		add(p, -1)
	}
	seen := make([]int, len(others)) // the candidate that last counted list i, plus one
	most, round := 0, 0
	for t := range candidates {
		if !Matches(patterns, t) || reserved != "" && strings.HasPrefix(t, reserved) {
			continue
		}
		round++
		n := 0
		count := func(lists []int) {
			for _, i := range lists {
				if seen[i] != round {
					seen[i] = round
					n++
				}
			}
		}
		count(all)
		count(exact[t])
		for j := 0; j < len(t); j++ {
			if t[j] == '.' {
				count(prefix[t[:j+1]])
			}
		}
		most = max(most, n)
	}
	return most
}
