package printable_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/printable"
)

func TestString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcode, 日本":  "plain text, ünïcode, 日本",
		"osc\x1b]52;c;aGk=\x07end": `osc\x1b]52;c;aGk=\x07end`,
		"clear\x1b[2J":             `clear\x1b[2J`,
		"csi\u009b31m":             `csi\u009b31m`,
		"rlo\u202eexe.gnp":         `rlo\u202eexe.gnp`,
		"zero\u200bwidth":          `zero\u200bwidth`,
		"lines\r\n\tand\u2028":     `lines\r\n\tand\u2028`,
		"del\x7f nul\x00":          `del\x7f nul\x00`,
		"bad utf-8 \xff\xfe":       `bad utf-8 \xff\xfe`,
		`already \x1b escaped`:     `already \x1b escaped`,
	} {
		got := printable.String(in)
		require.Equal(t, want, got, "%q", in)
		require.Equal(t, got, printable.String(got), "idempotent on %q", in)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	v := map[string]string{"reason": "a\x1b[2J b\u009b c\u202e d\x7f e日本"}
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	got := printable.JSON(raw)
	require.NotContains(t, string(got), "\u009b")
	require.NotContains(t, string(got), "\u202e")
	require.NotContains(t, string(got), "\x7f")
	require.Contains(t, string(got), "日本")
	var back map[string]string
	require.NoError(t, json.Unmarshal(got, &back))
	require.Equal(t, v, back, "the same value")
}
