package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// statsTopBlocked bounds the blocked correlations GET /v1/stats lists.
const statsTopBlocked = 10

// Stats answers GET /v1/stats. Lag per correlation is here, bounded to the
// top few, rather than a metric label (correlation IDs are unbounded).
func (s *Server) Stats(c echo.Context, q wire.StatsParams) error {
	return s.stats(c, s.ledger(c), q.Top)
}

// TenantStats answers GET /v1/tenants/{id}/stats: GET /v1/stats of that
// tenant, for an operator (tenants:write) watching one customer; the
// same reads, through the store bound to it.
func (s *Server) TenantStats(c echo.Context, id wire.TenantID, q wire.TenantStatsParams) error {
	if _, err := s.tenants.get(c.Request().Context(), id); err != nil {
		return err
	}
	return s.stats(c, s.deps.Store.Tenant(id), q.Top)
}

// stats answers the stats of the tenant ledger is bound to, listing top
// blocked lanes (statsTopBlocked when nil).
func (s *Server) stats(c echo.Context, ledger *store.Store, top *int64) error {
	limit := statsTopBlocked
	if top != nil {
		limit = int(*top)
	}
	ctx := c.Request().Context()
	sm, err := ledger.StatsSummary(ctx)
	if err != nil {
		return err
	}
	blocked, total, err := ledger.StatsBlockedCorrelations(ctx, max(limit, 1))
	if err != nil {
		return err
	}
	// The endpoints' figures are per endpoint (endpoints are few;
	// correlations never become labels or rows here).
	resp := wire.Stats{
		Queued: sm.Queued, InFlight: sm.InFlight, DeliveredLast5M: sm.DeliveredLast5m,
		DeadLettersOpen: sm.DeadLettersOpen, OldestLagSeconds: sm.OldestLagSeconds,
		BlockedCorrelations: wire.BlockedSummary{Count: total, Top: []wire.BlockedCorrelation{}},
		Endpoints:           []wire.EndpointStats{},
	}
	for _, e := range sm.ByEndpoint {
		resp.Endpoints = append(resp.Endpoints, wire.EndpointStats{EndpointID: e.EndpointID, Waiting: e.Waiting, Delivering: e.Delivering,
			DeliveredLast5M: e.DeliveredRecently, DeadLettersOpen: e.DeadLettersOpen, OldestLagSeconds: e.LagSeconds})
	}
	// The cleaner's run is the deployment's, every tenant's rows at once:
	// an operator's figure (admin), not a tenant's or a portal session's.
	if p := principalOf(c); p.can(ScopeAdmin) && !p.confined {
		run, err := ledger.CleanerRunLast(ctx)
		switch {
		case err == nil:
			resp.Cleaner = &wire.CleanerRun{StartedAt: run.StartedAt, FinishedAt: run.FinishedAt, PayloadsPruned: run.PayloadsPruned,
				AttemptsDeleted: run.AttemptsDeleted, KeysDeleted: run.KeysDeleted, Error: deref(run.Error)}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
	}
	for i, b := range blocked {
		if i >= limit {
			break
		}
		bc := wire.BlockedCorrelation{
			CorrelationID: b.CorrelationID, EndpointID: b.EndpointID, NextSequence: b.NextSequence, BlockedBy: wire.BlockedCorrelationBlockedBy(b.BlockedBy),
			Parked: b.Parked, AgeSeconds: b.AgeSeconds,
		}
		if b.BlockingEventID != nil {
			bc.BlockingEventID = *b.BlockingEventID
		}
		resp.BlockedCorrelations.Top = append(resp.BlockedCorrelations.Top, bc)
	}
	return c.JSON(http.StatusOK, resp)
}

// tenantRankPageDefault and tenantRankPageMax bound GET /v1/stats/tenants'
// pages.
const (
	tenantRankPageDefault = 20
	tenantRankPageMax     = 100
)

// StatsTenants answers GET /v1/stats/tenants: the tenants ranked worst
// first (store.Store.StatsTenants has the order), a page at a time, so
// `hookflow status` names the worst of a deployment of any size from one
// bounded answer. The cursor is the rank the next page starts at: the
// ranking is the backlog's now, taken afresh for each page.
func (s *Server) StatsTenants(c echo.Context, q wire.StatsTenantsParams) error {
	limit, p := queryLimit(q.Limit, tenantRankPageDefault, tenantRankPageMax)
	if p != nil {
		return p
	}
	offset, p := rankCursor(q.Cursor)
	if p != nil {
		return p
	}
	ts, total, err := s.deps.Store.StatsTenants(c.Request().Context(), offset, limit)
	if err != nil {
		return err
	}
	page := wire.TenantsHealth{Tenants: make([]wire.TenantHealth, 0, len(ts)), Total: total}
	for _, t := range ts {
		page.Tenants = append(page.Tenants, wire.TenantHealth{TenantID: t.TenantID, Disabled: t.Disabled, DeadLettersOpen: t.DeadLettersOpen,
			FailingEndpoints: t.FailingEndpoints, Waiting: t.Waiting, Delivering: t.Delivering, OldestLagSeconds: t.OldestLagSeconds})
	}
	if next := offset + len(ts); len(ts) == limit && int64(next) < total {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(rankCursorPrefix + strconv.Itoa(next)))
	}
	return c.JSON(http.StatusOK, page)
}

// rankCursorPrefix starts a ranking cursor's text, so a cursor of another
// listing is told from it.
const rankCursorPrefix = "rank:"

// rankCursor reads the rank a ranking cursor starts at (0 when none).
func rankCursor(cursor *string) (int, *Problem) {
	v := deref(cursor)
	if v == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	n, ok := strings.CutPrefix(string(b), rankCursorPrefix)
	offset, aerr := strconv.Atoi(n)
	if err != nil || !ok || aerr != nil || offset < 0 {
		return 0, fieldProblem("cursor", "cursor is not one this API returned")
	}
	return offset, nil
}
