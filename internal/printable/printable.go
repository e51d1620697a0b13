// Package printable makes text that comes from outside hookflow (a
// receiver's answer, an error quoting a receiver's certificate) safe to put
// on an operator's terminal or in a log line: every character a terminal
// acts on, or that hides or reorders what is shown, is written as an escape
// a person can read, so "\x1b]52;…" cannot write the operator's clipboard
// and "\u202e" cannot turn a line around.
package printable

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// unsafe reports whether r must not reach a terminal as is: C0 and C1
// controls and DEL, format characters (bidirectional overrides, zero-width
// ones) and the line and paragraph separators.
func unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// String returns s with every unsafe character escaped: \n, \r and \t as
// such, other ASCII controls and DEL as \xHH, the rest as \uHHHH, and bytes
// that are not UTF-8 as \xHH. Everything else, the backslash included, is
// left as it is, so String of its own result changes nothing.
func String(s string) string {
	if !strings.ContainsFunc(s, unsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < utf8.RuneSelf && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// JSON returns JSON text with the unsafe characters encoding/json leaves
// as they are (DEL, C1 controls, format characters) written as \u escapes.
// JSON's own syntax is ASCII, so they can only be inside strings, where the
// escape means the same character: the value is unchanged.
func JSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r >= 0x7f && unsafe(r) }) {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b) + 16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x7f && r != utf8.RuneError && unsafe(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[i : i+size])
		}
		i += size
	}
	return out.Bytes()
}
