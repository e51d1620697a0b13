// Package redact names a URL without the credentials it may carry: a token
// in its query string (for receivers that cannot check signatures) or in
// its path (Slack- and Discord-style webhook URLs), its fragment, or
// userinfo (refused at registration, but nothing should rely on that).
// What hookflow stores, logs, puts on a span, returns to Temporal or shows
// a read-only API key names an endpoint by its redacted URL only.
package redact

import (
	"net/url"
	"strings"
)

// Mark stands in for what is taken out: a URL's path here, a credential
// in a text elsewhere.
const Mark = "[redacted]"

// URL returns u as scheme://host/path: no userinfo, query or fragment. The
// path is kept only when pathPublic says it holds no secret (an endpoint's
// url_path_public); otherwise a path other than "/" is Mark.
func URL(u *url.URL, pathPublic bool) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host}
	if pathPublic || u.Path == "" || u.Path == "/" {
		r.Path, r.RawPath = u.Path, u.RawPath
		return r.String()
	}
	return r.String() + "/" + Mark
}

// RawURL is URL for a URL as text. One that does not parse is cut before
// its query and fragment, its authority loses everything up to its last @,
// and its path is Mark unless pathPublic.
func RawURL(raw string, pathPublic bool) string {
	if u, err := url.Parse(raw); err == nil {
		return URL(u, pathPublic)
	}
	s, _, _ := strings.Cut(raw, "?")
	s, _, _ = strings.Cut(s, "#")
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, s = s[:i+3], s[i+3:]
	}
	authority, path := s, ""
	if i := strings.IndexByte(s, '/'); i >= 0 {
		authority, path = s[:i], s[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	if !pathPublic && path != "" && path != "/" {
		path = "/" + Mark
	}
	return scheme + authority + path
}
