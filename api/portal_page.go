package api

import (
	"embed"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/kit/intake"
)

// portalFiles are the portal page: index.html and portal.css,
// and main.js, which tsc compiles from portal/src (make generate-portal;
// checked in, so building hookflow needs no Node.js).
//
//go:embed portal/index.html portal/portal.css portal/main.js
var portalFiles embed.FS

// The portal page is served at /portal/<tenant>/, with the tenant in the
// path rather than only in the link's fragment: the fragment never reaches
// the server, and the server must know the tenant when it answers the page
// to name its portal_origins in the page's frame-ancestors. A session's
// link is <base>/portal/<tenant>/#code=…, and the page refuses a code of
// another tenant's (its frame-ancestors are not that tenant's).

// portalAssets are the files the page loads beside it, by content type.
var portalAssets = map[string]string{
	"main.js":    "text/javascript; charset=utf-8",
	"portal.css": "text/css; charset=utf-8",
}

// registerPortal adds the page's routes: they are no operation of the
// document (no /v1 route, no credential: the page holds none until its
// script exchanges the link's code).
func (s *Server) registerPortal() {
	s.echo.GET("/portal/:tenant", func(c echo.Context) error {
		return c.Redirect(http.StatusMovedPermanently, c.Request().URL.Path+"/")
	})
	s.echo.GET("/portal/:tenant/", s.portalPage)
	s.echo.GET("/portal/:tenant/:file", s.portalAsset)
}

// portalPage answers the page with its security headers: a CSP that runs
// only the page's own script and connects only to this origin, framed by
// itself and by the embedding page's origin when that is one of the
// tenant's portal_origins. The embedding origin is the request's Referer
// (a browser sends at least the origin of the page that frames it, under
// the default referrer policy): naming one origin that asked, never the
// list, the page answers a tenant that does not exist, one with no
// origins and one with origins alike to whoever does not already know an
// origin of it, so it tells no one which tenants exist or where they
// embed it.
func (s *Server) portalPage(c echo.Context) error {
	id := c.Param("tenant")
	if intake.ValidTenantID("tenant", id) != nil {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no such page")
	}
	ancestors := []string{"'self'"}
	if origin := refererOrigin(c.Request().Referer()); origin != "" {
		t, err := s.tenants.get(c.Request().Context(), id)
		var p *Problem
		switch {
		case err == nil:
			if slices.Contains(t.PortalOrigins, origin) {
				ancestors = append(ancestors, origin)
			}
		case errors.As(err, &p) && p.Status == http.StatusNotFound:
		default:
			return err
		}
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", portalCSP(ancestors))
	// The page is the same for every session, but its frame-ancestors
	// follow the embedding origin: a cache asks before reusing it.
	h.Set("Cache-Control", "no-cache")
	h.Add("Vary", "Referer")
	return s.portalFile(c, "index.html", "text/html; charset=utf-8")
}

// refererOrigin is the origin of a Referer as portal_origins hold them
// (portalOrigin), "" for none or one that is not an http(s) URL.
func refererOrigin(referer string) string {
	u, err := url.Parse(referer)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	o, ok := portalOrigin(u.Scheme + "://" + u.Host)
	if !ok {
		return ""
	}
	return o
}

// portalCSP is the page's Content-Security-Policy: everything from this
// origin only, no inline script or style element, no plugin, no <base>,
// no form posted anywhere, and framed only by ancestors.
func portalCSP(ancestors []string) string {
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors " + strings.Join(ancestors, " ")
}

// portalAsset answers the page's script and stylesheet.
func (s *Server) portalAsset(c echo.Context) error {
	name := c.Param("file")
	ct, ok := portalAssets[name]
	if !ok || intake.ValidTenantID("tenant", c.Param("tenant")) != nil {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no such page")
	}
	c.Response().Header().Set("Content-Security-Policy", portalCSP([]string{"'none'"}))
	c.Response().Header().Set("Cache-Control", "no-cache")
	return s.portalFile(c, name, ct)
}

func (s *Server) portalFile(c echo.Context, name, contentType string) error {
	b, err := portalFiles.ReadFile("portal/" + name)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, contentType, b)
}
