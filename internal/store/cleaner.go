package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CleanerLock takes the cleaner's lock for one run, on a connection of its
// own; ok is false when another process holds it. release lets it go.
func (s *Store) CleanerLock(ctx context.Context) (release func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("cleaner lock: %w", err)
	}
	if err := conn.QueryRow(ctx, s.q.CleanerLock).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("cleaner lock: %w", err)
		}
		return nil, false, nil
	}
	return func() {
		// A lock left behind would stop every cleaner; closing the session
		// lets it go when the unlock cannot.
		if _, err := conn.Exec(context.WithoutCancel(ctx), s.q.CleanerUnlock); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		conn.Release()
	}, true, nil
}

// EventsPrunePayloads empties the payload of up to limit events delivered or
// skipped more than age ago, and returns how many.
func (s *Store) EventsPrunePayloads(ctx context.Context, age time.Duration, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.q.EventsPrunePayloads, age.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune payloads: %w", err)
	}
	return tag.RowsAffected(), nil
}

// AttemptsPrune deletes up to limit attempts older than age of finished
// events, and returns how many.
func (s *Store) AttemptsPrune(ctx context.Context, age time.Duration, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.q.AttemptsPrune, age.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune attempts: %w", err)
	}
	return tag.RowsAffected(), nil
}

// EventsPruneKeys deletes up to limit events that finished more than age
// ago, whose payload is gone, that have no dead letter and that are behind
// their correlation's cursor, with their deliveries and the attempts they
// still have, and returns how many events and attempts. Lanes rows stay.
func (s *Store) EventsPruneKeys(ctx context.Context, age time.Duration, limit int) (keys, attempts int64, err error) {
	if err := s.pool.QueryRow(ctx, s.q.EventsPruneKeys, age.Seconds(), limit).Scan(&keys, &attempts); err != nil {
		return 0, 0, fmt.Errorf("prune keys: %w", err)
	}
	return keys, attempts, nil
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
	if _, err := s.pool.Exec(ctx, s.q.CleanerRunRecord, run.StartedAt, run.FinishedAt, run.PayloadsPruned, run.AttemptsDeleted, run.KeysDeleted, run.Error); err != nil {
		return fmt.Errorf("record cleaner run: %w", err)
	}
	return nil
}

// CleanerRunLast returns the last cleaner run, or ErrNotFound before the first.
func (s *Store) CleanerRunLast(ctx context.Context) (CleanerRun, error) {
	var r CleanerRun
	err := translate(s.pool.QueryRow(ctx, s.q.CleanerRunLast).Scan(&r.StartedAt, &r.FinishedAt, &r.PayloadsPruned, &r.AttemptsDeleted, &r.KeysDeleted, &r.Error))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return r, fmt.Errorf("read cleaner run: %w", err)
	}
	return r, err
}
