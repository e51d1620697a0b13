package receiver_test

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/webhook"
)

// deliverTo posts the event (id, correlation, seq, previous) as sent to
// endpoint and requires the HTTP exchange to succeed.
func (b *bundle) deliverTo(t *testing.T, endpoint, id, correlationID string, seq, previous int64) (int, string) {
	t.Helper()
	body := eventBody(receiver.Event{EndpointID: endpoint, ID: id, CorrelationID: correlationID, Sequence: seq, PreviousSequence: previous})
	code, status, err := send(b.url, b.secret, id, body, time.Now())
	require.NoError(t, err)
	return code, status
}

// TestTwoEndpointsKeepTheirOwnLanes: endpoints A and B of one correlation
// point at one receiver database. A gets 1, 3 and 5, B gets 2, 4 and 5 (one
// event fanned out to both). Each lane's first event names previous 0, and
// each applies on its own cursor; the shared event is applied once per lane;
// a gap in A parks A alone. With one cursor per correlation, B's first event
// was a 409.
func TestTwoEndpointsKeepTheirOwnLanes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, d := range []struct {
		endpoint, id  string
		seq, previous int64
	}{
		{"ep_a", "e1", 1, 0}, {"ep_b", "e2", 2, 0}, {"ep_a", "e3", 3, 1}, {"ep_b", "e4", 4, 2},
		{"ep_a", "e5", 5, 3}, {"ep_b", "e5", 5, 4},
	} {
		code, status := b.deliverTo(t, d.endpoint, d.id, "order-1", d.seq, d.previous)
		require.Equal(t, http.StatusOK, code, "%s at %s", d.id, d.endpoint)
		require.Equal(t, "applied", status, "%s at %s", d.id, d.endpoint)
	}
	require.Equal(t, []string{"e1", "e2", "e3", "e4", "e5", "e5"}, b.applied(t, "order-1"))

	code, status := b.deliverTo(t, "ep_b", "e5", "order-1", 5, 4)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "already_processed", status, "dedup is per lane: a retry in B is still a retry")

	// A's 8 waits for its 7; B moves on meanwhile.
	code, _ = b.deliverTo(t, "ep_a", "e8", "order-1", 8, 7)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.deliverTo(t, "ep_b", "e6", "order-1", 6, 5)
	require.Equal(t, http.StatusOK, code)
	code, _ = b.deliverTo(t, "ep_a", "e7", "order-1", 7, 5)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"e1", "e2", "e3", "e4", "e5", "e5", "e6", "e7", "e8"}, b.applied(t, "order-1"))

	a, err := b.rc.Correlation(ctx, "ep_a", "order-1")
	require.NoError(t, err)
	require.EqualValues(t, 8, a.LastSequence)
	require.Empty(t, a.Parked)
	bl, err := b.rc.Correlation(ctx, "ep_b", "order-1")
	require.NoError(t, err)
	require.EqualValues(t, 6, bl.LastSequence)
	_, err = b.rc.Correlation(ctx, "ep_c", "order-1")
	require.ErrorIs(t, err, receiver.ErrNotFound)
	eps, err := b.rc.Endpoints(ctx, "order-1")
	require.NoError(t, err)
	require.Equal(t, []string{"ep_a", "ep_b"}, eps)
}

// TestStartFromBeginningParksALaneSeenMidStream: by default a lane the
// receiver never saw must start at previous_sequence 0. An endpoint
// re-pointed here after delivering 1-4 elsewhere sends 5 (previous 4): it
// parks, and would until the sender gives up on it.
func TestStartFromBeginningParksALaneSeenMidStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 2 {
		code, status := b.deliverTo(t, "ep_a", "e5", "order-1", 5, 4)
		require.Equal(t, http.StatusAccepted, code)
		require.Equal(t, "parked", status)
	}
	require.Empty(t, b.applied(t, "order-1"))

	// The way out: the receiver restarted with StartMidStream applies the
	// sender's next retry (or an operator's replay), since nothing of the
	// lane was applied yet.
	mid, err := receiver.New(receiver.Config{Secrets: []string{b.secret}, StartPosition: receiver.StartMidStream}, receiver.Deps{
		Pool: b.pool, Logger: testLogger(t), Apply: b.apply,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(mid)
	t.Cleanup(srv.Close)
	body := eventBody(receiver.Event{EndpointID: "ep_a", ID: "e5", CorrelationID: "order-1", Sequence: 5, PreviousSequence: 4})
	code, status, err := send(srv.URL, b.secret, "e5", body, time.Now())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	require.Equal(t, []string{"e5"}, b.applied(t, "order-1"))
	require.Zero(t, b.count(t, "parked_events"), "its parked copy went with the apply")
}

// TestStartMidStreamTakesUpANeverSeenLane: with StartMidStream the first
// event of a never-seen lane applies whatever its previous_sequence, and the
// lane goes on from there: retries are duplicates, the next event applies on
// it, a later gap still parks, and an event behind the start is refused.
func TestStartMidStreamTakesUpANeverSeenLane(t *testing.T) {
	t.Parallel()
	b := setupAt(t, receiver.StartMidStream)
	ctx := context.Background()
	code, status := b.deliverTo(t, "ep_a", "e5", "order-1", 5, 4)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "applied", status)
	code, status = b.deliverTo(t, "ep_a", "e5", "order-1", 5, 4)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "already_processed", status)

	code, _ = b.deliverTo(t, "ep_a", "e9", "order-1", 9, 7)
	require.Equal(t, http.StatusAccepted, code, "a seen lane's gap parks, mid-stream or not")
	code, _ = b.deliverTo(t, "ep_a", "e7", "order-1", 7, 5)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"e5", "e7", "e9"}, b.applied(t, "order-1"), "9 drained behind 7")

	code, _ = b.deliverTo(t, "ep_a", "e3", "order-1", 3, 2)
	require.Equal(t, http.StatusConflict, code, "before the lane's start: it can never apply")

	// Another endpoint's lane of the same correlation starts on its own.
	code, _ = b.deliverTo(t, "ep_b", "e8", "order-1", 8, 6)
	require.Equal(t, http.StatusOK, code)
	st, err := b.rc.Correlation(ctx, "ep_b", "order-1")
	require.NoError(t, err)
	require.EqualValues(t, 8, st.LastSequence)
}

func TestParseStartPosition(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]receiver.StartPosition{"": receiver.StartFromBeginning, "beginning": receiver.StartFromBeginning, "mid-stream": receiver.StartMidStream} {
		got, err := receiver.ParseStartPosition(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		if in != "" {
			require.Equal(t, in, got.String())
		}
	}
	_, err := receiver.ParseStartPosition("end")
	require.Error(t, err)
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	_, err = receiver.New(receiver.Config{Secrets: []string{secret}, StartPosition: 7}, receiver.Deps{})
	require.ErrorContains(t, err, "start position")
}

// TestMigrationFromOneLanePerCorrelation applies 001-003, writes rows in
// that layout, then lets Migrate apply the rest: the old rows stay under
// the empty endpoint_id (no envelope names it), parked rows go, and lanes of real
// endpoints start afresh beside them.
func TestMigrationFromOneLanePerCorrelation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	_, err := pool.Exec(ctx, `CREATE TABLE receiver_schema_migrations (
		version bigint PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for i, name := range []string{"001_create_receiver_tables", "002_prune_processed_events", "003_parked_events_previous_sequence"} {
		up, err := fs.ReadFile(receiver.Migrations(), name+".up.sql")
		require.NoError(t, err)
		_, err = pool.Exec(ctx, string(up))
		require.NoError(t, err, name)
		_, err = pool.Exec(ctx, `INSERT INTO receiver_schema_migrations (version, name) VALUES ($1, $2)`, i+1, name)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO processed_events (event_id, correlation_id, sequence) VALUES ('old1', 'order-1', 1);
		INSERT INTO correlation_cursors (correlation_id, last_sequence) VALUES ('order-1', 1);
		INSERT INTO parked_events (event_id, correlation_id, sequence, previous_sequence, body, headers)
			VALUES ('old3', 'order-1', 3, 2, '\x7b7d', '{}')`)
	require.NoError(t, err)
	require.ErrorIs(t, receiver.CheckMigrations(ctx, pool), receiver.ErrMigrationsPending)

	require.NoError(t, receiver.Migrate(ctx, pool))
	require.NoError(t, receiver.CheckMigrations(ctx, pool))
	var endpoint string
	var last int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT endpoint_id, last_sequence FROM correlation_cursors WHERE correlation_id = 'order-1'`).Scan(&endpoint, &last))
	require.Equal(t, "", endpoint)
	require.EqualValues(t, 1, last)
	var parked int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM parked_events`).Scan(&parked))
	require.Zero(t, parked)

	_, err = pool.Exec(ctx, `INSERT INTO correlation_cursors (endpoint_id, correlation_id) VALUES ('ep_a', 'order-1');
		INSERT INTO processed_events (endpoint_id, event_id, correlation_id, sequence) VALUES ('ep_a', 'old1', 'order-1', 1)`)
	require.NoError(t, err, "a real endpoint's lane of the same correlation and event stands beside the old one")
}
