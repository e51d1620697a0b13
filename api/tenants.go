package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/hookflow/hookflow/internal/printable"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// Tenants: every request acts on one tenant, its principal's (a tenant's
// key's own; an operator key's `default`, or the one it names). auth and
// actOn decide it; every handler then reaches the ledger through
// Server.ledger, bound to it.

// noTenant is the answer to a tenant that does not exist, and to a tenant
// key naming another tenant than its own: the same 404 as an unknown ID.
func noTenant(id string) *Problem {
	p := problem(http.StatusNotFound, "not-found", "Not Found", "no tenant "+id)
	p.Field = "tenant_id"
	return p
}

// actOn makes the request act on tenant (a request's ?tenant_id= or a
// body's tenant_id; "" leaves the principal's). A tenant's key acts only
// on its own tenant; an operator key on any tenant that exists.
func (s *Server) actOn(c echo.Context, tenant string) error {
	p := principalOf(c)
	if tenant == "" || tenant == p.tenant {
		return nil
	}
	if p.confined {
		return noTenant(tenant)
	}
	if _, err := s.tenants.get(c.Request().Context(), tenant); err != nil {
		return err
	}
	p.tenant = tenant
	c.Set(principalKey, p)
	return nil
}

// actOnQuery is actOn for an operation's ?tenant_id= (TenantIdQuery),
// after the parameters' checks.
func (s *Server) actOnQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.actOn(c, c.QueryParam("tenant_id")); err != nil {
			return err
		}
		return next(c)
	}
}

// tenantCacheFor is how long an API process keeps what it read of a
// tenant (its existence and limits) before reading it again: a change of
// limits takes that long to hold everywhere. Keys are looked up on every
// request (a disabled tenant's keys are refused at once).
const tenantCacheFor = 2 * time.Second

// tenantCache holds what this process read of tenants lately, and each
// tenant's ingest bucket (TenantLimits.EventsPerSecond).
type tenantCache struct {
	store *store.Store
	mu    sync.Mutex
	seen  map[string]cachedTenant
	posts map[string]*rate.Limiter
}

type cachedTenant struct {
	t  store.Tenant
	at time.Time
}

func newTenantCache(st *store.Store) *tenantCache {
	return &tenantCache{store: st, seen: map[string]cachedTenant{}, posts: map[string]*rate.Limiter{}}
}

// get returns tenant id (noTenant when it does not exist), read at most
// tenantCacheFor ago.
func (tc *tenantCache) get(ctx context.Context, id string) (store.Tenant, error) {
	tc.mu.Lock()
	c, ok := tc.seen[id]
	tc.mu.Unlock()
	if ok && time.Since(c.at) < tenantCacheFor {
		return c.t, nil
	}
	t, err := tc.store.TenantGet(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return t, noTenant(id)
	}
	if err != nil {
		return t, err
	}
	tc.put(t)
	return t, nil
}

// put keeps t as read now; with the cache bounded, an old entry goes.
func (tc *tenantCache) put(t store.Tenant) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if len(tc.seen) >= maxTrackedKeys {
		for id, c := range tc.seen {
			if time.Since(c.at) >= tenantCacheFor {
				delete(tc.seen, id)
			}
		}
	}
	tc.seen[t.ID] = cachedTenant{t: t, at: time.Now()}
}

// allowPost takes one event from tenant's ingest bucket: false (and how
// long until it may post again) past its events_per_second.
func (tc *tenantCache) allowPost(t store.Tenant) (time.Duration, bool) {
	if t.Limits.EventsPerSecond == nil {
		return 0, true
	}
	perSecond := *t.Limits.EventsPerSecond
	burst := max(1, int(2*perSecond))
	tc.mu.Lock()
	b, ok := tc.posts[t.ID]
	if !ok || b.Limit() != rate.Limit(perSecond) {
		b = rate.NewLimiter(rate.Limit(perSecond), burst)
		tc.posts[t.ID] = b
	}
	tc.mu.Unlock()
	r := b.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return d, false
	}
	return 0, true
}

// limitTenantPosts answers 429 once the request's tenant has posted its
// events_per_second, before anything is stored.
func (s *Server) limitTenantPosts(c echo.Context) error {
	t, err := s.tenants.get(c.Request().Context(), principalOf(c).tenant)
	if err != nil {
		return err
	}
	wait, ok := s.tenants.allowPost(t)
	if ok {
		return nil
	}
	secs := setRetryAfter(c, wait)
	p := problem(http.StatusTooManyRequests, "rate-limited", "Too Many Requests",
		fmt.Sprintf("tenant %s may post %g events per second (its events_per_second); try again in %d s", t.ID, *t.Limits.EventsPerSecond, secs))
	p.Extensions = map[string]any{"tenant_limit": "events_per_second", "tenant_id": t.ID}
	return p
}

// TenantPut creates a tenant, or replaces its name, metadata and limits.
func (s *Server) TenantPut(c echo.Context, id wire.TenantID) error {
	var req wire.TenantPut
	if err := s.decode(c, &req); err != nil {
		return err
	}
	t := store.Tenant{ID: id, Name: strings.TrimSpace(req.Name)}
	if printable.String(t.Name) != t.Name {
		return fieldProblem("name", "name must be printable characters")
	}
	if req.Metadata != nil {
		b, err := json.Marshal(req.Metadata)
		if err != nil {
			return err
		}
		t.Metadata = b
	}
	limits, err := tenantLimits(req.Limits)
	if err != nil {
		return err
	}
	t.Limits = limits
	if t.PortalOrigins, err = portalOrigins(req.PortalOrigins); err != nil {
		return err
	}
	saved, created, err := s.deps.Store.TenantPut(c.Request().Context(), t)
	if err != nil {
		return err
	}
	s.tenants.put(saved)
	s.deps.Logger.Info("tenant saved", "tenant_id", saved.ID, "created", created, "by", principalOf(c).name)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, tenantView(saved))
}

// tenantLimits reads a tenant's limits; the document bounds each number.
func tenantLimits(l wire.TenantLimits) (store.TenantLimits, error) {
	var out store.TenantLimits
	if v, err := l.EventsPerSecond.Get(); err == nil {
		out.EventsPerSecond = &v
	}
	if v, err := l.MaxEndpoints.Get(); err == nil {
		n := int32(v)
		out.MaxEndpoints = &n
	}
	if v, err := l.DeliveriesPerSecond.Get(); err == nil {
		out.DeliveriesPerSecond = &v
	}
	if v, err := l.AllowPrivateTargets.Get(); err == nil {
		out.AllowPrivateTargets = &v
	}
	if v, err := l.MaxRecoveryWindow.Get(); err == nil {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinRecoveryWindow || d > MaxRecoveryWindow {
			p := fieldProblem("limits.max_recovery_window", fmt.Sprintf("max_recovery_window must be a duration from %s to %s, like \"1h\"", MinRecoveryWindow, MaxRecoveryWindow))
			p.Status = http.StatusUnprocessableEntity
			return out, p
		}
		out.MaxRecoveryWindow = &d
	}
	return out, nil
}

// TenantGet answers a tenant.
func (s *Server) TenantGet(c echo.Context, id wire.TenantID) error {
	t, err := s.deps.Store.TenantGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return noTenant(id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tenantView(t))
}

// TenantUpdate disables or enables a tenant: its keys are refused from
// their next request on, in every API process (the key lookup reads it).
func (s *Server) TenantUpdate(c echo.Context, id wire.TenantID) error {
	var req wire.TenantUpdate
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if id == store.DefaultTenant && req.Disabled {
		p := problem(http.StatusUnprocessableEntity, "reserved-tenant", "Reserved tenant",
			"the default tenant cannot be disabled: operator keys act on it when they name no tenant")
		p.Field = "disabled"
		return p
	}
	t, err := s.deps.Store.TenantSetDisabled(c.Request().Context(), id, req.Disabled)
	if errors.Is(err, store.ErrNotFound) {
		return noTenant(id)
	}
	if err != nil {
		return err
	}
	s.tenants.put(t)
	s.deps.Logger.Info("tenant disabled", "tenant_id", t.ID, "disabled", t.Disabled, "by", principalOf(c).name)
	return c.JSON(http.StatusOK, tenantView(t))
}

// tenantPageDefault and tenantPageMax bound GET /v1/tenants' pages.
const (
	tenantPageDefault = 50
	tenantPageMax     = 500
)

// TenantList is a page of tenants in id order, its cursor opaque as an
// endpoint page's.
func (s *Server) TenantList(c echo.Context, q wire.TenantListParams) error {
	limit, p := queryLimit(q.Limit, tenantPageDefault, tenantPageMax)
	if p != nil {
		return p
	}
	after, p := idCursor(q.Cursor)
	if p != nil {
		return p
	}
	ts, err := s.deps.Store.TenantsList(c.Request().Context(), after, limit+1)
	if err != nil {
		return err
	}
	page := wire.TenantPage{Items: make([]wire.Tenant, 0, min(len(ts), limit))}
	if len(ts) > limit {
		ts = ts[:limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(ts[limit-1].ID))
	}
	for _, t := range ts {
		page.Items = append(page.Items, tenantView(t))
	}
	return c.JSON(http.StatusOK, page)
}

// tenantView is a tenant as the API shows it.
func tenantView(t store.Tenant) wire.Tenant {
	v := wire.Tenant{ID: t.ID, Name: t.Name, Disabled: t.Disabled, CreatedAt: t.Created, UpdatedAt: t.Updated, Metadata: map[string]string{},
		PortalOrigins: t.PortalOrigins}
	_ = json.Unmarshal(t.Metadata, &v.Metadata) // the API wrote it, string to string
	if l := t.Limits.EventsPerSecond; l != nil {
		v.Limits.EventsPerSecond.Set(*l)
	}
	if l := t.Limits.MaxEndpoints; l != nil {
		v.Limits.MaxEndpoints.Set(int64(*l))
	}
	if l := t.Limits.MaxRecoveryWindow; l != nil {
		v.Limits.MaxRecoveryWindow.Set(l.String())
	}
	if l := t.Limits.DeliveriesPerSecond; l != nil {
		v.Limits.DeliveriesPerSecond.Set(*l)
	}
	if l := t.Limits.AllowPrivateTargets; l != nil {
		v.Limits.AllowPrivateTargets.Set(*l)
	}
	return v
}
