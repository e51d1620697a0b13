package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/bench/internal/dbsqlc"
	"github.com/hookflow/hookflow/services/cleaner"
)

// rowSpan is the events lo ≤ i < hi of one INSERT … SELECT.
type rowSpan struct{ lo, hi int64 }

// synthPlan is how a history of rows events is written.
type synthPlan struct {
	rows         int64
	correlations int64
	batches      []rowSpan
}

// newSynthPlan spreads rows events over correlations of perCorrelation
// events each (the last ones one shorter when it does not divide) and cuts
// them into batches of at most batch.
func newSynthPlan(rows, perCorrelation, batch int64) synthPlan {
	p := synthPlan{rows: rows}
	if rows <= 0 {
		return p
	}
	p.correlations = (rows + perCorrelation - 1) / perCorrelation
	for lo := int64(0); lo < rows; lo += batch {
		p.batches = append(p.batches, rowSpan{lo, min(lo+batch, rows)})
	}
	return p
}

// attempts is the number of attempts LedgerAttemptsInsert writes: one per
// event, two for every ledgerRetriedEvery-th (i % 10 = 0).
func (p synthPlan) attempts() int64 {
	return p.rows + (p.rows+ledgerRetriedEvery-1)/ledgerRetriedEvery
}

// eventsOf is how many events correlation c holds (as LedgerEventsInsert
// deals them: event i to correlation i % correlations), and so its cursor
// minus one (LedgerCorrelationsInsert).
func (p synthPlan) eventsOf(c int64) int64 {
	if c < 0 || c >= p.correlations || c >= p.rows {
		return 0
	}
	return (p.rows-1-c)/p.correlations + 1
}

// synth writes the plan's events and attempts on lb.conns connections at
// once, each in one transaction (so the cleaner sees the history whole),
// then the correlations' cursors. oldest is when the first event was
// accepted; the others follow evenly over span.
func (lb *ledgerBench) synth(ctx context.Context, plan synthPlan, oldest time.Time, span time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	began := time.Now()
	conns := min(lb.conns, len(plan.batches))
	lb.p.logf("synthesising %s events, %s attempts and %s correlations on %d connections",
		thousands(plan.rows), thousands(plan.attempts()), thousands(plan.correlations), conns)
	jobs := make(chan rowSpan)
	errs := make(chan error, conns)
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := lb.synthWorker(ctx, plan, jobs, oldest, span, func(n int64) {
				d := done.Add(n)
				lb.p.logf("synthesised %s of %s events (%.0f/s)", thousands(d), thousands(plan.rows), float64(d)/time.Since(began).Seconds())
			})
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
feed:
	for _, b := range plan.batches {
		select {
		case jobs <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	tx, err := lb.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("synthesise cursors: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, dbsqlc.LedgerReplicaRole); err != nil {
		return fmt.Errorf("synthesise cursors: %w", err)
	}
	for lo := int64(0); lo < plan.correlations; lo += synthBatch {
		hi := min(lo+synthBatch, plan.correlations)
		if _, err := tx.Exec(ctx, dbsqlc.LedgerCorrelationsInsert, lo, hi, plan.rows, plan.correlations, oldest, span.Seconds(), lb.s.endpointID); err != nil {
			return fmt.Errorf("synthesise cursors: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("synthesise cursors: %w", err)
	}
	return nil
}

// synthWorker writes the batches it takes from jobs in one transaction.
func (lb *ledgerBench) synthWorker(ctx context.Context, plan synthPlan, jobs <-chan rowSpan, oldest time.Time, span time.Duration, wrote func(int64)) error {
	tx, err := lb.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("synthesise history: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, dbsqlc.LedgerReplicaRole); err != nil {
		return fmt.Errorf("synthesise history: %w", err)
	}
	for b := range jobs {
		if _, err := tx.Exec(ctx, dbsqlc.LedgerEventsInsert, b.lo, b.hi, plan.rows, plan.correlations, lb.s.endpointID, oldest, span.Seconds()); err != nil {
			return fmt.Errorf("synthesise events %d to %d: %w", b.lo, b.hi, err)
		}
		if _, err := tx.Exec(ctx, dbsqlc.LedgerAttemptsInsert, b.lo, b.hi, plan.rows, oldest, span.Seconds(), lb.s.endpointID); err != nil {
			return fmt.Errorf("synthesise attempts of events %d to %d: %w", b.lo, b.hi, err)
		}
		wrote(b.hi - b.lo)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("synthesise history: %w", err)
	}
	return nil
}

// bytesStages are the pruning stages of the bytes-per-event measurement:
// the retentions the cleaner runs with to reach each (0 keeps for ever).
var bytesStages = []struct {
	name                  string
	payload, attempt, key time.Duration
}{
	{"payloads pruned", time.Second, 0, 0},
	{"+ attempts pruned (keys kept)", time.Second, time.Second, 0},
	{"+ keys pruned (cursors kept)", time.Second, time.Second, time.Second},
}

// bytes synthesises n delivered events within every default retention,
// reads the ledger's live size, then prunes it stage by stage with the
// cleaner's own code and reads it again after each.
func (lb *ledgerBench) bytes(ctx context.Context, n int64) (*LedgerBytes, error) {
	lb.p.logf("bytes per event: a ledger of %s delivered events, read before and after pruning", thousands(n))
	if err := lb.exec(ctx, "empty the ledger", dbsqlc.LedgerTruncate); err != nil {
		return nil, err
	}
	plan := newSynthPlan(n, ledgerEventsPerCorrelation, synthBatch)
	if err := lb.synth(ctx, plan, time.Now().Add(-ledgerNewest-bytesSpan), bytesSpan); err != nil {
		return nil, err
	}
	b := &LedgerBytes{Events: n}
	read := func(st BytesStage) error {
		if err := lb.exec(ctx, "vacuum full", dbsqlc.LedgerVacuumFull); err != nil {
			return err
		}
		sz, err := lb.sizes(ctx)
		if err != nil {
			return err
		}
		st.EventsHeap, st.EventsIndexes, st.Deliveries, st.Attempts, st.Correlations, st.Total = sz.eventsHeap, sz.eventsIndexes, sz.deliveries, sz.attempts, sz.correlations, sz.total()
		st.PerEvent = float64(st.Total) / float64(n)
		lb.p.logf("bytes per event, %s: %.0f (%s MB)", st.Name, st.PerEvent, mb(st.Total))
		b.Stages = append(b.Stages, st)
		return nil
	}
	if err := read(BytesStage{Name: "as delivered"}); err != nil {
		return nil, err
	}
	for _, s := range bytesStages {
		began := time.Now()
		run, err := lb.clean(ctx, s.payload, s.attempt, s.key)
		if err != nil {
			return nil, err
		}
		st := BytesStage{Name: s.name, PayloadsPruned: run.PayloadsPruned, AttemptsDeleted: run.AttemptsDeleted, KeysDeleted: run.KeysDeleted,
			PruneSeconds: time.Since(began).Seconds()}
		if err := read(st); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// clean runs hookflow's cleaner with these retentions (its default batch
// size) until a run prunes nothing, and returns what it pruned. The API's
// cleaner takes the same lock; a busy lock is waited for.
func (lb *ledgerBench) clean(ctx context.Context, payload, attempt, key time.Duration) (store.CleanerRun, error) {
	var total store.CleanerRun
	st, err := store.New(lb.pool)
	if err != nil {
		return total, err
	}
	c, err := cleaner.New(cleaner.Config{
		PayloadRetention: payload, AttemptRetention: attempt, KeyRetention: key,
		Interval: time.Hour, Budget: 20 * time.Second,
	}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return total, err
	}
	for {
		run, err := c.RunOnce(ctx)
		if errors.Is(err, cleaner.ErrBusy) {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return total, err
			}
			continue
		}
		if err != nil {
			return total, err
		}
		total.PayloadsPruned += run.PayloadsPruned
		total.AttemptsDeleted += run.AttemptsDeleted
		total.KeysDeleted += run.KeysDeleted
		if run.PayloadsPruned+run.AttemptsDeleted+run.KeysDeleted == 0 {
			return total, nil
		}
		lb.p.logf("cleaner: %s payloads, %s attempts, %s keys so far", thousands(total.PayloadsPruned),
			thousands(total.AttemptsDeleted), thousands(total.KeysDeleted))
	}
}
