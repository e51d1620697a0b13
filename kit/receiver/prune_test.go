package receiver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/receiver"
)

const retention = 30 * 24 * time.Hour

// age makes the processed_events rows of ids look applied 40 days ago.
func (b *bundle) age(t *testing.T, ids ...string) {
	t.Helper()
	tag, err := b.pool.Exec(context.Background(),
		`UPDATE processed_events SET processed_at = now() - interval '40 days' WHERE event_id = ANY($1)`, ids)
	require.NoError(t, err)
	require.EqualValues(t, len(ids), tag.RowsAffected(), "every aged event has a row")
}

// processed returns the event IDs processed_events holds for correlationID,
// in sequence order.
func (b *bundle) processed(t *testing.T, correlationID string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT event_id FROM processed_events WHERE correlation_id = $1 ORDER BY sequence`, correlationID)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

func (b *bundle) correlation(t *testing.T, correlationID string) receiver.CorrelationState {
	t.Helper()
	st, err := b.rc.Correlation(context.Background(), testEndpoint, correlationID)
	require.NoError(t, err)
	return st
}

// postAll delivers events seq 1..n of correlationID as "<prefix><seq>" and
// requires each to be applied.
func (b *bundle) postAll(t *testing.T, prefix, correlationID string, n int64) {
	t.Helper()
	for seq := int64(1); seq <= n; seq++ {
		code, status := b.post(t, fmt.Sprintf("%s%d", prefix, seq), correlationID, seq)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "applied", status)
	}
}

func TestPruneDeletesOldRowsBelowTheCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// all-old: every row old; the cursor's own row (a5) stays. A parked
	// event (7, waiting for 6) is left alone however old.
	b.postAll(t, "a", "all-old", 5)
	b.age(t, "a1", "a2", "a3", "a4", "a5")
	code, _ := b.post(t, "a7", "all-old", 7)
	require.Equal(t, http.StatusAccepted, code)
	_, err := b.pool.Exec(ctx, `UPDATE parked_events SET parked_at = now() - interval '40 days'`)
	require.NoError(t, err)
	// some-old: only the first row is old; the recent ones stay.
	b.postAll(t, "b", "some-old", 3)
	b.age(t, "b1")
	// single: one old event, which is its cursor.
	b.postAll(t, "c", "single", 1)
	b.age(t, "c1")
	// ahead: old rows the cursor is behind (written by hand: the kit never
	// leaves one) are not below it, so they stay.
	b.postAll(t, "d", "ahead", 1)
	_, err = b.pool.Exec(ctx, `INSERT INTO processed_events (endpoint_id, event_id, correlation_id, sequence, processed_at)
		VALUES ($1, 'd5', 'ahead', 5, now() - interval '40 days'), ($1, 'd6', 'ahead', 6, now() - interval '40 days')`, testEndpoint)
	require.NoError(t, err)
	b.age(t, "d1")

	n, err := receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "a1-a4 and b1")

	require.Equal(t, []string{"a5"}, b.processed(t, "all-old"))
	require.Equal(t, []string{"b2", "b3"}, b.processed(t, "some-old"))
	require.Equal(t, []string{"c1"}, b.processed(t, "single"))
	require.Equal(t, []string{"d1", "d5", "d6"}, b.processed(t, "ahead"))

	st := b.correlation(t, "all-old")
	require.EqualValues(t, 5, st.LastSequence)
	require.EqualValues(t, 4, st.PrunedThrough)
	require.Equal(t, []receiver.ParkedEvent{{EventID: "a7", Sequence: 7, PreviousSequence: 6, ParkedAt: st.Parked[0].ParkedAt}}, st.Parked)
	require.EqualValues(t, 1, b.correlation(t, "some-old").PrunedThrough)
	require.Zero(t, b.correlation(t, "single").PrunedThrough)
	require.Zero(t, b.correlation(t, "ahead").PrunedThrough)

	n, err = receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to prune")

	// The parked event still drains behind its predecessor.
	code, status := b.post(t, "a6", "all-old", 6)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7"}, b.applied(t, "all-old"))

	// The old cursor row of all-old is below the cursor now.
	n, err = receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.EqualValues(t, 5, b.correlation(t, "all-old").PrunedThrough)
}

// TestPrunedEventsKeepTheContract: after pruning, a retry of a pruned event is
// answered already_processed and not applied, and so is another ID claiming a
// pruned sequence; above the watermark the answers are today's.
func TestPrunedEventsKeepTheContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.postAll(t, "evt_", "order-1", 3)
	b.age(t, "evt_1", "evt_2", "evt_3")
	n, err := receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	for _, d := range []struct {
		id  string
		seq int64
	}{{"evt_1", 1}, {"evt_2", 2}, {"evt_other", 2}, {"evt_3", 3}} {
		code, status := b.post(t, d.id, "order-1", d.seq)
		require.Equal(t, http.StatusOK, code, d.id)
		require.Equal(t, "already_processed", status, d.id)
	}
	code, _ := b.post(t, "evt_other", "order-1", 3)
	require.Equal(t, http.StatusConflict, code, "another ID at the cursor, whose row is kept")

	require.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, b.applied(t, "order-1"), "Apply was not called again")
	require.Equal(t, []string{"evt_3"}, b.processed(t, "order-1"), "the answers wrote nothing")
	require.Zero(t, b.count(t, "parked_events"))

	code, status := b.post(t, "evt_4", "order-1", 4)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
}

// TestPruneSkippedSequenceAboveWatermarkIsConflict: a sequence the cursor
// passed with no row (the sender skipped it), above the watermark, is still a
// conflict.
func TestPruneSkippedSequenceAboveWatermarkIsConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	corr := "skip-prune"
	b.postAll(t, "s", corr, 1)
	code, status := b.deliver(t, "s3", corr, 3, 1, 2)
	require.Equal(t, http.StatusOK, code, status)
	b.age(t, "s1", "s3")

	n, err := receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.EqualValues(t, 1, b.correlation(t, corr).PrunedThrough)

	code, _ = b.post(t, "s2", corr, 2)
	require.Equal(t, http.StatusConflict, code)
	code, status = b.post(t, "s1", corr, 1)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "already_processed", status)
	require.Equal(t, []string{"s1", "s3"}, b.applied(t, corr))
}

// TestPruneWhileRetriesArrive prunes tens of thousands of rows while their events are
// retried from many goroutines: whether a retry lands before, during or after
// the batch that deletes its row, it is answered already_processed and never
// applied.
func TestPruneWhileRetriesArrive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const events, workers, retries = 20000, 12, 40
	_, err := b.pool.Exec(ctx, `INSERT INTO processed_events (endpoint_id, event_id, correlation_id, sequence, processed_at)
		SELECT $2, 'race_' || s, 'race', s, now() - interval '40 days' + s * interval '1 ms'
		FROM generate_series(1, $1::bigint) s`, events, testEndpoint)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO correlation_cursors (endpoint_id, correlation_id, last_sequence) VALUES ($2, 'race', $1)`, events, testEndpoint)
	require.NoError(t, err)

	var wg sync.WaitGroup
	var pruned int64
	var pruneErr error
	wg.Go(func() { pruned, pruneErr = receiver.Prune(ctx, b.pool, retention) })
	for range workers {
		wg.Go(func() {
			for range retries {
				seq := rand.Int64N(events) + 1
				id := fmt.Sprintf("race_%d", seq)
				code, status, err := send(b.url, b.secret, id, envelope(id, "race", seq), time.Now())
				if err != nil || code != http.StatusOK || status != "already_processed" {
					t.Errorf("retry %s: %d %s %v", id, code, status, err)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, pruneErr)
	require.EqualValues(t, events-1, pruned)
	require.Equal(t, []string{fmt.Sprintf("race_%d", events)}, b.processed(t, "race"))
	require.EqualValues(t, events-1, b.correlation(t, "race").PrunedThrough)
	require.Zero(t, b.count(t, "applied_log"))
}

// TestPruneBetweenDedupAndLookup commits a prune in the narrowest window: a
// retry's insert has found the event's row, and the lookup that tells a retry
// from another ID has not run yet. A statement trigger holds the retry there.
func TestPruneBetweenDedupAndLookup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.postAll(t, "evt_", "order-1", 3)
	b.age(t, "evt_1", "evt_2", "evt_3")
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION stall_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$;
		CREATE TRIGGER stall_after_insert AFTER INSERT ON processed_events
		FOR EACH STATEMENT EXECUTE FUNCTION stall_after_insert();`)
	require.NoError(t, err)

	type answer struct {
		code   int
		status string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		code, status, err := send(b.url, b.secret, "evt_1", envelope("evt_1", "order-1", 1), time.Now())
		answered <- answer{code, status, err}
	}()
	require.Eventually(t, func() bool {
		var sleeping int
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'PgSleep'`).Scan(&sleeping)
		return err == nil && sleeping == 1
	}, 5*time.Second, 10*time.Millisecond, "the retry stalls after its insert")

	n, err := receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	a := <-answered
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.code, a.status)
	require.Equal(t, "already_processed", a.status)
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, b.applied(t, "order-1"))
}

func TestPruneOnePrunerAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.postAll(t, "evt_", "order-1", 2)
	b.age(t, "evt_1")

	_, err := receiver.Prune(ctx, b.pool, 0)
	require.Error(t, err, "0 means keep for ever: not a retention to prune by")
	_, err = receiver.Prune(ctx, b.pool, -time.Hour)
	require.Error(t, err)

	// Another process pruning holds the lock: this call leaves the work to it.
	other, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer other.Release()
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('hookflow.receiver.prune', 0))`)
	require.NoError(t, err)
	n, err := receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []string{"evt_1", "evt_2"}, b.processed(t, "order-1"))

	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('hookflow.receiver.prune', 0))`)
	require.NoError(t, err)
	n, err = receiver.Prune(ctx, b.pool, retention)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
