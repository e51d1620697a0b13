package receiver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/receiver/internal/dbsqlc"
)

// pruneBatchSize is how many processed_events rows one Prune statement
// deletes, in its own transaction: small enough that the row and cursor locks
// it takes never hold up deliveries for long.
const pruneBatchSize = 1000

// pruneUnlockTimeout bounds the release of Prune's lock once ctx has ended.
const pruneUnlockTimeout = 5 * time.Second

// Prune deletes the processed_events rows applied more than olderThan ago
// whose sequence is strictly below their correlation's cursor, raises each
// such correlation's watermark (CorrelationState.PrunedThrough) to the
// highest sequence it deleted, and returns how many rows it deleted. The row
// at the cursor itself, recent rows, and parked events are never touched.
//
// Pruning keeps the wire contract. The cursor's compare-and-swap already
// refuses every sequence at or below it, so no pruned event can be applied
// again; and a delivery whose sequence is at or below the watermark, whatever
// its ID, is answered 200 "already_processed" without calling Apply. That is
// the right answer for a retry of a pruned event, and hookflow never sends
// another ID for a sequence it delivered. What pruning gives up is telling the
// two apart, and the record of which ID applied a sequence: until olderThan,
// another ID claiming an applied sequence is answered 409; after, 200 with
// nothing applied. olderThan is how long you keep that distinction (days, as
// long as you may want to look into a misbehaving sender).
//
// Rows go oldest first, 1,000 per statement, each statement its own short
// transaction that deletes the rows and raises the watermarks together; it is
// safe to run while the receiver serves. One Prune runs at a
// time per database: a call that finds another one running (in this process
// or another replica) returns 0 and nil at once and leaves the work to it.
// Call it on a schedule, say every minute; rows that become prunable while it
// runs are left to the next call. Besides the rows it deletes, each call reads
// the old rows it keeps: one per correlation whose last event is older than
// olderThan. Prune needs the migrations of this package applied.
//
// It returns an error for olderThan ≤ 0 (keeping the rows for ever is not
// calling Prune). On a database error, or when ctx ends, it returns the rows
// deleted by the batches committed before, which stay deleted, with the
// error.
func Prune(ctx context.Context, pool *pgxpool.Pool, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, errors.New("receiver prune: olderThan must be positive")
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("receiver prune: acquire connection: %w", err)
	}
	defer conn.Release()
	locked, err := dbsqlc.New(conn).ProcessedEventPruneLock(ctx)
	if err != nil {
		return 0, fmt.Errorf("receiver prune: lock: %w", err)
	}
	if !locked {
		return 0, nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pruneUnlockTimeout)
		defer cancel()
		if err := dbsqlc.New(conn).ProcessedEventPruneUnlock(uctx); err != nil {
			// The lock belongs to the session: closing the connection (the
			// pool then drops it) lets it go.
			_ = conn.Conn().Close(uctx)
		}
	}()

	// Rows before from that stayed were at their cursor when the scan passed
	// them; reading them again on every batch would make a run quadratic.
	// from nil is from the first row.
	var from *time.Time
	var total int64
	for {
		var r dbsqlc.ProcessedEventPruneRow
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var err error
			r, err = dbsqlc.New(tx).ProcessedEventPrune(ctx, dbsqlc.ProcessedEventPruneParams{
				ProcessedFrom: from, OlderThanSecs: olderThan.Seconds(), BatchSize: pruneBatchSize})
			return err
		})
		if err != nil {
			return total, fmt.Errorf("receiver prune: delete processed events: %w", err)
		}
		total += r.Deleted
		if r.Deleted < pruneBatchSize {
			return total, nil
		}
		// A full batch deleted rows, so the newest of them is a time.
		newest, ok := r.Newest.(time.Time)
		if !ok {
			return total, fmt.Errorf("receiver prune: newest row deleted is %T, not a time", r.Newest)
		}
		from = &newest
	}
}
