package api

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// healthWindow is the span of attempts GET /v1/endpoints/{id}/stats reads.
const healthWindow = time.Hour

// EndpointHealthResponse is the body of GET /v1/endpoints/{id}/stats: how
// the endpoint's receiver answered in the last hour, what waits for it, what
// its rate limit held back, and its circuit breaker.
type EndpointHealthResponse struct {
	EndpointID string `json:"endpoint_id"`
	// WindowSeconds is the span the attempt figures cover, ending now.
	WindowSeconds int64 `json:"window_seconds"`
	// SampleLimit is the most attempts the figures are drawn from: the
	// window's last ones.
	SampleLimit int `json:"sample_limit"`
	// Sampled says the window held more attempts than SampleLimit: the
	// figures are those of its last SampleLimit.
	Sampled bool `json:"sampled"`
	// Attempts counts the HTTP attempts the figures are drawn from: those
	// of the window, at most its last SampleLimit (none is made while the
	// endpoint is disabled).
	Attempts int64           `json:"attempts"`
	Outcomes AttemptOutcomes `json:"outcomes"`
	// SuccessRate is delivered attempts over attempts, 0 to 1; null when
	// there were none.
	SuccessRate *float64 `json:"success_rate"`
	// LatencyP50MS and LatencyP99MS are the attempts' latency percentiles in
	// milliseconds; null when there were none.
	LatencyP50MS    *float64 `json:"latency_p50_ms"`
	LatencyP99MS    *float64 `json:"latency_p99_ms"`
	Waiting         int64    `json:"waiting"`
	Delivering      int64    `json:"delivering"`
	DeadLettersOpen int64    `json:"dead_letters_open"`
	// OldestUndelivered is the delivery to it, not delivered or skipped,
	// whose event was accepted first; absent when there is none.
	OldestUndelivered *OldestUndelivered `json:"oldest_undelivered,omitempty"`
	// Throttled counts the attempts its rate limit held back for a later
	// send slot, since its first rate-limited attempt: a total, not a
	// figure of the window (0 when it never had a rate limit).
	Throttled int64 `json:"throttled"`
	// Circuit is the endpoint's circuit breaker.
	Circuit CircuitView `json:"circuit"`
}

// CircuitView is an endpoint's circuit breaker as GET
// /v1/endpoints/{id}/stats shows it: closed (attempts are made) or open
// (none is, but for one probe at a time from next_probe_at), the
// consecutive retryable failures counted, and since when it fails.
type CircuitView struct {
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	FailureThreshold    int        `json:"failure_threshold"`
	FailingSince        *time.Time `json:"failing_since,omitempty"`
	OpenedAt            *time.Time `json:"opened_at,omitempty"`
	NextProbeAt         *time.Time `json:"next_probe_at,omitempty"`
	// AutoReplayPending says the dead letters of its last outage are being
	// replayed (auto_replay).
	AutoReplayPending bool `json:"auto_replay_pending,omitempty"`
}

// AttemptOutcomes are the window's attempts by outcome, as the wire
// contract maps the receiver's answers: delivered (2xx but 202), retry (202,
// 408, 429, 5xx, timeouts, connection errors), permanent (other 4xx), gone
// (410).
type AttemptOutcomes struct {
	Delivered int64 `json:"delivered"`
	Retry     int64 `json:"retry"`
	Permanent int64 `json:"permanent"`
	Gone      int64 `json:"gone"`
}

// OldestUndelivered is an endpoint's oldest delivery not finished.
type OldestUndelivered struct {
	EventID       string         `json:"event_id"`
	CorrelationID string         `json:"correlation_id"`
	Sequence      int64          `json:"sequence"`
	State         contract.State `json:"state"`
	// AgeSeconds is how long ago its event was accepted.
	AgeSeconds float64 `json:"age_seconds"`
}

// EndpointsHealthResponse is the body of GET /v1/stats/endpoints: a page
// of the endpoints' health, as GET /v1/endpoints/{id}/stats has it, in id
// order, and the cursor of the next page (absent on the last).
type EndpointsHealthResponse struct {
	Endpoints  []EndpointHealthResponse `json:"endpoints"`
	NextCursor string                   `json:"next_cursor,omitempty"`
}

// The page of GET /v1/stats/endpoints: each endpoint's answer draws on up
// to store.HealthSample attempts, so a page is bounded as a page of
// endpoints is, lower by default.
const (
	healthPageDefault = 100
	healthPageMax     = 500
)

// EndpointStats answers GET /v1/endpoints/{id}/stats, 404 for an endpoint
// that does not exist.
func (s *Server) EndpointStats(c echo.Context, id wire.Key) error {
	ep, err := s.endpoint(c, id)
	if err != nil {
		return err
	}
	h, err := s.deps.Store.EndpointHealth(c.Request().Context(), ep.ID, healthWindow)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, healthView(h))
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
	after, p := endpointCursor(q.Cursor)
	if p != nil {
		return p
	}
	// One more than the page says whether another follows.
	hs, err := s.deps.Store.EndpointsHealth(c.Request().Context(), healthWindow, after, limit+1)
	if err != nil {
		return err
	}
	resp := EndpointsHealthResponse{Endpoints: make([]EndpointHealthResponse, 0, min(len(hs), limit))}
	if len(hs) > limit {
		hs = hs[:limit]
		resp.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(hs[limit-1].EndpointID))
	}
	for _, h := range hs {
		resp.Endpoints = append(resp.Endpoints, healthView(h))
	}
	return c.JSON(http.StatusOK, resp)
}

func healthView(h store.Health) EndpointHealthResponse {
	cb := h.Circuit
	resp := EndpointHealthResponse{
		EndpointID: h.EndpointID, WindowSeconds: int64(healthWindow / time.Second), SampleLimit: store.HealthSample, Sampled: h.Sampled,
		Attempts:    h.Attempts.Total,
		Outcomes:    AttemptOutcomes{Delivered: h.Attempts.Delivered, Retry: h.Attempts.Retry, Permanent: h.Attempts.Permanent, Gone: h.Attempts.Gone},
		SuccessRate: h.Attempts.SuccessRate(), LatencyP50MS: h.LatencyP50MS, LatencyP99MS: h.LatencyP99MS,
		Waiting: h.Waiting, Delivering: h.Delivering, DeadLettersOpen: h.DeadLettersOpen, Throttled: h.Throttled,
		Circuit: CircuitView{State: cb.State, ConsecutiveFailures: cb.ConsecutiveFailures, FailureThreshold: h.FailureThreshold,
			FailingSince: cb.FailingSince, OpenedAt: cb.OpenedAt, NextProbeAt: cb.NextProbeAt, AutoReplayPending: cb.AutoReplayPendingSince != nil},
	}
	if o := h.Oldest; o != nil {
		resp.OldestUndelivered = &OldestUndelivered{EventID: o.EventID, CorrelationID: o.CorrelationID, Sequence: o.Sequence, State: o.State, AgeSeconds: o.AgeSeconds}
	}
	return resp
}
