package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// statsTopBlocked bounds the blocked correlations GET /v1/stats lists.
const statsTopBlocked = 10

// Stats answers GET /v1/stats. Lag per correlation is here, bounded to the
// top few, rather than a metric label (correlation IDs are unbounded).
func (s *Server) Stats(c echo.Context, q wire.StatsParams) error {
	limit := statsTopBlocked
	if q.Top != nil {
		limit = int(*q.Top)
	}
	ctx := c.Request().Context()
	sm, err := s.ledger(c).StatsSummary(ctx)
	if err != nil {
		return err
	}
	blocked, total, err := s.ledger(c).StatsBlockedCorrelations(ctx, max(limit, 1))
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
	if run, err := s.ledger(c).CleanerRunLast(ctx); err == nil {
		resp.Cleaner = &wire.CleanerRun{StartedAt: run.StartedAt, FinishedAt: run.FinishedAt, PayloadsPruned: run.PayloadsPruned,
			AttemptsDeleted: run.AttemptsDeleted, KeysDeleted: run.KeysDeleted, Error: deref(run.Error)}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
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
