package cleaner_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/services/cleaner"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// ledger is a migrated database with an endpoint and events in every state,
// the finished ones finished long ago.
type ledger struct {
	st  *store.Store
	ctx context.Context
}

func newLedger(t *testing.T) *ledger {
	t.Helper()
	l := &ledger{ctx: context.Background()}
	var err error
	l.st, err = store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	l.st = l.st.Tenant(store.DefaultTenant)
	_, err = l.st.EndpointInsert(l.ctx, "ep", "https://example.com/hook", "whsec_x", nil)
	require.NoError(t, err)
	return l
}

func (l *ledger) event(t *testing.T, id, corr string, seq int64) {
	t.Helper()
	_, ok, err := l.st.EventInsertRouted(l.ctx, intake.Event{ID: id, CorrelationID: corr, Sequence: seq, EndpointID: "ep", Type: "t", Data: []byte(`{"secret":"payload"}`), PayloadHash: []byte{byte(seq)}}, []string{"ep"}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.st.AttemptInsert(l.ctx, id, "ep", store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "retry"}))
}

// age moves an event's times, and its attempts', back by d.
func (l *ledger) age(t *testing.T, id string, d time.Duration) {
	t.Helper()
	_, err := l.st.Pool().Exec(l.ctx, `UPDATE events SET updated_at = updated_at - make_interval(secs => $2) WHERE id = $1`, id, d.Seconds())
	require.NoError(t, err)
	_, err = l.st.Pool().Exec(l.ctx, `UPDATE delivery_attempts SET started_at = started_at - make_interval(secs => $2) WHERE event_id = $1`, id, d.Seconds())
	require.NoError(t, err)
}

func (l *ledger) get(t *testing.T, id string) (store.Event, int, bool) {
	t.Helper()
	e, err := l.st.EventGet(l.ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, 0, false
	}
	require.NoError(t, err)
	attempts, err := l.st.AttemptsList(l.ctx, id, "ep")
	require.NoError(t, err)
	return e, len(attempts), true
}

// TestCleanerPrunesFinishedEventsOnly: past their retentions, delivered and
// skipped events lose their payload, then their attempts, then their rows;
// an event still waiting, or dead-lettered, keeps everything however old,
// and so does a skipped event's dead letter.
func TestCleanerPrunesFinishedEventsOnly(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	const day = 24 * time.Hour
	// Delivered 100, 40 and 1 days ago; one skipped (with its dead letter)
	// 100 days ago; one waiting and one dead-lettered, both 100 days old.
	for i, id := range []string{"old", "mid", "new", "skipped"} {
		l.event(t, id, "c-"+id, int64(i+1))
	}
	for _, id := range []string{"old", "mid", "new"} {
		require.NoError(t, l.st.DeliveryDelivered(l.ctx, id, "ep", "c-"+id, map[string]int64{"old": 1, "mid": 2, "new": 3}[id], store.Attempt{Attempt: 2, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	}
	_, err := l.st.DeadLetterUpsert(l.ctx, store.DeadLetter{EventID: "skipped", CorrelationID: "c-skipped", Sequence: 4, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}, "window-1")
	require.NoError(t, err)
	require.NoError(t, l.st.DeliverySkipped(l.ctx, "skipped", "ep", "c-skipped", 4, time.Now()))
	l.event(t, "waiting", "c-waiting", 1)
	require.NoError(t, l.st.EventMarkStarted(l.ctx, "waiting", ""))
	l.event(t, "dead", "c-dead", 1)
	_, err = l.st.DeadLetterUpsert(l.ctx, store.DeadLetter{EventID: "dead", CorrelationID: "c-dead", Sequence: 1, EndpointID: "ep", Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}, "window-1")
	require.NoError(t, err)
	for id, d := range map[string]time.Duration{"old": 100 * day, "mid": 40 * day, "new": day, "skipped": 100 * day, "waiting": 100 * day, "dead": 100 * day} {
		l.age(t, id, d)
	}

	c, err := cleaner.New(cleaner.Config{PayloadRetention: 30 * day, AttemptRetention: 30 * day, KeyRetention: 90 * day, BatchSize: 1}, l.st, testenv.Logger(t), nil)
	require.NoError(t, err)
	run, err := c.RunOnce(l.ctx)
	require.NoError(t, err)
	require.Equal(t, store.CleanerRun{StartedAt: run.StartedAt, FinishedAt: run.FinishedAt, PayloadsPruned: 3, AttemptsDeleted: 5, KeysDeleted: 1}, run,
		"payloads of old, mid, skipped; their attempts (two each delivered, one skipped); the row of old (batches of one)")

	_, _, ok := l.get(t, "old")
	require.False(t, ok, "past the key retention the row goes")
	for _, id := range []string{"mid", "skipped"} {
		e, attempts, ok := l.get(t, id)
		require.True(t, ok, id)
		require.Nil(t, e.Data, "%s lost its payload", id)
		require.NotEmpty(t, e.PayloadHash, "%s keeps its hash", id)
		require.Zero(t, attempts, "%s lost its attempts", id)
	}
	_, err = l.st.DeadLetterGet(l.ctx, "skipped", "ep")
	require.NoError(t, err, "a dead letter is never pruned")
	for _, id := range []string{"new", "waiting", "dead"} {
		e, attempts, ok := l.get(t, id)
		require.True(t, ok, id)
		require.JSONEq(t, `{"secret":"payload"}`, string(e.Data), "%s keeps its payload", id)
		require.NotZero(t, attempts, "%s keeps its attempts", id)
	}
	load, err := l.st.CorrelationLoadOf(l.ctx, "c-old", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, load.Next, "the cursor outlives the keys")

	last, err := l.st.CleanerRunLast(l.ctx)
	require.NoError(t, err)
	require.Equal(t, run.PayloadsPruned, last.PayloadsPruned)
	require.Nil(t, last.Error)

	again, err := c.RunOnce(l.ctx)
	require.NoError(t, err)
	require.Zero(t, again.PayloadsPruned+again.AttemptsDeleted+again.KeysDeleted, "nothing left to do")
}

// TestCleanerBacklogStarvesNoKind: a run whose budget one kind's backlog
// would spend still prunes a batch of every kind, and the key pruner takes
// an old event's attempts with its row rather than wait for the attempt
// pruner.
func TestCleanerBacklogStarvesNoKind(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	const day = 24 * time.Hour
	for i, id := range []string{"a", "b", "c"} {
		l.event(t, id, "c-"+id, int64(i+1))
		require.NoError(t, l.st.DeliveryDelivered(l.ctx, id, "ep", "c-"+id, int64(i+1), store.Attempt{Attempt: 2, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
		l.age(t, id, 100*day)
	}
	_, err := l.st.Pool().Exec(l.ctx, `UPDATE events SET data = NULL WHERE id = 'a'`)
	require.NoError(t, err)

	c, err := cleaner.New(cleaner.Config{PayloadRetention: 30 * day, AttemptRetention: 30 * day, KeyRetention: 90 * day, BatchSize: 1, Budget: time.Nanosecond}, l.st, testenv.Logger(t), nil)
	require.NoError(t, err)
	run, err := c.RunOnce(l.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, run.PayloadsPruned, "one batch of payloads")
	require.EqualValues(t, 1, run.KeysDeleted, "and one of keys, though the budget was spent")
	require.EqualValues(t, 2, run.AttemptsDeleted, "a batch of attempts (a's first, the oldest), and a's second with its row")
	_, _, ok := l.get(t, "a")
	require.False(t, ok, "a's row went with its attempts")
	for _, id := range []string{"b", "c"} {
		_, attempts, ok := l.get(t, id)
		require.True(t, ok, id)
		require.Equal(t, 2, attempts, "%s keeps its attempts for the next run", id)
	}
}

// TestCleanerWorksOnceAcrossProcesses: while one process holds the
// cleaner's lock, another's run does nothing.
func TestCleanerWorksOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	release, ok, err := l.st.CleanerLock(l.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	c, err := cleaner.New(cleaner.Config{PayloadRetention: time.Hour, AttemptRetention: time.Hour}, l.st, testenv.Logger(t), nil)
	require.NoError(t, err)
	_, err = c.RunOnce(l.ctx)
	require.ErrorIs(t, err, cleaner.ErrBusy)
	release()
	_, err = c.RunOnce(l.ctx)
	require.NoError(t, err)
}

func TestCheckRetentions(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	require.NoError(t, cleaner.CheckRetentions(30*day, 30*day, 90*day))
	require.NoError(t, cleaner.CheckRetentions(0, 0, 0))
	require.NoError(t, cleaner.CheckRetentions(30*day, 0, 0))
	require.Error(t, cleaner.CheckRetentions(30*day, 30*day, 10*day))
	require.Error(t, cleaner.CheckRetentions(0, 30*day, 90*day), "payloads for ever, rows not")
}
