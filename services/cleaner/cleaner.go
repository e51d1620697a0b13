// Package cleaner keeps hookflow's ledger bounded: on an interval it empties
// the payloads of events delivered or skipped longer than the payload
// retention ago, deletes their attempts after the attempt retention and
// their rows (their keys) after the key retention. Events not finished and
// dead letters are never touched. Every API process runs one; a session
// lock in Postgres lets one of them work at a time, and the work goes in
// small batches, each its own short statement, so no lock is held long.
package cleaner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
)

// Config tunes the cleaner. A zero retention keeps that kind for ever.
type Config struct {
	PayloadRetention time.Duration
	AttemptRetention time.Duration
	KeyRetention     time.Duration
	// Interval is how often a run starts (default 1 min).
	Interval time.Duration
	// BatchSize bounds the rows one statement touches (default 1,000).
	BatchSize int
	// Budget bounds one run; what is left waits for the next (default
	// half the interval).
	Budget time.Duration
}

// Cleaner prunes the ledger.
type Cleaner struct {
	cfg     Config
	store   *store.Store
	logger  *slog.Logger
	metrics *metrics.Metrics
}

// New returns a cleaner; store and logger are required, metrics optional.
// A key retention shorter than the payload or attempt retention is refused:
// a key's row goes last.
func New(cfg Config, st *store.Store, logger *slog.Logger, m *metrics.Metrics) (*Cleaner, error) {
	if st == nil || logger == nil {
		return nil, errors.New("cleaner: store and logger are required")
	}
	cfg.Interval = cmp.Or(cfg.Interval, time.Minute)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	cfg.Budget = cmp.Or(cfg.Budget, cfg.Interval/2)
	if err := CheckRetentions(cfg.PayloadRetention, cfg.AttemptRetention, cfg.KeyRetention); err != nil {
		return nil, err
	}
	return &Cleaner{cfg: cfg, store: st, logger: logger, metrics: m}, nil
}

// CheckRetentions refuses a key retention shorter than the payload or
// attempt retention, or finite while one of them keeps for ever: an
// event's row goes last.
func CheckRetentions(payload, attempt, key time.Duration) error {
	if key > 0 && (payload == 0 || attempt == 0 || key < payload || key < attempt) {
		return errors.New("HOOKFLOW_KEY_RETENTION must be at least HOOKFLOW_PAYLOAD_RETENTION and HOOKFLOW_ATTEMPT_RETENTION (and 0, for ever, if either of them is)")
	}
	return nil
}

// Run runs the cleaner every Interval until ctx is done.
func (c *Cleaner) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			c.logger.Warn("cleaner run failed", "error", err)
		}
	}
}

// ErrBusy is returned by RunOnce when another process is cleaning.
var ErrBusy = errors.New("another process is cleaning")

// RunOnce is one run: it takes the lock (ErrBusy when another process has
// it), prunes what the retentions allow within the budget, records what it
// did (GET /v1/stats) and returns it.
func (c *Cleaner) RunOnce(ctx context.Context) (store.CleanerRun, error) {
	release, ok, err := c.store.CleanerLock(ctx)
	if err != nil {
		c.metrics.CleanerRun("failed")
		return store.CleanerRun{}, err
	}
	if !ok {
		c.metrics.CleanerRun("skipped")
		return store.CleanerRun{}, ErrBusy
	}
	defer release()

	run := store.CleanerRun{StartedAt: time.Now()}
	deadline := run.StartedAt.Add(c.cfg.Budget)
	pruneKeys := func(ctx context.Context, age time.Duration, limit int) (int64, error) {
		keys, attempts, err := c.store.EventsPruneKeys(ctx, age, limit)
		run.AttemptsDeleted += attempts
		c.metrics.Cleaned("attempts", attempts)
		return keys, err
	}
	steps := []struct {
		kind      string
		retention time.Duration
		prune     func(context.Context, time.Duration, int) (int64, error)
		count     *int64
	}{
		{"payloads", c.cfg.PayloadRetention, c.store.EventsPrunePayloads, &run.PayloadsPruned},
		{"attempts", c.cfg.AttemptRetention, c.store.AttemptsPrune, &run.AttemptsDeleted},
		{"keys", c.cfg.KeyRetention, pruneKeys, &run.KeysDeleted},
	}
	enabled := 0
	for _, st := range steps {
		if st.retention > 0 {
			enabled++
		}
	}
	var runErr error
	for _, st := range steps {
		if st.retention <= 0 {
			continue
		}
		// Each kind gets at least one batch and its share of what is left
		// of the budget, so a backlog of one (a first run on a year of
		// history) does not starve the others; time a kind does not use
		// passes on.
		stepDeadline := time.Now().Add(time.Until(deadline) / time.Duration(enabled))
		enabled--
		for {
			n, err := st.prune(ctx, st.retention, c.cfg.BatchSize)
			*st.count += n
			c.metrics.Cleaned(st.kind, n)
			if err != nil {
				runErr = err
				break
			}
			if n < int64(c.cfg.BatchSize) || !time.Now().Before(stepDeadline) {
				break
			}
		}
		if runErr != nil {
			break
		}
	}
	run.FinishedAt = time.Now()
	if runErr != nil {
		msg := runErr.Error()
		run.Error = &msg
		c.metrics.CleanerRun("failed")
	} else {
		c.metrics.CleanerRun("done")
	}
	if err := c.store.CleanerRunRecord(context.WithoutCancel(ctx), run); err != nil && runErr == nil {
		runErr = err
	}
	if run.PayloadsPruned+run.AttemptsDeleted+run.KeysDeleted > 0 {
		c.logger.Info("cleaner pruned the ledger", "payloads_pruned", run.PayloadsPruned, "attempts_deleted", run.AttemptsDeleted,
			"keys_deleted", run.KeysDeleted, "took_ms", run.FinishedAt.Sub(run.StartedAt).Milliseconds())
	}
	if runErr != nil {
		return run, fmt.Errorf("clean: %w", runErr)
	}
	return run, nil
}
