package store_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/testenv"
	"github.com/hookflow/hookflow/schema"
	"github.com/hookflow/hookflow/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestStats: a correlation missing its next sequence and one held by a
// dead letter are blocked; one merely in flight is not.
func TestStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = schema.Migrate(ctx, pool)
	require.NoError(t, err)
	st, err := store.New(pool)
	require.NoError(t, err)
	_, err = st.EndpointInsert(ctx, "ep", "https://example.com/hook", "whsec_x")
	require.NoError(t, err)
	insert := func(id, corr string, seq int64) {
		t.Helper()
		_, ok, err := st.EventInsert(ctx, store.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: "ep", Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}})
		require.NoError(t, err)
		require.True(t, ok)
	}
	insert("gap-2", "gap", 2)       // 1 never arrived
	insert("dl-1", "dl", 1)         // dead-lettered
	insert("dl-2", "dl", 2)         // held behind it
	insert("ok-1", "ok", 1)         // delivering
	insert("done-1", "done", 1)     // delivered
	insert("queued-1", "queued", 1) // still queued
	for _, id := range []string{"gap-2", "dl-1", "dl-2", "ok-1", "done-1"} {
		require.NoError(t, st.EventMarkStarted(ctx, id))
	}
	require.NoError(t, st.EventMarkDelivering(ctx, "dl-1"))
	require.NoError(t, st.EventMarkDeadLettered(ctx, "dl-1"))
	require.NoError(t, st.DeadLetterUpsert(ctx, store.DeadLetter{EventID: "dl-1", CorrelationID: "dl", Sequence: 1, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400"}))
	require.NoError(t, st.EventMarkDelivering(ctx, "ok-1"))
	require.NoError(t, st.EventMarkDelivering(ctx, "done-1"))
	require.NoError(t, st.EventFinish(ctx, "done-1", "done", 1, store.StateDelivered, time.Now()))

	sm, err := st.StatsSummary(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Summary{Queued: 1, InFlight: 3, DeliveredLast5m: 1, DeadLettersOpen: 1, OldestLagSeconds: sm.OldestLagSeconds}, sm)
	require.Greater(t, sm.OldestLagSeconds, 0.0)

	blocked, total, err := st.StatsBlockedCorrelations(ctx, 10)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	byID := map[string]store.BlockedCorrelation{}
	for _, b := range blocked {
		byID[b.CorrelationID] = b
	}
	require.Equal(t, "missing", byID["gap"].BlockedBy)
	require.Nil(t, byID["gap"].BlockingEventID)
	require.EqualValues(t, 1, byID["gap"].NextSequence)
	require.Equal(t, store.StateDeadLettered, byID["dl"].BlockedBy)
	require.Equal(t, "dl-1", *byID["dl"].BlockingEventID)
	require.EqualValues(t, 1, byID["dl"].Parked)

	top, total, err := st.StatsBlockedCorrelations(ctx, 1)
	require.NoError(t, err)
	require.Len(t, top, 1)
	require.EqualValues(t, 2, total, "the count is of all blocked correlations, not the page")
}
