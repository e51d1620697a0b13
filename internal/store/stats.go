package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
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
// endpoints' (the lag, their greatest).
func (s *Store) StatsSummary(ctx context.Context) (Summary, error) {
	rows, err := s.pool.Query(ctx, s.q.StatsSummary)
	if err != nil {
		return Summary{}, fmt.Errorf("read ledger summary: %w", err)
	}
	var (
		sm     Summary
		queued int64
		es     EndpointSummary
	)
	_, err = pgx.ForEachRow(rows, []any{&es.EndpointID, &queued, &es.Waiting, &es.Delivering, &es.DeliveredRecently, &es.DeadLettersOpen, &es.LagSeconds}, func() error {
		sm.Queued += queued
		sm.InFlight += es.Waiting - queued + es.Delivering
		sm.DeliveredLast5m += es.DeliveredRecently
		sm.DeadLettersOpen += es.DeadLettersOpen
		sm.OldestLagSeconds = max(sm.OldestLagSeconds, es.LagSeconds)
		sm.ByEndpoint = append(sm.ByEndpoint, es)
		return nil
	})
	if err != nil {
		return Summary{}, fmt.Errorf("read ledger summary: %w", err)
	}
	return sm, nil
}

// BlockedCorrelation is a lane (correlation, endpoint) with deliveries
// waiting behind its head.
type BlockedCorrelation struct {
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
// many are blocked in all.
func (s *Store) StatsBlockedCorrelations(ctx context.Context, limit int) ([]BlockedCorrelation, int64, error) {
	rows, err := s.pool.Query(ctx, s.q.StatsBlockedCorrelations, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list blocked lanes: %w", err)
	}
	var (
		out   []BlockedCorrelation
		total int64
		b     BlockedCorrelation
	)
	_, err = pgx.ForEachRow(rows, []any{&b.CorrelationID, &b.EndpointID, &b.NextSequence, &b.BlockedBy, &b.BlockingEventID, &b.Parked, &b.AgeSeconds, &total}, func() error {
		out = append(out, b)
		b.BlockingEventID = nil // scanned afresh, never shared between rows
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list blocked lanes: %w", err)
	}
	return out, total, nil
}
