package webhook

import (
	"cmp"
	"errors"
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

// headerValues are the values of an endpoint's custom headers worth
// scrubbing from what a receiver answers (redact.Values).
func headerValues(h map[string]string) []string {
	out := make([]string, 0, len(h))
	for _, v := range h {
		out = append(out, v)
	}
	return out
}
