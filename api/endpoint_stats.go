package api

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oapi-codegen/nullable"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// healthWindow is the span of attempts GET /v1/endpoints/{id}/stats reads.
const healthWindow = time.Hour

// An endpoint's health (GET /v1/endpoints/{id}/stats, wire.EndpointHealth)
// is how its receiver answered in the last hour, what waits for it, what
// its rate limit held back, and its circuit breaker. Its attempts are those
// of the window, at most its last store.HealthSample; its outcomes are as
// the wire contract maps the receiver's answers: delivered (2xx but 202),
// retry (202, 408, 429, 5xx, timeouts, connection errors), permanent (other
// 4xx), gone (410). Its success rate and latencies are null when there were
// no attempts. Throttled is a total since its first rate-limited attempt,
// not a figure of the window.

// The page of GET /v1/stats/endpoints: each endpoint's answer draws on up
// to store.HealthSample attempts, so a page is bounded as a page of
// endpoints is, lower by default.
const (
	healthPageDefault = 100
	healthPageMax     = 500
)

// EndpointStats answers GET /v1/endpoints/{id}/stats, 404 for an endpoint
// that does not exist: its health, and its last 24 hours' outcomes by the
// hour.
func (s *Server) EndpointStats(c echo.Context, id wire.Key, _ wire.EndpointStatsParams) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	h, err := s.ledger(c).EndpointHealth(c.Request().Context(), ep.ID, healthWindow)
	if err != nil {
		return err
	}
	// The day by the hour (the portal's 24-hour chart): one endpoint's
	// answer only, so a page of GET /v1/stats/endpoints stays bounded by
	// its samples.
	hours, err := s.ledger(c).EndpointOutcomesHourly(c.Request().Context(), ep.ID)
	if err != nil {
		return err
	}
	view := healthView(h)
	view.Hourly = make([]wire.HourOutcomes, 0, len(hours))
	for _, hr := range hours {
		view.Hourly = append(view.Hourly, wire.HourOutcomes{Hour: hr.Hour, Delivered: hr.Delivered, Retry: hr.Retry, Permanent: hr.Permanent, Gone: hr.Gone})
	}
	return c.JSON(http.StatusOK, view)
}

// StatsEndpoints answers GET /v1/stats/endpoints: a page of the endpoints'
// health in one query (what `hookflow status` ranks, page after page),
// each bounded by its sample, with one pass over the page's backlog. Its
// cursor is opaque, as a page of endpoints' is.
func (s *Server) StatsEndpoints(c echo.Context, q wire.StatsEndpointsParams) error {
	limit, p := queryLimit(q.Limit, healthPageDefault, healthPageMax)
	if p != nil {
		return p
	}
	after, p := idCursor(q.Cursor)
	if p != nil {
		return p
	}
	// One more than the page says whether another follows.
	hs, err := s.ledger(c).EndpointsHealth(c.Request().Context(), healthWindow, after, limit+1)
	if err != nil {
		return err
	}
	resp := wire.EndpointsHealth{Endpoints: make([]wire.EndpointHealth, 0, min(len(hs), limit))}
	if len(hs) > limit {
		hs = hs[:limit]
		resp.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(hs[limit-1].EndpointID))
	}
	for _, h := range hs {
		resp.Endpoints = append(resp.Endpoints, healthView(h))
	}
	return c.JSON(http.StatusOK, resp)
}

func healthView(h store.Health) wire.EndpointHealth {
	cb := h.Circuit
	resp := wire.EndpointHealth{
		EndpointID: h.EndpointID, WindowSeconds: int64(healthWindow / time.Second), SampleLimit: store.HealthSample, Sampled: h.Sampled,
		Attempts:    h.Attempts.Total,
		Outcomes:    wire.AttemptOutcomes{Delivered: h.Attempts.Delivered, Retry: h.Attempts.Retry, Permanent: h.Attempts.Permanent, Gone: h.Attempts.Gone},
		SuccessRate: orNull(h.Attempts.SuccessRate()), LatencyP50Ms: orNull(h.LatencyP50MS), LatencyP99Ms: orNull(h.LatencyP99MS),
		Waiting: h.Waiting, Delivering: h.Delivering, DeadLettersOpen: h.DeadLettersOpen, Throttled: h.Throttled,
		Circuit: wire.CircuitState{State: wire.CircuitStateState(cb.State), ConsecutiveFailures: int64(cb.ConsecutiveFailures), FailureThreshold: int64(h.FailureThreshold),
			FailingSince: deref(cb.FailingSince), OpenedAt: deref(cb.OpenedAt), NextProbeAt: deref(cb.NextProbeAt), AutoReplayPending: cb.AutoReplayPendingSince != nil},
	}
	if o := h.Oldest; o != nil {
		resp.OldestUndelivered = &wire.OldestUndelivered{EventID: o.EventID, CorrelationID: o.CorrelationID, Sequence: o.Sequence,
			State: wire.EndpointHealthOldestUndeliveredState(o.State), AgeSeconds: o.AgeSeconds}
	}
	return resp
}

// orNull is a figure that may be missing (no attempts) as the JSON null the
// document gives it then.
func orNull(v *float64) nullable.Nullable[float64] {
	if v == nil {
		return nullable.NewNullNullable[float64]()
	}
	return nullable.NewNullableWithValue(*v)
}
