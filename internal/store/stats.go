package store

import (
	"context"
	"fmt"
)

// Summary is the ledger at a glance.
type Summary struct {
	// Queued are accepted events whose workflow is not started yet.
	Queued int64
	// InFlight are events waiting for their turn or being delivered.
	InFlight int64
	// DeliveredLast5m are events delivered in the last five minutes.
	DeliveredLast5m int64
	// DeadLettersOpen are dead letters waiting for an operator.
	DeadLettersOpen int64
	// OldestLagSeconds is the age of the oldest event not delivered or
	// skipped; 0 when there is none.
	OldestLagSeconds float64
}

// StatsSummary reads the ledger's summary.
func (s *Store) StatsSummary(ctx context.Context) (Summary, error) {
	var sm Summary
	err := s.pool.QueryRow(ctx, s.q.StatsSummary).Scan(&sm.Queued, &sm.InFlight, &sm.DeliveredLast5m, &sm.OldestLagSeconds, &sm.DeadLettersOpen)
	if err != nil {
		return Summary{}, fmt.Errorf("read ledger summary: %w", err)
	}
	return sm, nil
}

// BlockedCorrelation is a correlation with events waiting behind its next
// sequence.
type BlockedCorrelation struct {
	CorrelationID string
	NextSequence  int64
	// BlockedBy is the state of the next sequence's event: waiting,
	// delivering, dead_lettered, queued, or missing when it has not arrived.
	BlockedBy string
	// BlockingEventID is the next sequence's event, nil when missing.
	BlockingEventID *string
	// Parked counts the events waiting behind it.
	Parked int64
	// AgeSeconds is how long the oldest parked event has waited.
	AgeSeconds float64
}

// StatsBlockedCorrelations returns the limit longest-blocked correlations
// and how many are blocked in all.
func (s *Store) StatsBlockedCorrelations(ctx context.Context, limit int) ([]BlockedCorrelation, int64, error) {
	rows, err := s.pool.Query(ctx, s.q.StatsBlockedCorrelations, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("list blocked correlations: %w", err)
	}
	defer rows.Close()
	var (
		out   []BlockedCorrelation
		total int64
	)
	for rows.Next() {
		var b BlockedCorrelation
		if err := rows.Scan(&b.CorrelationID, &b.NextSequence, &b.BlockedBy, &b.BlockingEventID, &b.Parked, &b.AgeSeconds, &total); err != nil {
			return nil, 0, fmt.Errorf("list blocked correlations: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list blocked correlations: %w", err)
	}
	return out, total, nil
}
