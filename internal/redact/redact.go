// Package redact names a URL without the credentials it may carry: a token
// in its query string (for receivers that cannot check signatures), its
// fragment, or userinfo (refused at registration, but nothing should rely
// on that). What hookflow stores, logs, puts on a span, returns to
// Temporal or shows a read-only API key names an endpoint by its redacted
// URL only.
package redact

import (
	"net/url"
	"strings"
)

// URL returns u as scheme://host/path: no userinfo, query or fragment.
func URL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// RawURL is URL for a URL as text. One that does not parse is
// cut before its query and fragment, and its authority loses everything up
// to its last @.
func RawURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return URL(u)
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
	return scheme + authority + path
}
