package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/store"
)

// statsTopBlocked bounds the blocked correlations GET /v1/stats lists.
const statsTopBlocked = 10

// StatsResponse is the body of GET /v1/stats: the ledger at a glance.
type StatsResponse struct {
	Queued              int64          `json:"queued"`
	InFlight            int64          `json:"in_flight"`
	DeliveredLast5m     int64          `json:"delivered_last_5m"`
	DeadLettersOpen     int64          `json:"dead_letters_open"`
	OldestLagSeconds    float64        `json:"oldest_lag_seconds"`
	BlockedCorrelations BlockedSummary `json:"blocked_correlations"`
	// Endpoints are the same figures per endpoint (endpoints are few;
	// correlations never become labels or rows here).
	Endpoints []EndpointStats `json:"endpoints"`
	// Cleaner is the cleaner's last run (by any API process); absent
	// before the first.
	Cleaner *store.CleanerRun `json:"cleaner,omitempty"`
}

// EndpointStats are one endpoint's deliveries at a glance.
type EndpointStats struct {
	EndpointID       string  `json:"endpoint_id"`
	Waiting          int64   `json:"waiting"`
	Delivering       int64   `json:"delivering"`
	DeliveredLast5m  int64   `json:"delivered_last_5m"`
	DeadLettersOpen  int64   `json:"dead_letters_open"`
	OldestLagSeconds float64 `json:"oldest_lag_seconds"`
}

// BlockedSummary counts the blocked correlations and lists the longest
// blocked ones.
type BlockedSummary struct {
	Count int64                `json:"count"`
	Top   []BlockedCorrelation `json:"top"`
}

// BlockedCorrelation is a lane (correlation, endpoint) whose next delivery
// holds others back.
type BlockedCorrelation struct {
	CorrelationID   string  `json:"correlation_id"`
	EndpointID      string  `json:"endpoint_id"`
	NextSequence    int64   `json:"next_sequence"`
	BlockedBy       string  `json:"blocked_by"`
	BlockingEventID string  `json:"blocking_event_id,omitempty"`
	Parked          int64   `json:"parked"`
	AgeSeconds      float64 `json:"age_seconds"`
}

// stats answers GET /v1/stats. Lag per correlation is here, bounded to the
// top few, rather than a metric label (correlation IDs are unbounded).
func (s *Server) stats(c echo.Context) error {
	limit := statsTopBlocked
	if v := c.QueryParam("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return fieldProblem("top", "top must be a whole number from 0 to 100")
		}
		limit = n
	}
	ctx := c.Request().Context()
	sm, err := s.deps.Store.StatsSummary(ctx)
	if err != nil {
		return err
	}
	blocked, total, err := s.deps.Store.StatsBlockedCorrelations(ctx, max(limit, 1))
	if err != nil {
		return err
	}
	resp := StatsResponse{
		Queued: sm.Queued, InFlight: sm.InFlight, DeliveredLast5m: sm.DeliveredLast5m,
		DeadLettersOpen: sm.DeadLettersOpen, OldestLagSeconds: sm.OldestLagSeconds,
		BlockedCorrelations: BlockedSummary{Count: total, Top: []BlockedCorrelation{}},
		Endpoints:           []EndpointStats{},
	}
	for _, e := range sm.ByEndpoint {
		resp.Endpoints = append(resp.Endpoints, EndpointStats{EndpointID: e.EndpointID, Waiting: e.Waiting, Delivering: e.Delivering,
			DeliveredLast5m: e.DeliveredRecently, DeadLettersOpen: e.DeadLettersOpen, OldestLagSeconds: e.LagSeconds})
	}
	if run, err := s.deps.Store.CleanerRunLast(ctx); err == nil {
		resp.Cleaner = &run
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for i, b := range blocked {
		if i >= limit {
			break
		}
		bc := BlockedCorrelation{
			CorrelationID: b.CorrelationID, EndpointID: b.EndpointID, NextSequence: b.NextSequence, BlockedBy: b.BlockedBy,
			Parked: b.Parked, AgeSeconds: b.AgeSeconds,
		}
		if b.BlockingEventID != nil {
			bc.BlockingEventID = *b.BlockingEventID
		}
		resp.BlockedCorrelations.Top = append(resp.BlockedCorrelations.Top, bc)
	}
	return c.JSON(http.StatusOK, resp)
}
