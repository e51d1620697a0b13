package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Dead letter statuses.
const (
	DeadLetterOpen     = "open"
	DeadLetterReplayed = "replayed"
	DeadLetterSkipped  = "skipped"
)

// DeadLetter is an event whose delivery gave up, with everything an operator
// needs to decide: the signed envelope, every attempt, why it stopped.
type DeadLetter struct {
	EventID        string          `json:"event_id"`
	CorrelationID  string          `json:"correlation_id"`
	Sequence       int64           `json:"sequence"`
	EndpointID     string          `json:"endpoint_id"`
	Envelope       json.RawMessage `json:"envelope"`
	Attempts       []Attempt       `json:"attempts"`
	Reason         string          `json:"reason"`
	FirstFailureAt *time.Time      `json:"first_failure_at,omitempty"`
	DeadLetteredAt time.Time       `json:"dead_lettered_at"`
	Status         string          `json:"status"`
	ReplayedAt     *time.Time      `json:"replayed_at,omitempty"`
	ReplayCount    int32           `json:"replay_count"`
	SkippedBy      *string         `json:"skipped_by,omitempty"`
	SkippedAt      *time.Time      `json:"skipped_at,omitempty"`
	SkipNote       *string         `json:"skip_note,omitempty"`
}

func scanDeadLetter(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	var attempts []byte
	err := row.Scan(&d.EventID, &d.CorrelationID, &d.Sequence, &d.EndpointID, &d.Envelope, &attempts, &d.Reason, &d.FirstFailureAt, &d.DeadLetteredAt,
		&d.Status, &d.ReplayedAt, &d.ReplayCount, &d.SkippedBy, &d.SkippedAt, &d.SkipNote)
	if err != nil {
		return d, translate(err)
	}
	if err := json.Unmarshal(attempts, &d.Attempts); err != nil {
		return d, fmt.Errorf("decode attempts: %w", err)
	}
	return d, nil
}

// DeadLetterUpsert writes (or reopens) the dead letter and marks the event
// dead-lettered, in one transaction.
func (s *Store) DeadLetterUpsert(ctx context.Context, d DeadLetter) error {
	attempts, err := json.Marshal(d.Attempts)
	if err != nil {
		return fmt.Errorf("encode attempts: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.DeadLetterUpsert, d.EventID, d.CorrelationID, d.Sequence, d.EndpointID, d.Envelope, attempts, d.Reason, d.FirstFailureAt, d.DeadLetteredAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.EventMarkDeadLettered, d.EventID)
		return err
	})
	if err != nil {
		return fmt.Errorf("write dead letter: %w", err)
	}
	return nil
}

// DeadLetterGet returns the dead letter of event id, or ErrNotFound.
func (s *Store) DeadLetterGet(ctx context.Context, eventID string) (DeadLetter, error) {
	d, err := scanDeadLetter(s.pool.QueryRow(ctx, s.q.DeadLetterGet, eventID))
	if err != nil {
		return d, fmt.Errorf("get dead letter: %w", err)
	}
	return d, nil
}

// DeadLetterFilter narrows a listing; zero fields match everything.
type DeadLetterFilter struct {
	CorrelationID string
	EndpointID    string
	Since, Until  *time.Time
	Status        string
	// After is the keyset cursor: the last row of the previous page.
	AfterTime *time.Time
	AfterID   string
	Limit     int
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// DeadLetterList returns one page of dead letters, oldest first.
func (s *Store) DeadLetterList(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	rows, err := s.pool.Query(ctx, s.q.DeadLetterList, nullable(f.CorrelationID), nullable(f.EndpointID), f.Since, f.Until, nullable(f.Status), f.AfterTime, f.AfterID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// DeadLetterMarkReplayed records a replay of an open dead letter; it reports
// false when the row was not open.
func (s *Store) DeadLetterMarkReplayed(ctx context.Context, eventID string) (bool, error) {
	tag, err := s.pool.Exec(ctx, s.q.DeadLetterMarkReplayed, eventID)
	if err != nil {
		return false, fmt.Errorf("mark dead letter replayed: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeadLetterMarkSkipped records who skipped the event and why.
func (s *Store) DeadLetterMarkSkipped(ctx context.Context, eventID, by, note string) error {
	if _, err := s.pool.Exec(ctx, s.q.DeadLetterMarkSkipped, eventID, by, nullable(note)); err != nil {
		return fmt.Errorf("mark dead letter skipped: %w", err)
	}
	return nil
}
