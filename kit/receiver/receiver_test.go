package receiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/webhook"
)

// pg is the package's Postgres cluster, started on first use.
var pg localpg.Suite

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

// bundle is what a test gets from setup: a migrated database, a receiver
// whose Apply appends to applied_log, and a real HTTP server in front of it.
type bundle struct {
	pool   *pgxpool.Pool
	rc     *receiver.Receiver
	url    string
	secret string
	// fail, when set, decides whether Apply fails for an event.
	fail atomic.Pointer[func(receiver.Event) error]
	// crash makes the next response abort the connection after processing,
	// as a process dying between COMMIT and the answer would.
	crash atomic.Bool
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupAt(t, receiver.StartFromBeginning)
}

// setupAt is setup with a receiver that starts never-seen lanes at start.
func setupAt(t *testing.T, start receiver.StartPosition) *bundle {
	t.Helper()
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(pg.NewDatabase(t))
	require.NoError(t, err)
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, receiver.Migrate(ctx, pool))
	_, err = pool.Exec(ctx, `CREATE TABLE applied_log (
		n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		event_id text NOT NULL,
		correlation_id text NOT NULL,
		sequence bigint NOT NULL)`)
	require.NoError(t, err)

	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	b := &bundle{pool: pool, secret: secret}
	b.rc, err = receiver.New(receiver.Config{Secrets: []string{secret}, MaxBodyBytes: 4096, StartPosition: start}, receiver.Deps{
		Pool: pool, Logger: testLogger(t), Apply: b.apply,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.crash.CompareAndSwap(true, false) {
			w = abortingWriter{w}
		}
		b.rc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// apply is the test receivers' Apply: it fails as b.fail says, or appends
// the event to applied_log.
func (b *bundle) apply(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
	if f := b.fail.Load(); f != nil {
		if err := (*f)(ev); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO applied_log (event_id, correlation_id, sequence) VALUES ($1, $2, $3)`,
		ev.ID, ev.CorrelationID, ev.Sequence)
	return err
}

// abortingWriter kills the connection at the first byte of the answer: the
// transaction has committed, the client never learns it.
type abortingWriter struct{ http.ResponseWriter }

func (abortingWriter) WriteHeader(int)           { panic(http.ErrAbortHandler) }
func (abortingWriter) Write([]byte) (int, error) { panic(http.ErrAbortHandler) }

// envelope is event seq of a correlation whose every sequence goes to this
// endpoint: its previous_sequence is seq-1.
func envelope(id, correlationID string, seq int64) []byte {
	return eventBody(receiver.Event{ID: id, CorrelationID: correlationID, Sequence: seq, PreviousSequence: seq - 1})
}

// testEndpoint is the endpoint_id of the envelopes a test sends when it
// does not name one.
const testEndpoint = "ep_test"

// eventBody encodes ev with a type, a timestamp and data filled in, and
// testEndpoint as its endpoint when it has none.
func eventBody(ev receiver.Event) []byte {
	if ev.EndpointID == "" {
		ev.EndpointID = testEndpoint
	}
	ev.Type = "test.event"
	ev.Timestamp = time.Now().UTC().Truncate(time.Second)
	ev.Data = json.RawMessage(`{"n":1}`)
	b, _ := json.Marshal(ev)
	return b
}

// send posts body signed with secret as event id at sent and returns the
// status and the answer's "status" field (or, for errors, the whole body).
// It reports problems as errors so that worker goroutines can call it.
func send(url, secret, id string, body []byte, sent time.Time) (int, string, error) {
	sig, err := webhook.Sign([]string{secret}, id, sent.Unix(), body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, string(raw), nil
	}
	var out struct{ Status string }
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, "", fmt.Errorf("decode answer %s: %w", raw, err)
	}
	return resp.StatusCode, out.Status, nil
}

// post delivers event (id, correlation, seq) and requires the HTTP exchange
// to succeed.
func (b *bundle) post(t *testing.T, id, correlationID string, seq int64) (int, string) {
	t.Helper()
	code, status, err := send(b.url, b.secret, id, envelope(id, correlationID, seq), time.Now())
	require.NoError(t, err)
	return code, status
}

// deliver posts the event (id, correlation, seq) whose previous_sequence is
// previous and whose skipped_sequences are skipped, and requires the HTTP
// exchange to succeed.
func (b *bundle) deliver(t *testing.T, id, correlationID string, seq, previous int64, skipped ...int64) (int, string) {
	t.Helper()
	body := eventBody(receiver.Event{ID: id, CorrelationID: correlationID, Sequence: seq, PreviousSequence: previous, SkippedSequences: skipped})
	code, status, err := send(b.url, b.secret, id, body, time.Now())
	require.NoError(t, err)
	return code, status
}

// link is an event of a sparse chain: its ID, sequence and
// previous_sequence.
type link struct {
	id            string
	seq, previous int64
}

// chain149 is the chain of an endpoint that gets sequences 1, 4 and 9.
var chain149 = []link{{"e1", 1, 0}, {"e4", 4, 1}, {"e9", 9, 4}}

// deliverAll delivers each event of links in turn and requires each answer
// to be 200 with status.
func (b *bundle) deliverAll(t *testing.T, correlationID, status string, links ...link) {
	t.Helper()
	for _, l := range links {
		code, got := b.deliver(t, l.id, correlationID, l.seq, l.previous)
		require.Equal(t, http.StatusOK, code, l.id)
		require.Equal(t, status, got, l.id)
	}
}

// applied returns the event IDs Apply committed for correlationID, in the
// order it committed them.
func (b *bundle) applied(t *testing.T, correlationID string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT event_id FROM applied_log WHERE correlation_id = $1 ORDER BY n`, correlationID)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n))
	return n
}

// emptyPool is a pool on a fresh database with none of the kit's tables.
func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pg.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)

	require.ErrorIs(t, receiver.CheckMigrations(ctx, pool), receiver.ErrMigrationsPending)
	require.NoError(t, receiver.Migrate(ctx, pool))
	require.NoError(t, receiver.Migrate(ctx, pool), "second run is a no-op")
	require.NoError(t, receiver.CheckMigrations(ctx, pool))

	var versions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM receiver_schema_migrations`).Scan(&versions))
	ups, err := fs.Glob(receiver.Migrations(), "*.up.sql")
	require.NoError(t, err)
	downs, err := fs.Glob(receiver.Migrations(), "*.down.sql")
	require.NoError(t, err)
	require.NotEmpty(t, ups)
	require.Len(t, downs, len(ups))
	require.Equal(t, len(ups), versions)
}

func TestDuplicateIsAlreadyProcessed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, status := b.post(t, "evt_a", "order-1", 1)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)

	code, status = b.post(t, "evt_a", "order-1", 1)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "already_processed", status)
	require.Equal(t, []string{"evt_a"}, b.applied(t, "order-1"))
}

func TestGapParksThenDrainsInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, seq := range []int64{3, 2, 3} {
		code, status := b.post(t, fmt.Sprintf("evt_%d", seq), "order-1", seq)
		require.Equal(t, http.StatusAccepted, code)
		require.Equal(t, "parked", status)
	}
	st, err := b.rc.Correlation(context.Background(), testEndpoint, "order-1")
	require.NoError(t, err)
	require.Zero(t, st.LastSequence)
	require.Len(t, st.Parked, 2)

	code, status := b.post(t, "evt_1", "order-1", 1)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, b.applied(t, "order-1"))

	st, err = b.rc.Correlation(context.Background(), testEndpoint, "order-1")
	require.NoError(t, err)
	require.EqualValues(t, 3, st.LastSequence)
	require.Empty(t, st.Parked)

	// The sender retries a 202; the drain already applied it.
	code, status = b.post(t, "evt_3", "order-1", 3)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "already_processed", status)

	_, err = b.rc.Correlation(context.Background(), testEndpoint, "order-unknown")
	require.ErrorIs(t, err, receiver.ErrNotFound)
}

func TestParkedEventRetriedAfterFailedDrainIsApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var failures atomic.Int32
	failOnce := func(ev receiver.Event) error {
		if ev.Sequence == 2 && failures.Add(1) == 1 {
			return errors.New("downstream unavailable")
		}
		return nil
	}
	b.fail.Store(&failOnce)

	code, _ := b.post(t, "evt_2", "order-1", 2)
	require.Equal(t, http.StatusAccepted, code)
	code, status := b.post(t, "evt_1", "order-1", 1)
	require.Equal(t, http.StatusOK, code, "the predecessor is applied even though draining its successor fails")
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"evt_1"}, b.applied(t, "order-1"))

	code, status = b.post(t, "evt_2", "order-1", 2)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"evt_1", "evt_2"}, b.applied(t, "order-1"))
	require.Zero(t, b.count(t, "parked_events"))
}

func TestSequenceUnderAnotherIDIsConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, _ := b.post(t, "evt_a", "order-1", 1)
	require.Equal(t, http.StatusOK, code)
	code, _ = b.post(t, "evt_b", "order-1", 1)
	require.Equal(t, http.StatusConflict, code, "an applied sequence never applies again")

	code, _ = b.post(t, "evt_c", "order-1", 3)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.post(t, "evt_d", "order-1", 3)
	require.Equal(t, http.StatusConflict, code, "a parked sequence is not parked twice")

	code, _ = b.post(t, "evt_e", "order-1", 2)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"evt_a", "evt_e", "evt_c"}, b.applied(t, "order-1"))
}

func TestApplyErrorRollsBackEverything(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fail := func(receiver.Event) error { return errors.New("ledger locked") }
	b.fail.Store(&fail)

	code, _ := b.post(t, "evt_1", "order-1", 1)
	require.Equal(t, http.StatusInternalServerError, code)
	for _, table := range []string{"applied_log", "processed_events", "correlation_cursors", "parked_events"} {
		require.Zero(t, b.count(t, table), table)
	}

	b.fail.Store(nil)
	code, status := b.post(t, "evt_1", "order-1", 1)
	require.Equal(t, http.StatusOK, code, "the sender's retry succeeds")
	require.Equal(t, "applied", status)
}

func TestApplyRejectionIsPermanent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reject := func(receiver.Event) error { return fmt.Errorf("amount missing: %w", receiver.ErrRejected) }
	b.fail.Store(&reject)

	code, _ := b.post(t, "evt_1", "order-1", 1)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Zero(t, b.count(t, "processed_events"))
}

func TestCrashBetweenCommitAndResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.crash.Store(true)
	_, _, err := send(b.url, b.secret, "evt_1", envelope("evt_1", "order-1", 1), time.Now())
	require.Error(t, err, "the connection dies before the answer")

	code, status := b.post(t, "evt_1", "order-1", 1)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "already_processed", status)
	require.Equal(t, []string{"evt_1"}, b.applied(t, "order-1"))
}

func TestRejectedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := webhook.NewSecret()
	require.NoError(t, err)
	cases := []struct {
		name     string
		secret   string        // signing secret; empty: the receiver's
		headerID string        // webhook-id; empty: the envelope's
		body     string        // body sent; empty: a valid envelope
		age      time.Duration // how old the timestamp is
		tamper   bool          // change the body after signing
		want     int
	}{
		{name: "wrong secret", secret: other, want: http.StatusUnauthorized},
		{name: "expired timestamp", age: 10 * time.Minute, want: http.StatusUnauthorized},
		{name: "tampered body", tamper: true, want: http.StatusUnauthorized},
		{name: "oversize body", body: `{"id":"evt_1","pad":"` + strings.Repeat("x", 5000) + `"}`, want: http.StatusRequestEntityTooLarge},
		{name: "not json", body: `not json`, want: http.StatusBadRequest},
		{name: "id differs from webhook-id", headerID: "evt_other", want: http.StatusBadRequest},
		{name: "sequence zero", body: `{"id":"evt_1","type":"t","endpoint_id":"ep_test","correlation_id":"c","sequence":0}`, want: http.StatusBadRequest},
		{name: "dot in correlation id", body: `{"id":"evt_1","type":"t","endpoint_id":"ep_test","correlation_id":"a.b","sequence":1}`, want: http.StatusBadRequest},
		{name: "missing endpoint id", body: `{"id":"evt_1","type":"t","correlation_id":"c","sequence":1}`, want: http.StatusBadRequest},
		{name: "dot in endpoint id", body: `{"id":"evt_1","type":"t","endpoint_id":"ep.a","correlation_id":"c","sequence":1}`, want: http.StatusBadRequest},
		{name: "missing type", body: `{"id":"evt_1","endpoint_id":"ep_test","correlation_id":"c","sequence":1}`, want: http.StatusBadRequest},
		{name: "previous at sequence", body: `{"id":"evt_1","type":"t","endpoint_id":"ep_test","correlation_id":"c","sequence":2,"previous_sequence":2}`, want: http.StatusBadRequest},
		{name: "negative previous", body: `{"id":"evt_1","type":"t","endpoint_id":"ep_test","correlation_id":"c","sequence":2,"previous_sequence":-1}`, want: http.StatusBadRequest},
		{name: "skipped before previous", body: `{"id":"evt_1","type":"t","endpoint_id":"ep_test","correlation_id":"c","sequence":5,"previous_sequence":2,"skipped_sequences":[1]}`, want: http.StatusBadRequest},
		{name: "skipped at sequence", body: `{"id":"evt_1","type":"t","endpoint_id":"ep_test","correlation_id":"c","sequence":5,"previous_sequence":2,"skipped_sequences":[5]}`, want: http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			if c.body == "" {
				body = envelope("evt_1", "order-1", 1)
			}
			secret := c.secret
			if secret == "" {
				secret = b.secret
			}
			id := c.headerID
			if id == "" {
				id = "evt_1"
			}
			sent := time.Now().Add(-c.age)
			sig, err := webhook.Sign([]string{secret}, id, sent.Unix(), body)
			require.NoError(t, err)
			if c.tamper {
				body = []byte(strings.Replace(string(body), `"n":1`, `"n":9`, 1))
			}
			req, err := http.NewRequest(http.MethodPost, b.url, strings.NewReader(string(body)))
			require.NoError(t, err)
			req.Header.Set(webhook.HeaderID, id)
			req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
			req.Header.Set(webhook.HeaderSignature, sig)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, c.want, resp.StatusCode)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		})
	}
	require.Zero(t, b.count(t, "processed_events"))

	resp, err := http.Get(b.url)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestConcurrentDuplicatesAndPermutations posts every event of several
// correlations three times, shuffled, from many goroutines, without the
// sender's retries: the drain alone must bring every event in, once, in order.
func TestConcurrentDuplicatesAndPermutations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const correlations, events, copies, workers = 4, 40, 3, 16
	type delivery struct {
		corr string
		seq  int64
	}
	var all []delivery
	for c := range correlations {
		for s := int64(1); s <= events; s++ {
			for range copies {
				all = append(all, delivery{fmt.Sprintf("corr-%d", c), s})
			}
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

	work := make(chan delivery)
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range workers {
		wg.Go(func() {
			for d := range work {
				id := fmt.Sprintf("%s_%d", d.corr, d.seq)
				code, _, err := send(b.url, b.secret, id, envelope(id, d.corr, d.seq), time.Now())
				if err != nil || (code != http.StatusOK && code != http.StatusAccepted) {
					t.Errorf("post %s: %d %v", id, code, err)
					bad.Add(1)
				}
			}
		})
	}
	for _, d := range all {
		work <- d
	}
	close(work)
	wg.Wait()
	require.Zero(t, bad.Load())

	for c := range correlations {
		corr := fmt.Sprintf("corr-%d", c)
		want := make([]string, 0, events)
		for s := 1; s <= events; s++ {
			want = append(want, fmt.Sprintf("%s_%d", corr, s))
		}
		require.Equal(t, want, b.applied(t, corr), corr)
	}
	require.Zero(t, b.count(t, "parked_events"))
}

// TestSparseSequencesApplyOnPrevious: an endpoint that gets only some of a
// correlation's sequences applies each event whose previous_sequence is the
// cursor, without waiting for the sequences between, which it never gets.
func TestSparseSequencesApplyOnPrevious(t *testing.T) {
	t.Parallel()
	b := setup(t)
	corr := "sparse"
	b.deliverAll(t, corr, "applied", chain149...)
	require.Equal(t, []string{"e1", "e4", "e9"}, b.applied(t, corr))
	require.EqualValues(t, 9, b.correlation(t, corr).LastSequence)

	code, _ := b.deliver(t, "e7", corr, 7, 4)
	require.Equal(t, http.StatusConflict, code, "a sequence below the cursor never applies")
	code, _ = b.deliver(t, "e12", corr, 12, 4)
	require.Equal(t, http.StatusConflict, code, "the cursor passed 4 at 9, which 12 does not name: it can never apply")
	require.Equal(t, []string{"e1", "e4", "e9"}, b.applied(t, corr))
	require.Zero(t, b.count(t, "parked_events"))
}

// TestGapInPreviousParksThenDrains: events whose previous_sequence the
// cursor has not reached are parked (202), and applied in their chain's
// order, by the drain, once the one they wait for is applied.
func TestGapInPreviousParksThenDrains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	corr := "sparse-gap"
	code, status := b.deliver(t, "e9", corr, 9, 4)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "parked", status)
	code, _ = b.deliver(t, "e4", corr, 4, 1)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.deliver(t, "e9", corr, 9, 4)
	require.Equal(t, http.StatusAccepted, code, "a retry of a parked event is still parked")
	code, _ = b.deliver(t, "e10", corr, 10, 4)
	require.Equal(t, http.StatusConflict, code, "another event parked behind the same previous_sequence")

	st := b.correlation(t, corr)
	require.Zero(t, st.LastSequence)
	require.Len(t, st.Parked, 2)
	require.Equal(t, receiver.ParkedEvent{EventID: "e4", Sequence: 4, PreviousSequence: 1, ParkedAt: st.Parked[0].ParkedAt}, st.Parked[0])
	require.EqualValues(t, 4, st.Parked[1].PreviousSequence)
	require.Empty(t, b.applied(t, corr))

	code, status = b.deliver(t, "e1", corr, 1, 0)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"e1", "e4", "e9"}, b.applied(t, corr))
	st = b.correlation(t, corr)
	require.EqualValues(t, 9, st.LastSequence)
	require.Empty(t, st.Parked)

	// The sender's retries of the 202s: the drain applied them.
	b.deliverAll(t, corr, "already_processed", chain149[2], chain149[1])
	require.Equal(t, []string{"e1", "e4", "e9"}, b.applied(t, corr))
}

// TestSparseDuplicates: a repeat of an applied event is already processed,
// before and after the cursor moved on; another ID at its sequence is a
// conflict.
func TestSparseDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	corr := "sparse-dup"
	b.deliverAll(t, corr, "applied", chain149[:2]...)
	b.deliverAll(t, corr, "already_processed", chain149[1])
	b.deliverAll(t, corr, "applied", chain149[2])
	b.deliverAll(t, corr, "already_processed", chain149...)
	code, _ := b.deliver(t, "e4-other", corr, 4, 1)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, []string{"e1", "e4", "e9"}, b.applied(t, corr))
}

// TestSkippedSequencesAfterPrevious: after an operator skipped 3, meant for
// this endpoint, event 5 names 1 as its previous and 3 as skipped; it
// applies on the cursor at 1.
func TestSkippedSequencesAfterPrevious(t *testing.T) {
	t.Parallel()
	b := setup(t)
	corr := "sparse-skip"
	b.deliverAll(t, corr, "applied", chain149[0])
	code, status := b.deliver(t, "e5", corr, 5, 1, 3)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	code, status = b.deliver(t, "e8", corr, 8, 5)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"e1", "e5", "e8"}, b.applied(t, corr))
}

// TestSkippedEventAppliedAfterAll: the receiver applied 2, but its answer
// was lost until the sender gave up, and an operator skipped it. 3 then
// names 1 as previous and 2 as skipped, and applies on the cursor at 2:
// nothing meant for this endpoint is missing before it. Without 2 among its
// skipped sequences it would never apply.
func TestSkippedEventAppliedAfterAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	corr := "skipped-applied"
	b.postAll(t, "e", corr, 2)
	code, _ := b.deliver(t, "e3-unnamed", corr, 3, 1)
	require.Equal(t, http.StatusConflict, code, "the cursor passed 1 at 2, which the event does not name")
	code, status := b.deliver(t, "e3", corr, 3, 1, 2)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"e1", "e2", "e3"}, b.applied(t, corr))
}

// testLogger writes the receiver's log through the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
