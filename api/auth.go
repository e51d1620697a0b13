package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// Scope is what an API key may do: the document's Scope, and each
// operation names the one it needs (x-hookflow-scope, operations.go).
type Scope = wire.Scope

// The scopes of API keys.
const (
	// ScopeEventsWrite: POST /v1/events, and what ScopeEventsTest allows.
	ScopeEventsWrite = wire.ScopeEventsWrite
	// ScopeEventsTest: POST /v1/endpoints/{id}/test, a hookflow.test event
	// to one endpoint in a correlation of its own: what a portal session's
	// events:test is, without the right to publish into the tenant's
	// correlations.
	ScopeEventsTest = wire.ScopeEventsTest
	// ScopeEventsRead: GET on events, correlations, endpoints, dead letters
	// and stats.
	ScopeEventsRead = wire.ScopeEventsRead
	// ScopeEndpointsWrite: create, patch and rotate endpoints.
	ScopeEndpointsWrite = wire.ScopeEndpointsWrite
	// ScopeDeadLettersWrite: replay and skip, single and batch.
	ScopeDeadLettersWrite = wire.ScopeDeadLettersWrite
	// ScopeTenantsWrite: the tenants' routes, and issuing tenants' keys.
	ScopeTenantsWrite = wire.ScopeTenantsWrite
	// ScopeAdmin: everything, API keys included.
	ScopeAdmin = wire.ScopeAdmin
)

// Scopes lists every scope.
func Scopes() []Scope {
	return []Scope{ScopeEventsWrite, ScopeEventsTest, ScopeEventsRead, ScopeEndpointsWrite, ScopeDeadLettersWrite, ScopeTenantsWrite, ScopeAdmin}
}

// tenantScopes are those a tenant's key may hold: never admin or
// tenants:write, which reach beyond one tenant.
var tenantScopes = []Scope{ScopeEventsWrite, ScopeEventsTest, ScopeEventsRead, ScopeEndpointsWrite, ScopeDeadLettersWrite}

// joinScopes lists scopes for a problem's detail.
func joinScopes(scopes []Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ", ")
}

// KeyPrefix starts every API key, so a key is recognisable in a secret
// scanner and never mistaken for the bootstrap token.
const KeyPrefix = "hfk_"

// bootstrapName is the name the bootstrap admin token acts under.
const bootstrapName = "bootstrap"

// principal is who a request comes from: the bootstrap token, an API key
// or a portal session.
type principal struct {
	id     string
	name   string
	scopes []Scope
	// tenant is the tenant the request acts on: a tenant key's own; for
	// an operator key (and the bootstrap token), store.DefaultTenant or the
	// one the request names (actOn).
	tenant string
	// confined: a tenant's key or a portal session, which acts on its own
	// tenant only.
	confined bool
	// portal is the session of a portal token (nil for a key): its scopes
	// are its capabilities' (capabilityScopes), its name portal:<actor>,
	// and it reaches only its endpoints when it is limited to some.
	portal *store.PortalSession
}

// can reports whether the principal holds scope s: admin holds every
// scope, and events:write events:test (whoever may publish may send a test).
func (p principal) can(s Scope) bool {
	return slices.Contains(p.scopes, ScopeAdmin) || slices.Contains(p.scopes, s) ||
		s == ScopeEventsTest && slices.Contains(p.scopes, ScopeEventsWrite)
}

// permits reports whether the principal may run operation op (nil: no
// operation), which needs scope: a portal session also needs
// endpoints:secret where the answer shows a signing secret, and one
// limited to endpoints creates none (it could not reach it) and changes
// no event type (catalogOperations). It answers
// the 403 when not.
func (p principal) permits(op *operation, scope Scope) *Problem {
	if !p.can(scope) {
		what := "this API key"
		if p.portal != nil {
			what = "this portal session"
		}
		return scopeProblem(scope, fmt.Sprintf("%s lacks the scope %s", what, scope))
	}
	if p.portal == nil || op == nil {
		return nil
	}
	if slices.Contains(secretOperations, op.id) && !slices.Contains(p.portal.Capabilities, string(CapEndpointsSecret)) {
		pr := problem(http.StatusForbidden, "missing-capability", "Forbidden",
			fmt.Sprintf("this portal session lacks the capability %s: the answer shows a signing secret", CapEndpointsSecret))
		pr.Extensions = map[string]any{"capability": CapEndpointsSecret}
		return pr
	}
	if op.id == "endpointCreate" && p.portal.EndpointsLimited {
		return problem(http.StatusForbidden, "endpoints-limited", "Forbidden",
			"this portal session is limited to some endpoints: it cannot create one")
	}
	if slices.Contains(catalogOperations, op.id) && p.portal.EndpointsLimited {
		return problem(http.StatusForbidden, "endpoints-limited", "Forbidden",
			"this portal session is limited to some endpoints: it reads the event-type catalog but cannot change it, since the catalog judges every event of the tenant")
	}
	return nil
}

// principalKey is where auth leaves the principal in echo's context.
const principalKey = "hookflow.principal"

func principalOf(c echo.Context) principal {
	p, _ := c.Get(principalKey).(principal)
	return p
}

// ledger is the request's tenant's ledger: every handler reads and writes
// through it (store.Store.Tenant), so an ID of another tenant's is one
// that does not exist, and answers 404 as an unknown one does. A portal
// session limited to endpoints gets the ledger limited to them
// (store.Store.OnlyEndpoints): another endpoint of its own tenant's reads
// as one that does not exist, too.
func (s *Server) ledger(c echo.Context) *store.Store {
	p := principalOf(c)
	st := s.deps.Store.Tenant(p.tenant)
	if p.portal != nil && p.portal.EndpointsLimited {
		st = st.OnlyEndpoints(p.portal.EndpointIDs)
	}
	return st
}

// hashKey is what the ledger keeps of a key.
func hashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// auth requires "Authorization: Bearer <token>" on /v1, but on the
// document's public operations (the portal's code exchange): the bootstrap
// admin token (compared in constant time), an API key that exists and is
// not revoked, or a portal session's token that is neither expired nor
// revoked (each looked up by its hash on every request, so a revocation
// holds at once in every API process). It leaves the principal for
// require.
//
// Failing costs what the client controls, never what another client
// presents (authFailures): a failure spends its network's bucket and the
// bucket of the credential it presented (its first credentialPrefixLen
// characters). A credential whose own bucket is spent is answered 429
// before it is looked up; so is a malformed one (refused in memory) from a
// network whose bucket is spent. A well-formed credential is always looked
// up otherwise, whatever its network's failures (an index probe by hash):
// a valid one is let through, an unknown one is 429 from a spent network
// and 401 from any other. So one client's bad requests, behind the same
// proxy or NAT as everyone else, lock out no one's valid key, token or
// session.
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	bootstrap := []byte(s.cfg.Token)
	return func(c echo.Context) error {
		if p := c.Request().URL.Path; p != "/v1" && !strings.HasPrefix(p, "/v1/") || s.public[c.Request().Method+" "+p] {
			return next(c)
		}
		addr := clientAddr(c.RealIP())
		token, ok := bearerToken(c.Request().Header.Get("Authorization"))
		if !ok || token == "" {
			return s.failures.refuse(c, addr, "")
		}
		if subtle.ConstantTimeCompare([]byte(token), bootstrap) == 1 {
			c.Set(principalKey, principal{id: bootstrapName, name: bootstrapName, scopes: []Scope{ScopeAdmin}, tenant: store.DefaultTenant})
			return next(c)
		}
		if strings.HasPrefix(token, PortalTokenPrefix) {
			return s.portalAuth(c, next, addr, token)
		}
		if !wellFormed(token, KeyPrefix) {
			return s.failures.refuse(c, addr, "")
		}
		cred := credentialOf(token)
		if wait, throttled := s.failures.throttled(cred); throttled {
			return s.failures.tooMany(c, wait, "this credential")
		}
		k, err := s.deps.Store.APIKeyByHash(c.Request().Context(), hashKey(token))
		if errors.Is(err, store.ErrNotFound) {
			return s.failures.refuse(c, addr, cred)
		}
		if err != nil {
			return err
		}
		p := principal{id: k.ID, name: k.Name, tenant: store.DefaultTenant}
		if k.TenantID != nil {
			p.tenant, p.confined = *k.TenantID, true
		}
		for _, sc := range k.Scopes {
			p.scopes = append(p.scopes, Scope(sc))
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// portalAuth authenticates a portal session's token: the principal is its
// tenant (confined), named portal:<actor> (the by of its replays and
// skips), with its capabilities' scopes. An expired or a revoked session
// is refused with a problem type of its own, for the page's screens.
func (s *Server) portalAuth(c echo.Context, next echo.HandlerFunc, addr, token string) error {
	if !wellFormed(token, PortalTokenPrefix) {
		return s.failures.refuse(c, addr, "")
	}
	cred := credentialOf(token)
	if wait, throttled := s.failures.throttled(cred); throttled {
		return s.failures.tooMany(c, wait, "this credential")
	}
	sess, err := s.deps.Store.PortalSessionByToken(c.Request().Context(), hashKey(token))
	if p := portalProblem(err); p != nil {
		return s.failures.refuseWith(c, addr, cred, p)
	}
	if errors.Is(err, store.ErrNotFound) {
		return s.failures.refuse(c, addr, cred)
	}
	if err != nil {
		return err
	}
	c.Set(principalKey, principal{id: sess.ID, name: "portal:" + sess.Actor, tenant: sess.TenantID, confined: true,
		scopes: scopesOf(capabilitiesOf(sess)), portal: &sess})
	return next(c)
}

// credentialPrefixLen is how much of a presented credential, after its
// kind's prefix, keys its failures: 96 random bits of a real one, which no
// one but its holder presents, and what a client repeating or varying the
// tail of a bad credential keeps.
const credentialPrefixLen = 16

// credentialOf is the key a well-formed credential's failures are counted
// under.
func credentialOf(token string) string {
	kind, rest, _ := strings.Cut(token, "_")
	return "credential " + kind + "_" + rest[:min(len(rest), credentialPrefixLen)]
}

// wellFormed reports whether token could be a key or a token newKey or
// newSecret made: prefix and the unpadded base64url of 32 bytes.
func wellFormed(token, prefix string) bool {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok || len(rest) != keyTextLen {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return err == nil && len(b) == keyBytes
}

// clientAddr is the key a client network is throttled under: an IPv4
// address, or an IPv6 address's /64, which one host is usually given whole.
// It is the address Echo's IPExtractor gives (RouterConfig.TrustedProxies).
func clientAddr(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "network " + ip
	}
	a = a.WithZone("").Unmap()
	if a.Is6() {
		return "network " + netip.PrefixFrom(a, 64).Masked().String()
	}
	return "network " + a.String()
}

// maxTrackedKeys bounds the networks and credentials authFailures keeps a
// bucket for; past it, those with full buckets are forgotten, and if none
// is, new ones share one bucket.
const maxTrackedKeys = 65536

// authFailures holds one token bucket of failed authentications per client
// network and per presented credential (clientAddr, credentialOf), in this
// process.
type authFailures struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	overflow  *rate.Limiter
}

func newAuthFailures(perSecond float64, burst int) *authFailures {
	return &authFailures{perSecond: perSecond, burst: burst, buckets: map[string]*rate.Limiter{},
		overflow: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// bucket returns key's bucket, creating it if create is set (nil
// otherwise, for a key with no failures).
func (f *authFailures) bucket(key string, create bool) *rate.Limiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.buckets[key]; ok || !create {
		return b
	}
	if len(f.buckets) >= maxTrackedKeys {
		for a, b := range f.buckets {
			if b.Tokens() >= float64(f.burst) {
				delete(f.buckets, a)
			}
		}
		if len(f.buckets) >= maxTrackedKeys {
			return f.overflow
		}
	}
	b := rate.NewLimiter(rate.Limit(f.perSecond), f.burst)
	f.buckets[key] = b
	return b
}

// throttled reports whether key has spent its failures, and how long
// until it may fail again.
func (f *authFailures) throttled(key string) (time.Duration, bool) {
	b := f.bucket(key, false)
	if b == nil {
		return 0, false
	}
	if t := b.Tokens(); t < 1 {
		return time.Duration((1 - t) / f.perSecond * float64(time.Second)), true
	}
	return 0, false
}

// refuse is refuseWith the 401.
func (f *authFailures) refuse(c echo.Context, addr, cred string) *Problem {
	return f.refuseWith(c, addr, cred, unauthorized())
}

// refuseWith spends one failure of network addr and of credential cred
// ("" for none: the request presented no well-formed one) and answers p,
// or 429 once addr's bucket is spent.
func (f *authFailures) refuseWith(c echo.Context, addr, cred string, p *Problem) *Problem {
	if cred != "" {
		f.bucket(cred, true).Allow()
	}
	if wait, throttled := f.throttled(addr); throttled {
		return f.tooMany(c, wait, "this network")
	}
	f.bucket(addr, true).Allow()
	return p
}

// tooMany is the 429 of a throttled network or credential, with
// Retry-After.
func (f *authFailures) tooMany(c echo.Context, wait time.Duration, what string) *Problem {
	secs := setRetryAfter(c, wait)
	return problem(http.StatusTooManyRequests, "auth-throttled", "Too Many Requests",
		fmt.Sprintf("too many failed authentications from %s; try again in %d s", what, secs))
}

func unauthorized() *Problem {
	return problem(http.StatusUnauthorized, "unauthorized", "Unauthorized", "a valid bearer token is required: an API key, a portal session's token, or the bootstrap token")
}

// require lets a request through only when its principal may run the
// operation (principal.permits: its scope, or admin; for a portal session
// its capabilities too); otherwise 403 naming what it lacks.
func require(scope Scope) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			op, _ := c.Get(operationKey).(*operation)
			if p := principalOf(c).permits(op, scope); p != nil {
				return p
			}
			return next(c)
		}
	}
}

// scopeProblem is the 403 of a principal that lacks scope.
func scopeProblem(scope Scope, detail string) *Problem {
	p := problem(http.StatusForbidden, "missing-scope", "Forbidden", detail)
	p.Extensions = map[string]any{"scope": scope}
	return p
}

// bearerToken takes the token out of an Authorization header. The scheme
// name is case-insensitive (RFC 9110 §11.1); the token is compared as is.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	return token, ok && strings.EqualFold(scheme, "Bearer")
}

// rateLimits holds one token bucket per principal for a kind of request:
// POST /v1/events, or the reads (every GET on /v1). They live in this
// process: N API processes allow N times the rate.
type rateLimits struct {
	perSecond float64
	burst     int
	// what names the requests limited, as the 429 tells it ("post events").
	what    string
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newRateLimits(what string, perSecond float64, burst int) *rateLimits {
	return &rateLimits{what: what, perSecond: perSecond, burst: burst, buckets: map[string]*rate.Limiter{}}
}

// limit answers 429 with Retry-After once the principal's bucket is empty,
// before anything is read or stored.
func (l *rateLimits) limit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := principalOf(c).id
		l.mu.Lock()
		b, ok := l.buckets[id]
		if !ok {
			b = rate.NewLimiter(rate.Limit(l.perSecond), l.burst)
			l.buckets[id] = b
		}
		l.mu.Unlock()
		r := b.Reserve()
		if d := r.Delay(); d > 0 {
			r.Cancel()
			secs := setRetryAfter(c, d)
			return problem(http.StatusTooManyRequests, "rate-limited", "Too Many Requests",
				fmt.Sprintf("this API key may %s %g times per second (bursts of %d); try again in %d s", l.what, l.perSecond, l.burst, secs))
		}
		return next(c)
	}
}

// setRetryAfter sets Retry-After to wait in whole seconds, at least 1, and
// returns them.
func setRetryAfter(c echo.Context, wait time.Duration) int {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return secs
}
