package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	wire "github.com/hookflow/hookflow/kit/client"
)

// SessionGet says who the caller is: the credential's kind, the tenant it
// acts on, its scopes, and a portal session's capabilities, endpoints and
// expiry. The portal page reads it to know what to show; any valid
// credential may ask.
func (s *Server) SessionGet(c echo.Context) error {
	p := principalOf(c)
	v := wire.Session{Kind: wire.SessionKindKey, ID: p.id, Name: p.name, TenantID: p.tenant, Confined: p.confined, Scopes: p.scopes}
	if v.Scopes == nil {
		v.Scopes = []Scope{}
	}
	if sess := p.portal; sess != nil {
		v.Kind, v.Capabilities, v.ExpiresAt, v.ReturnURL = wire.SessionKindPortal, capabilitiesOf(*sess), sess.ExpiresAt, sess.ReturnURL
		if sess.EndpointsLimited {
			v.EndpointIDs = sess.EndpointIDs
			if v.EndpointIDs == nil {
				v.EndpointIDs = []string{}
			}
		}
	}
	return c.JSON(http.StatusOK, v)
}

// secureHeaders marks every answer as one no page may pass its address on
// from (Referrer-Policy: no-referrer: a portal page's address once carried
// its code), and every /v1 answer as one no cache may keep
// (Cache-Control: no-store: answers carry secrets, a session's token, and
// a tenant's data behind a bearer token that a shared cache cannot see).
func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		if p := c.Request().URL.Path; p == "/v1" || strings.HasPrefix(p, "/v1/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}
