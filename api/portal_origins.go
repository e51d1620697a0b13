package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// portalOrigins reads a tenant's portal_origins: each an origin as a
// browser sends it and CSP's frame-ancestors takes it, scheme://host with
// an optional :port and nothing else (no path, query, fragment or
// userinfo), https or http, each once. The page's frame-ancestors lists
// them: a value with more in it would widen or break that header. A
// refusal is a 422 naming the member.
func portalOrigins(raw []string) ([]string, error) {
	out := make([]string, 0, len(raw))
	for i, o := range raw {
		norm, ok := portalOrigin(o)
		if !ok {
			p := fieldProblem(fmt.Sprintf("portal_origins[%d]", i),
				fmt.Sprintf("portal_origins[%d] must be an origin, scheme://host[:port] with no path, like https://app.acme.example", i))
			p.Status = http.StatusUnprocessableEntity
			return nil, p
		}
		if !slices.Contains(out, norm) {
			out = append(out, norm)
		}
	}
	return out, nil
}

// portalOrigin is o as an origin (scheme and host in lower case), and
// whether it is one.
func portalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") ||
		strings.ContainsAny(u.Host, "*; ,'\"") {
		return "", false
	}
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", false
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), true
}
