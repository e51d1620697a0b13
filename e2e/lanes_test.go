package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/lab/testenv"
)

// kitReceiver is the receiver kit on a real socket and a database of its
// own, with an Apply that writes each event to a ledger table in the kit's
// transaction. It answers 503 until started (the kit needs the endpoints'
// secrets, the endpoints need its URL), and can be restarted with another
// start position on the same database.
type kitReceiver struct {
	t    *testing.T
	pool *pgxpool.Pool
	srv  *httptest.Server
	kit  atomic.Pointer[receiver.Receiver]

	mu    sync.Mutex
	codes map[int]int // answers given, by status code
}

func newKitReceiver(t *testing.T) *kitReceiver {
	t.Helper()
	pool := migratedPool(t, receiver.Migrate)
	_, err := pool.Exec(context.Background(), `CREATE TABLE kit_applied (
		n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		endpoint_id text NOT NULL, correlation_id text NOT NULL, sequence bigint NOT NULL, event_id text NOT NULL)`)
	require.NoError(t, err)
	r := &kitReceiver{t: t, pool: pool, codes: map[int]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		kit := r.kit.Load()
		if kit == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		sw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		kit.ServeHTTP(sw, req)
		r.mu.Lock()
		r.codes[sw.code]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

func (r *kitReceiver) URL() string { return r.srv.URL + "/webhook" }

// start (or restart) serves the kit with the endpoints' secrets, starting
// never-seen lanes at start.
func (r *kitReceiver) start(start receiver.StartPosition, secrets ...string) {
	r.t.Helper()
	kit, err := receiver.New(receiver.Config{Secrets: secrets, StartPosition: start}, receiver.Deps{
		Pool: r.pool, Logger: testenv.Logger(r.t),
		Apply: func(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO kit_applied (endpoint_id, correlation_id, sequence, event_id) VALUES ($1, $2, $3, $4)`,
				ev.EndpointID, ev.CorrelationID, ev.Sequence, ev.ID)
			return err
		},
	})
	require.NoError(r.t, err)
	r.kit.Store(kit)
}

// applied is what the lane (endpoint, corr) applied, in the order applied.
func (r *kitReceiver) applied(endpoint, corr string) []int64 {
	r.t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT sequence FROM kit_applied WHERE endpoint_id = $1 AND correlation_id = $2 ORDER BY n`, endpoint, corr)
	require.NoError(r.t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(r.t, err)
	return seqs
}

// lane is the kit's view of the lane.
func (r *kitReceiver) lane(endpoint, corr string) receiver.CorrelationState {
	r.t.Helper()
	st, err := r.kit.Load().Correlation(context.Background(), endpoint, corr)
	require.NoError(r.t, err)
	return st
}

func (r *kitReceiver) answered(code int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.codes[code]
}

// waitDelivered waits for the event's delivery to endpointID, and fails at
// once when it is dead-lettered instead.
func (b *bundle) waitDelivered(id, endpointID string) {
	b.t.Helper()
	waitFor(b.t, 60*time.Second, id+" delivered to "+endpointID, func() bool {
		d, ok := b.fanned(id).delivery(endpointID)
		if ok && d.State == contract.StateDeadLettered {
			b.t.Fatalf("%s dead-lettered at %s: %s", id, endpointID, b.deadLetter(id).Reason)
		}
		return ok && d.State == contract.StateDelivered
	})
}

// openDeadLetters counts the open dead letters of corr.
func (b *bundle) openDeadLetters(corr string) int {
	b.t.Helper()
	var page deadLetterPage
	require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters?correlation_id="+corr, nil, &page))
	n := 0
	for _, dl := range page.Items {
		if dl.Status == store.DeadLetterOpen {
			n++
		}
	}
	return n
}

// TestTwoEndpointsShareOneReceiverDatabase: endpoints A (x.*) and B (y.*),
// both also subscribed to both.*, point at one kit receiver and its one
// database. One correlation's events alternate between them, and one goes
// to both. Each lane applies its own stream in order; nothing is refused,
// nothing dead-lettered. Before the envelope named its endpoint, the kit
// kept one cursor per correlation: after A applied 1, B's first event
// (previous_sequence 0) was a 409 and was dead-lettered for good.
func TestTwoEndpointsShareOneReceiverDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	rcv := newKitReceiver(t)
	epA := b.createEndpointWith(map[string]any{"url": rcv.URL(), "event_types": []string{"x.*", "both.*"}})
	epB := b.createEndpointWith(map[string]any{"url": rcv.URL(), "event_types": []string{"y.*", "both.*"}})
	rcv.start(receiver.StartFromBeginning, epA.Secret, epB.Secret)

	corr := b.id("acct")
	types := []string{"x.opened", "y.opened", "x.credited", "y.credited", "both.frozen", "x.closed", "y.closed"}
	for i, typ := range types {
		b.publish(fmt.Sprintf("%s-%d", corr, i+1), corr, int64(i+1), typ)
	}
	for i, typ := range types {
		id := fmt.Sprintf("%s-%d", corr, i+1)
		if typ[0] != 'y' {
			b.waitDelivered(id, epA.ID)
		}
		if typ[0] != 'x' {
			b.waitDelivered(id, epB.ID)
		}
	}
	require.Equal(t, []int64{1, 3, 5, 6}, rcv.applied(epA.ID, corr), "A's stream, in order")
	require.Equal(t, []int64{2, 4, 5, 7}, rcv.applied(epB.ID, corr), "B's stream, in order; 5 applied in both lanes")
	require.EqualValues(t, 6, rcv.lane(epA.ID, corr).LastSequence)
	require.EqualValues(t, 7, rcv.lane(epB.ID, corr).LastSequence)
	require.Zero(t, rcv.answered(http.StatusConflict))
	require.Zero(t, b.openDeadLetters(corr))
}

// TestRePointingAnEndpointAtAFreshReceiver: an endpoint delivers 1-3 to one
// kit receiver, then is re-pointed (PATCH url) at a fresh one, with its own
// empty database. Its next envelope says previous_sequence 3, which the
// fresh receiver never applied.
//
//   - Started with StartMidStream, the fresh receiver takes the lane up at
//     4 and applies 4 and 5 in order: nothing parks, nothing is
//     dead-lettered.
//   - Started with the default StartFromBeginning, it parks the lane's
//     first event (202: it waits for 5, which went elsewhere) on every
//     attempt, and the event is dead-lettered when its recovery window
//     ends; so would every lane with history be. Restarting that receiver
//     with StartMidStream and replaying the dead letter delivers it, and
//     the lane goes on.
func TestRePointingAnEndpointAtAFreshReceiver(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 6 * time.Second})
	old := newKitReceiver(t)
	ep := b.createEndpoint(old.URL())
	old.start(receiver.StartFromBeginning, ep.Secret)
	corr := b.id("acct")
	deliver := func(seq int64) string {
		t.Helper()
		id := fmt.Sprintf("%s-%d", corr, seq)
		code, _ := b.postEvent(id, corr, seq, ep.ID, map[string]any{"seq": seq})
		require.Equal(t, http.StatusAccepted, code)
		return id
	}
	repoint := func(url string) {
		t.Helper()
		require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"url": url}, nil))
	}
	for seq := int64(1); seq <= 3; seq++ {
		b.waitDelivered(deliver(seq), ep.ID)
	}
	require.Equal(t, []int64{1, 2, 3}, old.applied(ep.ID, corr))

	fresh := newKitReceiver(t)
	fresh.start(receiver.StartMidStream, ep.Secret)
	repoint(fresh.URL())
	for seq := int64(4); seq <= 5; seq++ {
		b.waitDelivered(deliver(seq), ep.ID)
	}
	require.Equal(t, []int64{4, 5}, fresh.applied(ep.ID, corr), "taken up mid-stream, in order")
	require.Equal(t, []int64{1, 2, 3}, old.applied(ep.ID, corr))
	require.Zero(t, fresh.answered(http.StatusAccepted), "nothing parked")
	require.Zero(t, b.openDeadLetters(corr))

	strict := newKitReceiver(t)
	strict.start(receiver.StartFromBeginning, ep.Secret)
	repoint(strict.URL())
	id6 := deliver(6)
	b.waitState(id6, contract.StateDeadLettered, 60*time.Second)
	attempts := b.eventState(id6).attempts()
	require.NotEmpty(t, attempts)
	for _, a := range attempts {
		require.NotNil(t, a.StatusCode)
		require.EqualValues(t, http.StatusAccepted, *a.StatusCode, "parked on every attempt")
	}
	lane := strict.lane(ep.ID, corr)
	require.Zero(t, lane.LastSequence)
	require.Len(t, lane.Parked, 1)
	require.EqualValues(t, 6, lane.Parked[0].Sequence)
	require.EqualValues(t, 5, lane.Parked[0].PreviousSequence, "waiting for an event the fresh receiver will never get")
	require.Empty(t, strict.applied(ep.ID, corr))
	t.Logf("FIGURE re-pointed at a StartFromBeginning receiver: %s dead-lettered after %d attempts, each answered 202", id6, len(attempts))

	strict.start(receiver.StartMidStream, ep.Secret)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id6+"/replay", nil, nil))
	b.waitDelivery(id6, ep.ID, contract.StateDelivered, 60*time.Second)
	b.waitDelivered(deliver(7), ep.ID)
	require.Equal(t, []int64{6, 7}, strict.applied(ep.ID, corr))
	require.Empty(t, strict.lane(ep.ID, corr).Parked)
	require.Zero(t, b.openDeadLetters(corr))
}
