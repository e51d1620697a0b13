package eventtypes_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/eventtypes"
	"github.com/hookflow/hookflow/kit/intake"
)

// matchCase is one row of testdata/matches.json, the table the store's
// EndpointsSubscribed query is held to as well.
type matchCase struct {
	Patterns []string `json:"patterns"`
	Type     string   `json:"type"`
	Match    bool     `json:"match"`
}

func TestMatches(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/matches.json")
	require.NoError(t, err)
	var cases []matchCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	for _, c := range cases {
		require.NoError(t, eventtypes.Validate(c.Patterns), "the table uses valid patterns only: %q", c.Patterns)
		require.Equal(t, c.Match, eventtypes.Matches(c.Patterns, c.Type), "%q against %q", c.Patterns, c.Type)
	}
}

// TestPrefixIsADottedPrefix: "order.*" is every type below "order.", and
// neither "order" itself nor a type that merely starts with the same letters.
func TestPrefixIsADottedPrefix(t *testing.T) {
	t.Parallel()
	p := []string{"order.*"}
	for _, typ := range []string{"order.created", "order.a.b", "order.*", "order..x"} {
		require.True(t, eventtypes.Matches(p, typ), typ)
	}
	for _, typ := range []string{"order", "orders.x", "orde", "", "x.order.created"} {
		require.False(t, eventtypes.Matches(p, typ), typ)
	}
}

func TestValidateRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		patterns []string
		field    string
		detail   string
	}{
		{[]string{""}, "event_types[0]", "empty"},
		{[]string{"order.created", "  "}, "event_types[1]", "empty"},
		{[]string{"a", "b", "order\n.created"}, "event_types[2]", "control characters"},
		{[]string{"order.\x00"}, "event_types[0]", "control characters"},
		{[]string{strings.Repeat("t", 256)}, "event_types[0]", "255"},
		{[]string{"order*"}, "event_types[0]", `"*"`},
		{[]string{"*.created"}, "event_types[0]", `"*"`},
		{[]string{"order.*.created"}, "event_types[0]", `"*"`},
		{[]string{"order.**"}, "event_types[0]", `"*"`},
		{[]string{"**"}, "event_types[0]", `"*"`},
		{[]string{"*.*"}, "event_types[0]", `"*"`},
		{[]string{".*"}, "event_types[0]", "prefix"},
		{[]string{" .*"}, "event_types[0]", "prefix"},
		{make([]string, eventtypes.MaxPatterns+1), "event_types", "at most 100"},
	}
	for _, c := range cases {
		err := eventtypes.Validate(c.patterns)
		var fe *intake.FieldError
		require.ErrorAs(t, err, &fe, "%q", c.patterns)
		require.Equal(t, c.field, fe.Field, "%q", c.patterns)
		require.Contains(t, fe.Detail, c.detail, "%q", c.patterns)
	}
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	many := make([]string, eventtypes.MaxPatterns)
	for i := range many {
		many[i] = fmt.Sprintf("type.%d", i)
	}
	for _, ps := range [][]string{
		nil, {}, {"*"}, {"order.*"}, {"order.created"}, {"order.line.*", "user.deleted"},
		{strings.Repeat("t", 255)}, {"order created"}, {"commande.créée"}, {"a..*"}, many,
	} {
		require.NoError(t, eventtypes.Validate(ps), "%q", ps)
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	got, err := eventtypes.Normalize([]string{"order.*", "user.deleted", "order.*", "user.deleted", "a"})
	require.NoError(t, err)
	require.Equal(t, []string{"order.*", "user.deleted", "a"}, got, "repeats dropped, order kept")

	for _, empty := range [][]string{nil, {}} {
		_, err = eventtypes.Normalize(empty)
		var fe *intake.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "event_types", fe.Field)
	}

	_, err = eventtypes.Normalize([]string{"a", "b*"})
	var fe *intake.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "event_types[1]", fe.Field)
}

// MostShared counts the other lists that share the busiest type the new
// patterns match: lists that overlap the new one on different types are
// not added up.
func TestMostShared(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		others   [][]string
		want     int
	}{
		{[]string{"*"}, nil, 0},
		{[]string{"*"}, [][]string{{"a.x"}, {"b.y"}, {"c.*"}}, 1},
		{[]string{"*"}, [][]string{{"a.x"}, {"a.*"}, nil, {"*"}}, 4},
		{[]string{"a.x"}, [][]string{{"a.*"}, {"a.x.*"}, {"b.*"}, {"a.x"}}, 2},
		{[]string{"a.*"}, [][]string{{"a.b"}, {"a.b.*"}, {"a.*"}, {"b.a"}}, 2},
		{[]string{"a.b.*"}, [][]string{{"a.*"}, {"a.b.c"}, {"a.b.d"}, {"a.c"}}, 2},
		{[]string{"order"}, [][]string{{"order.*"}, {"orders"}}, 0},
		{[]string{"order.", "x"}, [][]string{{"order.*"}, {"order."}}, 2},
		{[]string{"a.*", "b.*"}, [][]string{{"a.*", "b.*"}, {"b.c"}, {"b.*"}}, 3},
	} {
		require.Equal(t, c.want, eventtypes.MostShared(c.patterns, c.others, ""), "%v against %v", c.patterns, c.others)
	}
	others := [][]string{{"hookflow.*"}, {"hookflow.dead_letter.*"}, {"order.x"}}
	require.Equal(t, 1, eventtypes.MostShared(nil, others, "hookflow."), "reserved types are not counted")
	require.Equal(t, 0, eventtypes.MostShared([]string{"hookflow.*"}, others, "hookflow."))
	require.Equal(t, 2, eventtypes.MostShared([]string{"hookflow.*"}, others, ""))
}
