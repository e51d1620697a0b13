package redact

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"slices"
	"strings"
)

// MinSecretValue is the shortest secret value scrubbed on its own wherever
// it appears: shorter ones (a flag, a version) say next to nothing, and
// taking them out everywhere would garble the text.
const MinSecretValue = 4

// minCutPrefix is the shortest start of a secret's form that a cut answer
// may end with and still be masked (Values.Cut). Shorter ones tell
// next to nothing of a secret at least MinSecretValue long, and masking
// every text that ends in one or two letters a value starts with would
// garble ordinary answers.
const minCutPrefix = 3

// Values takes secret values (an endpoint's custom header values, a
// broker destination's credentials)
// out of a text, in every form a receiver's answer is likely to quote them
// in: as is, JSON-escaped, HTML-escaped, percent-encoded and base64 (std
// and URL alphabets, padded or not, and inside a longer base64 text). A
// receiver's error page may echo the request's headers in any of these,
// and the answer is stored with the attempt, in the dead letter, in the
// workflow's history, and in hookflow.dead_letter.created's reason, which
// other receivers get.
type Values struct {
	// forms are every form of every value, longest first, so that a form
	// that holds another is taken out whole.
	forms    []string
	replacer *strings.Replacer
}

// NewValues returns the scrubber for values; nil when there is none,
// and a nil scrubber leaves texts as they are.
func NewValues(values []string) *Values {
	seen := map[string]bool{}
	var forms []string
	for _, v := range values {
		if len(v) < MinSecretValue {
			continue
		}
		for _, f := range secretForms(v) {
			if len(f) >= MinSecretValue && !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		}
	}
	if len(forms) == 0 {
		return nil
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	args := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		args = append(args, f, Mark)
	}
	return &Values{forms: forms, replacer: strings.NewReplacer(args...)}
}

// Replace takes every form of every value out of text.
func (s *Values) Replace(text string) string {
	if s == nil {
		return text
	}
	return s.replacer.Replace(text)
}

// Cut returns text cut to at most limit bytes with every form of every
// value taken out. The text is cut first and scrubbed after, so that a
// value the cut splits is not left behind as its start: a cut text that
// ends with the start of a form (minCutPrefix bytes or more) loses that
// end too. Scrubbing may lengthen the text (the mark is longer than a
// short value), so it is cut again, and its end looked at again.
func (s *Values) Cut(text string, limit int) string {
	if len(text) > limit {
		text = text[:limit]
	}
	if s == nil {
		return text
	}
	text = s.Replace(text)
	if len(text) > limit {
		text = text[:limit]
	}
	return s.maskTail(text)
}

// maskTail replaces the longest end of text that is the start of a form
// (but not the whole form, which replace took out) with the mark.
func (s *Values) maskTail(text string) string {
	longest := 0
	for _, f := range s.forms {
		// The first place from which the rest of text starts f is the
		// longest such end; most places fail on their first byte.
		for i := max(0, len(text)-len(f)+1); i <= len(text)-max(minCutPrefix, longest+1); i++ {
			if text[i] == f[0] && strings.HasPrefix(f, text[i:]) {
				longest = len(text) - i
				break
			}
		}
	}
	if longest == 0 {
		return text
	}
	return text[:len(text)-longest] + Mark
}

// secretForms are the forms of v that a receiver's answer may quote: v
// itself, escaped for JSON (with and without HTML escaping, and with "/"
// escaped as some encoders do), for HTML (named and numeric references),
// percent-encoded (as a query or path component, and every byte, with
// upper- and lower-case hex digits), and in base64.
func secretForms(v string) []string {
	forms := []string{v}
	for _, escapeHTML := range []bool{true, false} {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(escapeHTML)
		if enc.Encode(v) == nil {
			j := strings.TrimSuffix(strings.TrimSpace(buf.String()), `"`)[1:]
			forms = append(forms, j, strings.ReplaceAll(j, "/", `\/`))
		}
	}
	h := html.EscapeString(v)
	forms = append(forms, h, strings.NewReplacer("&#34;", "&quot;", "&#39;", "&#x27;").Replace(h),
		strings.NewReplacer("&#34;", "&quot;", "&#39;", "&apos;").Replace(h))
	var upper, lower strings.Builder
	for _, b := range []byte(v) {
		fmt.Fprintf(&upper, "%%%02X", b)
		fmt.Fprintf(&lower, "%%%02x", b)
	}
	for _, p := range []string{url.QueryEscape(v), url.PathEscape(v), upper.String()} {
		forms = append(forms, p, lowerHexEscapes(p))
	}
	return append(forms, base64Forms(v)...)
}

// lowerHexEscapes writes the hex digits of p's percent escapes in lower case.
func lowerHexEscapes(p string) string {
	b := []byte(p)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// base64Forms are v in base64, std and URL alphabets, padded and not; and,
// for v inside a longer text encoded whole (a dump of the request's
// headers, say), the characters that v alone decides at each of the three
// offsets it may start at: the encoding of the bytes before and after it
// changes only the characters that straddle its edges.
func base64Forms(v string) []string {
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		raw := enc.WithPadding(base64.NoPadding)
		out = append(out, enc.EncodeToString([]byte(v)), raw.EncodeToString([]byte(v)))
		for off := range 3 {
			b := make([]byte, off+len(v))
			copy(b[off:], v)
			e := raw.EncodeToString(b)
			from, to := (8*off+5)/6, 8*(off+len(v))/6
			out = append(out, e[from:to])
		}
	}
	return out
}
