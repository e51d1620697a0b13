package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// Portal sessions: the tenant's backend opens one for one of its
// people (POST /v1/tenants/{id}/portal-sessions) and hands out its link;
// the page at /portal/<tenant>/ exchanges the link's code (POST /v1/portal/session)
// for a bearer token, which then acts on the tenant's /v1 routes through
// the same auth as an API key (Server.auth), with the scopes of its
// capabilities (capabilityScopes).

// Capability is what a portal session may do: the document's
// PortalCapability.
type Capability = wire.PortalCapability

// The capabilities of portal sessions.
const (
	CapView             = wire.PortalCapabilityView
	CapEndpointsManage  = wire.PortalCapabilityEndpointsManage
	CapEndpointsSecret  = wire.PortalCapabilityEndpointsSecret
	CapDeadLettersWrite = wire.PortalCapabilityDeadLettersWrite
	CapEventsTest       = wire.PortalCapabilityEventsTest
)

// capabilityScopes is the one place a capability becomes the scopes of API
// keys: the routes' checks (require, from the document's x-hookflow-scope)
// then hold for a portal session as for a key, with no second set of
// checks. Every session views. endpoints:secret adds no scope: it is the
// permission require asks of a portal session on the operations whose
// answers show a signing secret (secretOperations). events:test is the
// scope of the same name, not events:write, which would let the page
// publish into the tenant's own correlations.
var capabilityScopes = map[Capability][]Scope{
	CapView:             {ScopeEventsRead},
	CapEndpointsManage:  {ScopeEventsRead, ScopeEndpointsWrite},
	CapEndpointsSecret:  {ScopeEventsRead},
	CapDeadLettersWrite: {ScopeEventsRead, ScopeDeadLettersWrite},
	CapEventsTest:       {ScopeEventsRead, ScopeEventsTest},
}

// secretOperations answer an endpoint's signing secret: a portal session
// needs endpoints:secret for them, besides their scope.
var secretOperations = []string{"endpointCreate", "endpointRotateSecret"}

// scopesOf are the scopes of a session's capabilities, each once, in
// Scopes' order.
func scopesOf(caps []Capability) []Scope {
	var out []Scope
	for _, sc := range Scopes() {
		for _, c := range caps {
			if slices.Contains(capabilityScopes[c], sc) {
				out = append(out, sc)
				break
			}
		}
	}
	return out
}

// The bounds of a session's ttl, and its default.
const (
	portalTTLDefault = time.Hour
	portalTTLMin     = 5 * time.Minute
	portalTTLMax     = 24 * time.Hour
	// portalCodeTTL is how long a link's code may be exchanged: long
	// enough for a page to load, short enough that a link found later in
	// a history or a log is worth nothing.
	portalCodeTTL = time.Minute
)

// portalTTL reads a session's ttl ("" is the default); out of bounds it is
// a 422 naming ttl.
func portalTTL(raw string) (time.Duration, error) {
	if raw == "" {
		return portalTTLDefault, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < portalTTLMin || d > portalTTLMax {
		p := fieldProblem("ttl", fmt.Sprintf("ttl must be a duration from %s to %s, like \"1h\"", "5m", "24h"))
		p.Status = http.StatusUnprocessableEntity
		return 0, p
	}
	return d, nil
}

// PortalTokenPrefix starts every portal session's token, so auth tells it
// from an API key at a glance, and a secret scanner knows it.
const PortalTokenPrefix = "hfp_"

// portalCodePrefix starts a link's code.
const portalCodePrefix = "pc_"

// newSecret is prefix and the unpadded base64url of keyBytes random bytes.
func newSecret(prefix string) (string, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// newSessionID is a session's id: ps_ and 16 random base32-ish characters.
func newSessionID() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return "ps_" + strings.ToLower(base64.RawURLEncoding.EncodeToString(b)), nil
}

// PortalSessionCreate opens a session of tenant id for one of its people
// and answers its link, shown once: the code rides in the URL's fragment,
// which browsers send to no server, on the configured base (never the
// request's Host, which a client writes).
func (s *Server) PortalSessionCreate(c echo.Context, id wire.TenantID) error {
	var req wire.PortalSessionCreate
	if err := s.decode(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.tenants.get(ctx, id); err != nil {
		return err
	}
	ttl, err := portalTTL(req.TTL)
	if err != nil {
		return err
	}
	actor := strings.TrimSpace(req.Actor)
	if actor == "" || printable.String(actor) != actor {
		return fieldProblem("actor", "actor must be printable characters, not empty: who the link is for")
	}
	caps := []Capability{CapView}
	for _, c := range req.Capabilities {
		if !slices.Contains(caps, c) {
			caps = append(caps, c)
		}
	}
	if req.ReturnURL != "" {
		if u, err := url.Parse(req.ReturnURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p := fieldProblem("return_url", "return_url must be an absolute http or https URL")
			p.Status = http.StatusUnprocessableEntity
			return p
		}
	}
	code, err := newSecret(portalCodePrefix)
	if err != nil {
		return err
	}
	sid, err := newSessionID()
	if err != nil {
		return err
	}
	now := time.Now()
	capNames := make([]string, len(caps))
	for i, c := range caps {
		capNames[i] = string(c)
	}
	n := store.NewPortalSession{ID: sid, Actor: actor, Capabilities: capNames, ReturnURL: req.ReturnURL, CodeHash: hashKey(code),
		CodeExpiresAt: now.Add(portalCodeTTL), ExpiresAt: now.Add(ttl), CreatedBy: principalOf(c).name}
	if req.EndpointIDs != nil {
		n.EndpointIDs = req.EndpointIDs
	}
	sess, err := s.deps.Store.Tenant(id).PortalSessionCreate(ctx, n)
	var unknown *store.UnknownEndpointsError
	if errors.As(err, &unknown) {
		p := problem(http.StatusUnprocessableEntity, "unknown-endpoint", "Unknown endpoint",
			fmt.Sprintf("tenant %s has no endpoint %s", id, strings.Join(unknown.IDs, ", ")))
		p.Field = "endpoint_ids"
		return p
	}
	if err != nil {
		return err
	}
	s.deps.Logger.Info("portal session opened", "tenant_id", id, "session_id", sess.ID, "actor", sess.Actor,
		"capabilities", sess.Capabilities, "endpoint_ids", sess.EndpointIDs, "expires_at", sess.ExpiresAt, "by", principalOf(c).name)
	// The tenant rides in the path, for the page's frame-ancestors
	// (portal_page.go); the code in the fragment.
	link := s.cfg.PortalBaseURL + "/portal/" + url.PathEscape(id) + "/#code=" + code
	return c.JSON(http.StatusCreated, wire.PortalSessionCreated{ID: sess.ID, URL: link,
		ExpiresAt: sess.ExpiresAt, CodeExpiresAt: sess.CodeExpiresAt})
}

// The problems of a portal link or session the page shows a screen for,
// each its own type: a link opened twice, a link opened late, a session
// that ran out, a session revoked.
func portalProblem(err error) *Problem {
	switch {
	case errors.Is(err, store.ErrPortalCodeUsed):
		return problem(http.StatusUnauthorized, "portal-link-used", "Link used", "this portal link was opened already: ask for a new one")
	case errors.Is(err, store.ErrPortalCodeExpired):
		return problem(http.StatusUnauthorized, "portal-link-expired", "Link expired", "this portal link was not opened within its minute: ask for a new one")
	case errors.Is(err, store.ErrPortalSessionEnded):
		return problem(http.StatusUnauthorized, "portal-session-expired", "Session expired", "this portal session has expired: open the portal again from its link")
	case errors.Is(err, store.ErrPortalRevoked):
		return problem(http.StatusUnauthorized, "portal-session-revoked", "Session revoked", "this portal session was revoked")
	}
	return nil
}

// PortalSessionExchange exchanges a link's code for the session's token,
// once. It takes no credential (the code is one), so each refusal counts
// as a failed authentication does (Server.auth): against the client's
// network and the code presented, never refusing a good code for others'
// failures.
func (s *Server) PortalSessionExchange(c echo.Context) error {
	addr := clientAddr(c.RealIP())
	var req wire.PortalCodeExchange
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if !wellFormed(req.Code, portalCodePrefix) {
		return s.failures.refuseWith(c, addr, "", portalUnknownLink())
	}
	cred := credentialOf(req.Code)
	if wait, throttled := s.failures.throttled(cred); throttled {
		return s.failures.tooMany(c, wait, "this credential")
	}
	token, err := newSecret(PortalTokenPrefix)
	if err != nil {
		return err
	}
	sess, err := s.deps.Store.PortalExchange(c.Request().Context(), hashKey(req.Code), hashKey(token))
	if p := portalProblem(err); p != nil {
		return s.failures.refuseWith(c, addr, cred, p)
	}
	if errors.Is(err, store.ErrNotFound) {
		return s.failures.refuseWith(c, addr, cred, portalUnknownLink())
	}
	if err != nil {
		return err
	}
	s.deps.Logger.Info("portal session exchanged", "tenant_id", sess.TenantID, "session_id", sess.ID, "actor", sess.Actor)
	out := wire.PortalToken{Token: token, ExpiresAt: sess.ExpiresAt, TenantID: sess.TenantID, Actor: sess.Actor, ReturnURL: sess.ReturnURL,
		Capabilities: capabilitiesOf(sess), EndpointIDs: sess.EndpointIDs}
	if sess.EndpointsLimited && out.EndpointIDs == nil {
		out.EndpointIDs = []string{}
	}
	return c.JSON(http.StatusOK, out)
}

func portalUnknownLink() *Problem {
	return problem(http.StatusUnauthorized, "unauthorized", "Unauthorized", "this portal link is not one hookflow gave")
}

func capabilitiesOf(sess store.PortalSession) []Capability {
	out := make([]Capability, len(sess.Capabilities))
	for i, c := range sess.Capabilities {
		out[i] = Capability(c)
	}
	return out
}

// PortalSessionRevoke revokes one session of tenant id: its token is
// refused from its next request on, in every API process (auth reads the
// session on every request).
func (s *Server) PortalSessionRevoke(c echo.Context, id wire.TenantID, sid string) error {
	ctx := c.Request().Context()
	if _, err := s.tenants.get(ctx, id); err != nil {
		return err
	}
	sess, err := s.deps.Store.Tenant(id).PortalSessionRevoke(ctx, sid)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no portal session "+sid)
	}
	if err != nil {
		return err
	}
	s.deps.Logger.Info("portal session revoked", "tenant_id", id, "session_id", sess.ID, "actor", sess.Actor, "by", principalOf(c).name)
	return c.JSON(http.StatusOK, portalSessionView(sess))
}

// PortalSessionsRevokeActor revokes every standing session of one actor
// of tenant id.
func (s *Server) PortalSessionsRevokeActor(c echo.Context, id wire.TenantID, q wire.PortalSessionsRevokeActorParams) error {
	ctx := c.Request().Context()
	if _, err := s.tenants.get(ctx, id); err != nil {
		return err
	}
	ids, err := s.deps.Store.Tenant(id).PortalSessionsRevokeActor(ctx, q.Actor)
	if err != nil {
		return err
	}
	s.deps.Logger.Info("portal sessions revoked", "tenant_id", id, "actor", q.Actor, "sessions", len(ids), "by", principalOf(c).name)
	return c.JSON(http.StatusOK, wire.PortalSessionsRevoked{Revoked: int64(len(ids)), IDs: ids})
}

// portalSessionView is a session as the API shows it: never its code or
// token, which are kept only as hashes.
func portalSessionView(sess store.PortalSession) wire.PortalSession {
	v := wire.PortalSession{ID: sess.ID, TenantID: sess.TenantID, Actor: sess.Actor, Capabilities: capabilitiesOf(sess), ReturnURL: sess.ReturnURL,
		ExpiresAt: sess.ExpiresAt, CreatedAt: sess.CreatedAt, CreatedBy: sess.CreatedBy, ExchangedAt: deref(sess.ExchangedAt),
		RevokedAt: deref(sess.RevokedAt)}
	if sess.EndpointsLimited {
		v.EndpointIDs = sess.EndpointIDs
		if v.EndpointIDs == nil {
			v.EndpointIDs = []string{}
		}
	}
	return v
}
