package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// Summary is the ledger at a glance, counted in deliveries.
type Summary struct {
	// Queued are the deliveries of accepted events whose workflow is not
	// started yet.
	Queued int64
	// InFlight are deliveries waiting for their turn or being delivered.
	InFlight int64
	// DeliveredLast5m are deliveries delivered in the last five minutes.
	DeliveredLast5m int64
	// DeadLettersOpen are dead letters waiting for an operator.
	DeadLettersOpen int64
	// OldestLagSeconds is the age of the oldest event with a delivery not
	// delivered or skipped; 0 when there is none.
	OldestLagSeconds float64
	// ByEndpoint is the same per endpoint, for the endpoints with anything
	// to count, sorted.
	ByEndpoint []EndpointSummary
}

// EndpointSummary is one endpoint's share of the Summary.
type EndpointSummary struct {
	EndpointID string
	// Waiting counts its deliveries waiting, its queued events' included
	// (the summary counts those as Queued instead of InFlight).
	Waiting           int64
	Delivering        int64
	DeliveredRecently int64 // in the last five minutes
	DeadLettersOpen   int64
	// LagSeconds is the age of the oldest event with a delivery to it not
	// delivered or skipped; 0 when there is none.
	LagSeconds float64
}

// StatsSummary reads the ledger's summary: the totals are the sums of the
// endpoints' (the lag, their greatest); limited to some endpoints
// (OnlyEndpoints), of theirs alone.
func (s *Store) StatsSummary(ctx context.Context) (Summary, error) {
	rows, err := s.q.StatsSummary(ctx, nullIfZero(s.tenant))
	if err != nil {
		return Summary{}, fmt.Errorf("read ledger summary: %w", err)
	}
	var sm Summary
	for _, r := range rows {
		if !s.reaches(r.EndpointID) {
			continue
		}
		es := EndpointSummary{EndpointID: r.EndpointID, Waiting: r.Waiting, Delivering: r.Delivering,
			DeliveredRecently: r.Delivered, DeadLettersOpen: r.Open, LagSeconds: r.LagSeconds}
		sm.Queued += r.Queued
		sm.InFlight += es.Waiting - r.Queued + es.Delivering
		sm.DeliveredLast5m += es.DeliveredRecently
		sm.DeadLettersOpen += es.DeadLettersOpen
		sm.OldestLagSeconds = max(sm.OldestLagSeconds, es.LagSeconds)
		sm.ByEndpoint = append(sm.ByEndpoint, es)
	}
	return sm, nil
}

// BlockedCorrelation is a lane (correlation, endpoint) with deliveries
// waiting behind its head.
type BlockedCorrelation struct {
	// TenantID is the lane's tenant (a listing of every tenant's names
	// each lane's).
	TenantID      string
	CorrelationID string
	EndpointID    string
	// NextSequence is the sequence the lane waits on: its head's, or the
	// correlation's cursor when that sequence has not arrived.
	NextSequence int64
	// BlockedBy is the state of the head's delivery: waiting, delivering or
	// dead_lettered, or missing when the correlation's cursor is on a
	// sequence not stored (which holds every lane).
	BlockedBy string
	// BlockingEventID is the head's event, nil when missing.
	BlockingEventID *string
	// Parked counts the lane's deliveries waiting behind it.
	Parked int64
	// AgeSeconds is how long the oldest parked delivery's event has waited.
	AgeSeconds float64
}

// StatsBlockedCorrelations returns the limit longest-blocked lanes and how
// many are blocked in all; limited to some endpoints (OnlyEndpoints), the
// lanes at them alone.
func (s *Store) StatsBlockedCorrelations(ctx context.Context, limit int) ([]BlockedCorrelation, int64, error) {
	rows, err := s.pool.Query(ctx, dbsqlc.StatsBlockedCorrelations, limit, nullIfZero(s.tenant), s.onlyEndpoints())
	if err != nil {
		return nil, 0, fmt.Errorf("list blocked lanes: %w", err)
	}
	var (
		out   []BlockedCorrelation
		total int64
		b     BlockedCorrelation
	)
	hidden := int64(0)
	_, err = pgx.ForEachRow(rows, []any{&b.CorrelationID, &b.EndpointID, &b.NextSequence, &b.BlockedBy, &b.BlockingEventID, &b.Parked, &b.AgeSeconds, &total, &b.TenantID}, func() error {
		if !s.seesCorrelation(b.CorrelationID) {
			// hookflow's own about another endpoint: as EventList.
			hidden++
			return nil
		}
		out = append(out, b)
		b.BlockingEventID = nil // scanned afresh, never shared between rows
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list blocked lanes: %w", err)
	}
	return out, total - hidden, nil
}

// HealthSample is the most attempts an endpoint's health is drawn from:
// the last ones of the window. It bounds what a health read costs,
// whatever the number of attempts the window holds.
const HealthSample = 1000

// Health is one endpoint's health: how its receiver answered lately, and
// what waits for it.
type Health struct {
	EndpointID string
	// FailureThreshold is the consecutive failures that open its circuit
	// (Settings.FailureThreshold).
	FailureThreshold int
	// Attempts counts the HTTP attempts to it within the window, at most
	// its last HealthSample, by outcome (activities' Outcome*); attempts
	// to it while disabled made no request and are not counted.
	Attempts AttemptCounts
	// Sampled says the window held more attempts than Attempts counts:
	// the figures are those of its last HealthSample.
	Sampled bool
	// LatencyP50MS and LatencyP99MS are the attempts' latency percentiles
	// (continuous, in milliseconds); nil when there were none.
	LatencyP50MS *float64
	LatencyP99MS *float64
	// Waiting and Delivering count its deliveries in those states.
	Waiting    int64
	Delivering int64
	// DeadLettersOpen counts its dead letters waiting for an operator.
	DeadLettersOpen int64
	// Oldest is its delivery not delivered or skipped whose event was
	// accepted first; nil when there is none.
	Oldest *OldestDelivery
	// Throttled counts the attempts to it its rate limit held back (a send
	// slot later than the moment it was reserved), since its first
	// rate-limited attempt: a total, not a figure of the window.
	Throttled int64
	// Circuit is its circuit breaker as the health shows it: State,
	// ConsecutiveFailures, FailingSince, OpenedAt, NextProbeAt and
	// AutoReplayPendingSince (closed with no failure when it has none).
	Circuit Circuit
}

// AttemptCounts are attempts by outcome.
type AttemptCounts struct {
	Total, Delivered, Retry, Permanent, Gone int64
}

// SuccessRate is the share of the attempts that delivered, 0 to 1; nil
// when there were none.
func (a AttemptCounts) SuccessRate() *float64 {
	if a.Total == 0 {
		return nil
	}
	r := float64(a.Delivered) / float64(a.Total)
	return &r
}

// OldestDelivery is a delivery not finished, and how long its event has
// waited since it was accepted.
type OldestDelivery struct {
	EventID       string
	CorrelationID string
	Sequence      int64
	// State is waiting, delivering or dead_lettered.
	State      contract.State
	AgeSeconds float64
}

// EndpointHealth reads endpointID's health, its attempts over the last
// window (at most the last HealthSample), or ErrNotFound when the tenant
// has no such endpoint (a deleted one still reads).
func (s *Store) EndpointHealth(ctx context.Context, endpointID string, window time.Duration) (Health, error) {
	if !s.reaches(endpointID) {
		return Health{}, fmt.Errorf("endpoint health: %w", ErrNotFound)
	}
	hs, err := s.health(ctx, &endpointID, window, "", 1)
	if err != nil {
		return Health{}, err
	}
	if len(hs) == 0 {
		return Health{}, fmt.Errorf("endpoint health of %s: %w", endpointID, ErrNotFound)
	}
	return hs[0], nil
}

// EndpointsHealth reads the health of a page of the endpoints not deleted:
// the first limit with an id after after ("" from the start), in id order,
// in one query: the cost is each endpoint's sample and one pass over the
// page's backlog.
func (s *Store) EndpointsHealth(ctx context.Context, window time.Duration, after string, limit int) ([]Health, error) {
	return s.health(ctx, nil, window, after, limit)
}

func (s *Store) health(ctx context.Context, endpointID *string, window time.Duration, after string, limit int) ([]Health, error) {
	rows, err := s.pool.Query(ctx, dbsqlc.EndpointHealth, endpointID, window.Seconds(), HealthSample, after, limit, s.tenant, s.onlyEndpoints())
	if err != nil {
		return nil, fmt.Errorf("read endpoint health: %w", err)
	}
	var (
		out           []Health
		h             Health
		threshold     *int32
		failures      int32
		eventID, corr *string
		seq           *int64
		state         *contract.State
		age           *float64
	)
	_, err = pgx.ForEachRow(rows, []any{&h.EndpointID, &threshold,
		&h.Attempts.Total, &h.Attempts.Delivered, &h.Attempts.Retry, &h.Attempts.Permanent, &h.Attempts.Gone,
		&h.LatencyP50MS, &h.LatencyP99MS, &h.Sampled, &h.Waiting, &h.Delivering, &h.DeadLettersOpen,
		&eventID, &corr, &seq, &state, &age, &h.Throttled,
		&h.Circuit.State, &failures, &h.Circuit.FailingSince, &h.Circuit.OpenedAt, &h.Circuit.NextProbeAt, &h.Circuit.AutoReplayPendingSince,
	}, func() error {
		one := h
		var st Settings
		if threshold != nil {
			st.CircuitFailureThreshold = int(*threshold)
		}
		one.FailureThreshold = st.FailureThreshold()
		one.Circuit.ConsecutiveFailures = int(failures)
		// A limited store's endpoint may wait on hookflow's own event about
		// another endpoint (subscribed to hookflow.* by the tenant): its
		// counts stay, but not what names the other endpoint.
		if eventID != nil && s.seesCorrelation(*corr) {
			one.Oldest = &OldestDelivery{EventID: *eventID, CorrelationID: *corr, Sequence: *seq, State: *state, AgeSeconds: *age}
		}
		out = append(out, one)
		// Nullable columns are scanned afresh, never shared between rows.
		h, threshold, eventID, corr, seq, state, age = Health{}, nil, nil, nil, nil, nil, nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read endpoint health: %w", err)
	}
	return out, nil
}

// TenantSummary is one tenant's place in the ranking of StatsTenants.
type TenantSummary struct {
	TenantID string
	// Disabled: its keys are refused and its deliveries wait.
	Disabled bool
	// DeadLettersOpen are its dead letters waiting for an operator.
	DeadLettersOpen int64
	// FailingEndpoints are its endpoints (not deleted) whose circuit is
	// open or half open.
	FailingEndpoints int64
	// Waiting and Delivering count its deliveries in those states (a
	// queued event's deliveries wait).
	Waiting, Delivering int64
	// OldestLagSeconds is the age of its oldest event with a delivery not
	// delivered or skipped; 0 when there is none.
	OldestLagSeconds float64
}

// StatsTenants ranks the tenants with anything to count worst first (open
// dead letters, then failing endpoints, then the oldest undelivered event,
// then the id) and returns limit of them from rank offset on, with how many
// the ranking holds: one query over the backlog. It reads every tenant, so
// only the unscoped store answers it; a tenant-bound one is refused.
func (s *Store) StatsTenants(ctx context.Context, offset, limit int) ([]TenantSummary, int64, error) {
	if s.tenant != "" {
		return nil, 0, fmt.Errorf("rank tenants: the store is bound to tenant %s", s.tenant)
	}
	rows, err := s.q.StatsTenants(ctx, dbsqlc.StatsTenantsParams{PageOffset: int32(offset), PageLimit: int32(limit)})
	if err != nil {
		return nil, 0, fmt.Errorf("rank tenants: %w", err)
	}
	var total int64
	out := make([]TenantSummary, 0, len(rows))
	for _, r := range rows {
		total = r.Total
		out = append(out, TenantSummary{TenantID: r.TenantID, Disabled: r.Disabled, DeadLettersOpen: r.DeadLettersOpen,
			FailingEndpoints: r.FailingEndpoints, Waiting: r.Waiting, Delivering: r.Delivering, OldestLagSeconds: r.LagSeconds})
	}
	return out, total, nil
}

// HourOutcomes are an endpoint's attempts by outcome in one hour, from
// Hour on.
type HourOutcomes struct {
	Hour time.Time
	AttemptCounts
}

// EndpointOutcomesHourly returns the endpoint's attempts by outcome in
// each of the last 24 hours, oldest first, the current hour (so far) last;
// hours without attempts are there, with zeros. It counts every attempt of
// those hours, not a sample.
func (s *Store) EndpointOutcomesHourly(ctx context.Context, endpointID string) ([]HourOutcomes, error) {
	rows, err := s.q.EndpointOutcomesHourly(ctx, dbsqlc.EndpointOutcomesHourlyParams{TenantID: s.tenant, EndpointID: endpointID})
	if err != nil {
		return nil, fmt.Errorf("endpoint outcomes by hour: %w", err)
	}
	out := make([]HourOutcomes, len(rows))
	for i, r := range rows {
		out[i] = HourOutcomes{Hour: r.Hour, AttemptCounts: AttemptCounts{Total: r.Delivered + r.Retry + r.Permanent + r.Gone,
			Delivered: r.Delivered, Retry: r.Retry, Permanent: r.Permanent, Gone: r.Gone}}
	}
	return out, nil
}
