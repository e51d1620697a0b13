package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// CleanerLock takes the cleaner's lock for one run, on a connection of its
// own; ok is false when another process holds it. release lets it go.
func (s *Store) CleanerLock(ctx context.Context) (release func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("cleaner lock: %w", err)
	}
	q := dbsqlc.New(conn)
	if ok, err = q.CleanerLock(ctx); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("cleaner lock: %w", err)
		}
		return nil, false, nil
	}
	return func() {
		// A lock left behind would stop every cleaner; closing the session
		// lets it go when the unlock cannot.
		if err := q.CleanerUnlock(context.WithoutCancel(ctx)); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		conn.Release()
	}, true, nil
}

// EventsPrunePayloads empties the payload of up to limit events delivered or
// skipped more than age ago, and returns how many.
func (s *Store) EventsPrunePayloads(ctx context.Context, age time.Duration, limit int) (int64, error) {
	n, err := s.q.EventsPrunePayloads(ctx, dbsqlc.EventsPrunePayloadsParams{Secs: age.Seconds(), Limit: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("prune payloads: %w", err)
	}
	return n, nil
}

// AttemptsPrune deletes up to limit attempts older than age of finished
// events, and returns how many.
func (s *Store) AttemptsPrune(ctx context.Context, age time.Duration, limit int) (int64, error) {
	n, err := s.q.AttemptsPrune(ctx, dbsqlc.AttemptsPruneParams{Secs: age.Seconds(), Limit: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("prune attempts: %w", err)
	}
	return n, nil
}

// EventsPruneKeys deletes up to limit events that finished more than age
// ago, whose payload is gone, that have no dead letter and that are behind
// their correlation's cursor, with their deliveries and the attempts they
// still have, and returns how many events and attempts. Lanes rows stay.
func (s *Store) EventsPruneKeys(ctx context.Context, age time.Duration, limit int) (keys, attempts int64, err error) {
	r, err := s.q.EventsPruneKeys(ctx, dbsqlc.EventsPruneKeysParams{Secs: age.Seconds(), Limit: int32(limit)})
	if err != nil {
		return 0, 0, fmt.Errorf("prune keys: %w", err)
	}
	return r.Keys, r.Attempts, nil
}

// CleanerRun is what a cleaner run did.
type CleanerRun struct {
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	PayloadsPruned  int64     `json:"payloads_pruned"`
	AttemptsDeleted int64     `json:"attempts_deleted"`
	KeysDeleted     int64     `json:"keys_deleted"`
	Error           *string   `json:"error,omitempty"`
}

// CleanerRunRecord keeps run as the last one.
func (s *Store) CleanerRunRecord(ctx context.Context, run CleanerRun) error {
	if err := s.q.CleanerRunRecord(ctx, dbsqlc.CleanerRunRecordParams(run)); err != nil {
		return fmt.Errorf("record cleaner run: %w", err)
	}
	return nil
}

// CleanerRunLast returns the last cleaner run, or ErrNotFound before the first.
func (s *Store) CleanerRunLast(ctx context.Context) (CleanerRun, error) {
	row, err := s.q.CleanerRunLast(ctx)
	r, err := CleanerRun(row), translate(err)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return r, fmt.Errorf("read cleaner run: %w", err)
	}
	return r, err
}
