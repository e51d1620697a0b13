package webhook

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/url"
	"slices"
	"strings"

	"github.com/hookflow/hookflow/internal/redact"
)

// Endpoint URLs may carry credentials: a token in the query string (for
// receivers that cannot check signatures), in the path (Slack- and
// Discord-style URLs, unless the endpoint's url_path_public says its path
// holds none) or userinfo (refused at registration, but nothing here should
// rely on that). What the activities
// store, log, put on a span or return to Temporal (where a failure's message
// lands in the workflow history and in the dead letter's reason) names an
// endpoint by its redacted URL only (package redact).

// redactedMark stands in for a credential taken out of a text.
const redactedMark = "[redacted]"

// minSecretValue is the shortest query value, username or password scrubbed
// on its own wherever it appears; shorter ones (a flag, a version) are
// unlikely to be credentials, and replacing them everywhere would garble the
// text. Short ones are still taken out as part of a whole query or
// userinfo.
const minSecretValue = 6

// redactError returns err's text with nothing of the credentials in any URL
// it names, nor of those in target (the request's URL; nil when there is
// none), its path included unless pathPublic. A *url.Error, which
// http.Client.Do and url.Parse return, repeats the whole URL: its part of
// the text is rebuilt from the operation, the redacted URL and the cause,
// as in "Post http://host/[redacted]: dial tcp ...".
func redactError(err error, target *url.URL, pathPublic bool) string {
	msg := err.Error()
	if ue, ok := errors.AsType[*url.Error](err); ok {
		msg = strings.ReplaceAll(msg, ue.Error(), ue.Op+" "+redact.RawURL(ue.URL, pathPublic)+": "+ue.Err.Error())
	}
	return scrub(msg, target, pathPublic)
}

// minPathToken is the shortest segment of a URL's path scrubbed on its own:
// the tokens Slack and Discord put there are 24 and 68 characters, and
// shorter segments are words ("webhook", "services") whose every
// occurrence in a receiver's answer is better kept. The whole path is
// scrubbed at any length from minSecretValue.
const minPathToken = 16

// scrub takes out of text, wherever it quotes them, target's query (as
// sent and decoded), the values in it, its fragment and its userinfo, and
// unless pathPublic its path (as sent and decoded) and each of its
// segments long enough to be a token (minPathToken). A receiver's answer
// may echo the URL it was called at, and an error from a library may quote
// it in a form redactError does not know.
func scrub(text string, target *url.URL, pathPublic bool) string {
	if target == nil {
		return text
	}
	var pairs [][2]string
	// Whole parts are matched with the delimiter that marks them, so that a
	// short query or username is found in a URL and nowhere else.
	part := func(prefix, s, suffix string) {
		if s != "" {
			pairs = append(pairs, [2]string{prefix + s + suffix, prefix + redactedMark + suffix})
		}
	}
	value := func(s string) {
		if len(s) >= minSecretValue {
			pairs = append(pairs, [2]string{s, redactedMark})
		}
	}
	if q := target.RawQuery; q != "" {
		part("?", q, "")
		if dq, err := url.QueryUnescape(q); err == nil {
			part("?", dq, "")
		}
		for _, vs := range target.Query() {
			for _, v := range vs {
				value(v)
				value(url.QueryEscape(v))
			}
		}
	}
	if !pathPublic {
		for _, p := range []string{target.EscapedPath(), target.Path} {
			value(p)
			for seg := range strings.SplitSeq(p, "/") {
				if len(seg) >= minPathToken {
					pairs = append(pairs, [2]string{seg, redactedMark})
				}
			}
		}
	}
	part("#", target.EscapedFragment(), "")
	part("#", target.Fragment, "")
	if u := target.User; u != nil {
		part("", u.String(), "@")
		value(u.Username())
		if p, ok := u.Password(); ok {
			value(p)
		}
	}
	if len(pairs) == 0 {
		return text
	}
	// A Replacer tries its pairs in order at each position: longest first,
	// so a value is not taken out of a query before the query is matched.
	slices.SortFunc(pairs, func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(len(b[0]), len(a[0])), strings.Compare(a[0], b[0]))
	})
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p[0], p[1])
	}
	return strings.NewReplacer(args...).Replace(text)
}

// minHeaderSecret is the shortest custom header value scrubbed on its own
// wherever it appears, as minSecretValue is for a URL's.
const minHeaderSecret = 4

// minCutPrefix is the shortest start of a secret's form that a cut answer
// may end with and still be masked (valueScrubber.cut). Shorter ones tell
// next to nothing of a secret at least minHeaderSecret long, and masking
// every text that ends in one or two letters a value starts with would
// garble ordinary answers.
const minCutPrefix = 3

// headerValues are the values of an endpoint's custom headers worth
// scrubbing from what a receiver answers (valueScrubber).
func headerValues(h map[string]string) []string {
	var out []string
	for _, v := range h {
		if len(v) >= minHeaderSecret {
			out = append(out, v)
		}
	}
	return out
}

// valueScrubber takes secret values (an endpoint's custom header values)
// out of a text, in every form a receiver's answer is likely to quote them
// in: as is, JSON-escaped, HTML-escaped, percent-encoded and base64 (std
// and URL alphabets, padded or not, and inside a longer base64 text). A
// receiver's error page may echo the request's headers in any of these,
// and the answer is stored with the attempt, in the dead letter, in the
// workflow's history, and in hookflow.dead_letter.created's reason, which
// other receivers get.
type valueScrubber struct {
	// forms are every form of every value, longest first, so that a form
	// that holds another is taken out whole.
	forms    []string
	replacer *strings.Replacer
}

// newValueScrubber returns the scrubber for values; nil when there is none,
// and a nil scrubber leaves texts as they are.
func newValueScrubber(values []string) *valueScrubber {
	seen := map[string]bool{}
	var forms []string
	for _, v := range values {
		for _, f := range secretForms(v) {
			if len(f) >= minHeaderSecret && !seen[f] {
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
		args = append(args, f, redactedMark)
	}
	return &valueScrubber{forms: forms, replacer: strings.NewReplacer(args...)}
}

// replace takes every form of every value out of text.
func (s *valueScrubber) replace(text string) string {
	if s == nil {
		return text
	}
	return s.replacer.Replace(text)
}

// cut returns text cut to at most limit bytes with every form of every
// value taken out. The text is cut first and scrubbed after, so that a
// value the cut splits is not left behind as its start: a cut text that
// ends with the start of a form (minCutPrefix bytes or more) loses that
// end too. Scrubbing may lengthen the text (the mark is longer than a
// short value), so it is cut again, and its end looked at again.
func (s *valueScrubber) cut(text string, limit int) string {
	if len(text) > limit {
		text = text[:limit]
	}
	if s == nil {
		return text
	}
	text = s.replace(text)
	if len(text) > limit {
		text = text[:limit]
	}
	return s.maskTail(text)
}

// maskTail replaces the longest end of text that is the start of a form
// (but not the whole form, which replace took out) with the mark.
func (s *valueScrubber) maskTail(text string) string {
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
	return text[:len(text)-longest] + redactedMark
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
