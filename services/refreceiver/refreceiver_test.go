package refreceiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/hookflow/hookflow/kit/localpg"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/receiver/otelreceiver"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/spantest"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/services/refreceiver"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type bundle struct {
	pool   *pgxpool.Pool
	server *refreceiver.Server
	secret string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupAt(t, receiver.StartFromBeginning)
}

// setupAt is setup with the kit starting never-seen lanes at start.
func setupAt(t *testing.T, start receiver.StartPosition) *bundle {
	t.Helper()
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(testenv.NewDatabase(t))
	require.NoError(t, err)
	pcfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, refreceiver.Migrate(ctx, pool))
	require.NoError(t, refreceiver.Migrate(ctx, pool), "migrating twice is a no-op")

	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	server, err := refreceiver.New(refreceiver.Config{Secrets: []string{secret}, StartPosition: start}, refreceiver.Deps{Pool: pool, Logger: testenv.Logger(t)})
	require.NoError(t, err)
	return &bundle{pool: pool, server: server, secret: secret}
}

// body is event seq of a correlation whose every sequence comes to this
// receiver (previous_sequence seq-1).
func body(id, correlationID string, seq int64, amount string) []byte {
	return linkedBody(id, correlationID, seq, seq-1, nil, amount)
}

// testEndpoint is the endpoint the tests' events are sent to, unless one
// says otherwise.
const testEndpoint = "ep_ref"

// linkedBody is event seq of correlationID following previous, with the
// sequences skipped in between, sent to testEndpoint.
func linkedBody(id, correlationID string, seq, previous int64, skipped []int64, amount string) []byte {
	return linkedBodyAt(testEndpoint, id, correlationID, seq, previous, skipped, amount)
}

// linkedBodyAt is linkedBody sent to endpoint.
func linkedBodyAt(endpoint, id, correlationID string, seq, previous int64, skipped []int64, amount string) []byte {
	b, _ := json.Marshal(receiver.Event{
		ID: id, Type: "ledger.credit", Timestamp: time.Now().UTC().Truncate(time.Second),
		EndpointID: endpoint, CorrelationID: correlationID, Sequence: seq, PreviousSequence: previous, SkippedSequences: skipped,
		Data: json.RawMessage(`{"amount":` + amount + `}`),
	})
	return b
}

// post delivers a signed body to baseURL/webhook and returns the status code.
func post(client *http.Client, baseURL, secret, id string, b []byte) (int, error) {
	now := time.Now().Unix()
	sig, err := webhook.Sign([]string{secret}, id, now, b)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+"/webhook", strings.NewReader(string(b)))
	if err != nil {
		return 0, err
	}
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now, 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func getCorrelation(t *testing.T, baseURL, id string) (int, refreceiver.Correlation) {
	t.Helper()
	return getLane(t, baseURL, id, "")
}

// getLane is GET /correlations/{id}?endpoint_id=endpoint (no endpoint_id
// when empty).
func getLane(t *testing.T, baseURL, id, endpoint string) (int, refreceiver.Correlation) {
	t.Helper()
	u := baseURL + "/correlations/" + id
	if endpoint != "" {
		u += "?endpoint_id=" + endpoint
	}
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	var v refreceiver.Correlation
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	}
	return resp.StatusCode, v
}

// applicationOrder returns the sequences of correlationID's ledger entries in
// the order they were applied.
func applicationOrder(t *testing.T, pool *pgxpool.Pool, correlationID string) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT sequence FROM ledger_entries WHERE correlation_id = $1 ORDER BY entry_no`, correlationID)
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return seqs
}

// TestConcurrentDuplicatesAndPermutations: 50 goroutines post every event of
// 10 correlations (sequences 1..200) twice, in random order, over a real
// socket. Each event must be applied once, in sequence order.
func TestConcurrentDuplicatesAndPermutations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)

	const correlations, events, copies, workers = 10, 200, 2, 50
	type delivery struct {
		corr string
		seq  int64
	}
	var all []delivery
	for c := range correlations {
		for s := int64(1); s <= events; s++ {
			for range copies {
				all = append(all, delivery{fmt.Sprintf("acct-%d", c), s})
			}
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 2 * time.Minute}
	var statuses sync.Map // status code → *atomic.Int64
	work := make(chan delivery)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for d := range work {
				id := fmt.Sprintf("%s_%d", d.corr, d.seq)
				code, err := post(client, srv.URL, b.secret, id, body(id, d.corr, d.seq, strconv.FormatInt(d.seq, 10)))
				if err != nil {
					t.Errorf("post %s: %v", id, err)
					continue
				}
				n, _ := statuses.LoadOrStore(code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		})
	}
	for _, d := range all {
		work <- d
	}
	close(work)
	wg.Wait()
	statuses.Range(func(code, n any) bool {
		t.Logf("status %d: %d answers", code, n.(*atomic.Int64).Load())
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code)
		return true
	})

	// A parked event is the sender's to re-send (202 means "retry later"),
	// as hookflow does; under heavy load a drain may give up on its time
	// limit and leave parked events for exactly that retry. Re-send every
	// event of an unfinished correlation in sequence order, as a sender
	// retrying its 202s would, until each correlation is complete.
	for pass := 0; pass < 3; pass++ {
		for c := range correlations {
			corr := fmt.Sprintf("acct-%d", c)
			if _, v := getCorrelation(t, srv.URL, corr); v.LastSequence == events {
				continue
			}
			for s := int64(1); s <= events; s++ {
				id := fmt.Sprintf("%s_%d", corr, s)
				code, err := post(client, srv.URL, b.secret, id, body(id, corr, s, strconv.FormatInt(s, 10)))
				require.NoError(t, err)
				require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code)
			}
		}
	}

	wantOrder := make([]int64, events)
	for i := range wantOrder {
		wantOrder[i] = int64(i + 1)
	}
	for c := range correlations {
		corr := fmt.Sprintf("acct-%d", c)
		code, v := getCorrelation(t, srv.URL, corr)
		require.Equal(t, http.StatusOK, code)
		require.EqualValues(t, events, v.LastSequence, corr)
		require.Len(t, v.Applied, events, corr)
		for i, id := range v.Applied {
			require.Equal(t, fmt.Sprintf("%s_%d", corr, i+1), id)
		}
		require.Equal(t, json.Number(strconv.Itoa(events*(events+1)/2)), v.Balance, corr)
		require.Empty(t, v.Parked, corr)
		require.Equal(t, wantOrder, applicationOrder(t, b.pool, corr), "applied in sequence order")
	}
}

// TestCrashBetweenCommitAndResponse: the receiver commits, then the
// connection dies before the answer. The sender's retry must be answered
// 200 already processed, and the ledger must show one application.
func TestCrashBetweenCommitAndResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var crash atomic.Bool
	crash.Store(true)
	h := b.server.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && crash.CompareAndSwap(true, false) {
			w = abortingWriter{w}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	b1 := body("evt_1", "acct-1", 1, "42.5")
	_, err := post(http.DefaultClient, srv.URL, b.secret, "evt_1", b1)
	require.Error(t, err, "the answer is lost")

	sig, err := webhook.Sign([]string{b.secret}, "evt_1", time.Now().Unix(), b1)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhook", strings.NewReader(string(b1)))
	require.NoError(t, err)
	req.Header.Set(webhook.HeaderID, "evt_1")
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var answer struct{ Status string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.Equal(t, "already_processed", answer.Status)

	code, v := getCorrelation(t, srv.URL, "acct-1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"evt_1"}, v.Applied)
	require.Equal(t, json.Number("42.5"), v.Balance)
	require.Equal(t, []int64{1}, applicationOrder(t, b.pool, "acct-1"))
}

type abortingWriter struct{ http.ResponseWriter }

func (abortingWriter) WriteHeader(int)           { panic(http.ErrAbortHandler) }
func (abortingWriter) Write([]byte) (int, error) { panic(http.ErrAbortHandler) }

func TestAmountMustBeANumber(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)

	code, err := post(http.DefaultClient, srv.URL, b.secret, "evt_1", body("evt_1", "acct-1", 1, `"12"`))
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, code, "a string amount is refused for good")
	code, _ = getCorrelation(t, srv.URL, "acct-1")
	require.Equal(t, http.StatusNotFound, code, "nothing was stored")
}

func TestParkedShowsInCorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)

	code, err := post(http.DefaultClient, srv.URL, b.secret, "evt_2", body("evt_2", "acct-1", 2, "5"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	code, v := getCorrelation(t, srv.URL, "acct-1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, refreceiver.Correlation{EndpointID: testEndpoint, CorrelationID: "acct-1", Applied: []string{}, Balance: "0", Parked: []int64{2}}, v)
}

// TestSparseLedger: the receiver gets only some sequences of a correlation,
// each naming the one before it. The ledger applies them in that chain's
// order: a gap in it waits (202), duplicates change nothing, and a skipped
// sequence is not waited for.
func TestSparseLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)
	deliver := func(id string, seq, previous int64, skipped []int64, amount string) int {
		t.Helper()
		code, err := post(http.DefaultClient, srv.URL, b.secret, id, linkedBody(id, "acct-1", seq, previous, skipped, amount))
		require.NoError(t, err)
		return code
	}

	require.Equal(t, http.StatusOK, deliver("e1", 1, 0, nil, "10"))
	require.Equal(t, http.StatusAccepted, deliver("e9", 9, 4, nil, "1000"), "4 is not applied yet")
	_, v := getCorrelation(t, srv.URL, "acct-1")
	require.Equal(t, []int64{9}, v.Parked)
	require.Equal(t, json.Number("10"), v.Balance)

	require.Equal(t, http.StatusOK, deliver("e4", 4, 1, nil, "100"))
	require.Equal(t, http.StatusOK, deliver("e9", 9, 4, nil, "1000"), "the sender's retry: the drain applied it")
	require.Equal(t, http.StatusOK, deliver("e4", 4, 1, nil, "100"), "a duplicate")
	require.Equal(t, http.StatusOK, deliver("e12", 12, 9, []int64{10}, "10000"), "10 was skipped: not waited for")

	_, v = getCorrelation(t, srv.URL, "acct-1")
	require.Equal(t, refreceiver.Correlation{EndpointID: testEndpoint, CorrelationID: "acct-1", LastSequence: 12, Applied: []string{"e1", "e4", "e9", "e12"},
		Balance: "11110", Parked: []int64{}}, v)
	require.Equal(t, []int64{1, 4, 9, 12}, applicationOrder(t, b.pool, "acct-1"))
}

func TestRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	port, err := localpg.FreePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.server.Run(ctx, addr) }()

	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond)
	code, err := post(http.DefaultClient, "http://"+addr, b.secret, "evt_1", body("evt_1", "acct-1", 1, "1"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestRunRefusesPendingMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	server, err := refreceiver.New(refreceiver.Config{Secrets: []string{secret}}, refreceiver.Deps{Pool: pool, Logger: testenv.Logger(t)})
	require.NoError(t, err)

	err = server.Run(ctx, "127.0.0.1:0")
	require.ErrorIs(t, err, receiver.ErrMigrationsPending)

	require.NoError(t, receiver.Migrate(ctx, pool))
	err = server.Run(ctx, "127.0.0.1:0")
	require.ErrorIs(t, err, refreceiver.ErrMigrationsPending, "the ledger's own migrations are checked too")
}

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRunPrunesProcessedEvents: with a retention, Run prunes the kit's
// processed_events below each cursor on its schedule, logs what it pruned,
// and a retry of a pruned event is still answered without applying it.
func TestRunPrunesProcessedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var logs lockedBuffer
	server, err := refreceiver.New(refreceiver.Config{Secrets: []string{b.secret}, Retention: 24 * time.Hour, PruneInterval: 100 * time.Millisecond},
		refreceiver.Deps{Pool: b.pool, Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))})
	require.NoError(t, err)
	port, err := localpg.FreePort()
	require.NoError(t, err)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- server.Run(runCtx, base[len("http://"):]) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond)

	processed := func() []string {
		rows, err := b.pool.Query(ctx, `SELECT event_id FROM processed_events ORDER BY sequence`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	for seq := int64(1); seq <= 3; seq++ {
		id := fmt.Sprintf("evt_%d", seq)
		code, err := post(http.DefaultClient, base, b.secret, id, body(id, "acct-1", seq, "10"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, processed(), "recent rows are kept")

	_, err = b.pool.Exec(ctx, `UPDATE processed_events SET processed_at = now() - interval '2 days'`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(processed()) == 1 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, []string{"evt_3"}, processed(), "the cursor's own row stays")
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `msg="pruned processed events" count=2`)
	}, 5*time.Second, 20*time.Millisecond)

	code, err := post(http.DefaultClient, base, b.secret, "evt_1", body("evt_1", "acct-1", 1, "10"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "a retry of a pruned event")
	code, v := getCorrelation(t, base, "acct-1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, v.Applied)
	require.Equal(t, json.Number("30"), v.Balance, "applied once")
	require.Equal(t, 1, strings.Count(logs.String(), "pruned processed events"), "one line per run that pruned something")
}

func TestNewRejectsNegativeRetention(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	pool, err := pgxpool.New(context.Background(), "postgres://unused@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = refreceiver.New(refreceiver.Config{Secrets: []string{secret}, Retention: -time.Hour}, refreceiver.Deps{Pool: pool})
	require.Error(t, err)
}

// TestTwoEndpointsOneLedger: endpoints A and B send their own events of one
// correlation to one reference receiver, and one event (3) to both. Each
// keeps its own ledger in its own order; asked without an endpoint, the
// receiver names both.
func TestTwoEndpointsOneLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)
	for _, d := range []struct {
		endpoint, id  string
		seq, previous int64
		amount        string
	}{
		{"ep_a", "e1", 1, 0, "1"}, {"ep_b", "e2", 2, 0, "10"}, {"ep_a", "e3", 3, 1, "100"}, {"ep_b", "e3", 3, 2, "100"},
	} {
		code, err := post(http.DefaultClient, srv.URL, b.secret, d.id, linkedBodyAt(d.endpoint, d.id, "acct-1", d.seq, d.previous, nil, d.amount))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%s at %s", d.id, d.endpoint)
	}
	code, a := getLane(t, srv.URL, "acct-1", "ep_a")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, refreceiver.Correlation{EndpointID: "ep_a", CorrelationID: "acct-1", LastSequence: 3, Applied: []string{"e1", "e3"}, Balance: "101", Parked: []int64{}}, a)
	code, bl := getLane(t, srv.URL, "acct-1", "ep_b")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, refreceiver.Correlation{EndpointID: "ep_b", CorrelationID: "acct-1", LastSequence: 3, Applied: []string{"e2", "e3"}, Balance: "110", Parked: []int64{}}, bl)
	code, _ = getCorrelation(t, srv.URL, "acct-1")
	require.Equal(t, http.StatusBadRequest, code, "two lanes: the endpoint must be named")
	code, _ = getLane(t, srv.URL, "acct-1", "ep_c")
	require.Equal(t, http.StatusNotFound, code)
}

// TestStartMidStream: a reference receiver started mid-stream (an endpoint
// re-pointed at it after 1-4 went elsewhere) applies the lane's first event
// whatever its previous_sequence; one started from the beginning parks it.
func TestStartMidStream(t *testing.T) {
	t.Parallel()
	for start, want := range map[receiver.StartPosition]int{receiver.StartMidStream: http.StatusOK, receiver.StartFromBeginning: http.StatusAccepted} {
		b := setupAt(t, start)
		srv := httptest.NewServer(b.server.Handler())
		t.Cleanup(srv.Close)
		code, err := post(http.DefaultClient, srv.URL, b.secret, "e5", linkedBody("e5", "acct-1", 5, 4, nil, "5"))
		require.NoError(t, err)
		require.Equal(t, want, code, start.String())
	}
}

// TestDeliveriesAreTraced: the reference receiver (`hookflow receiver`)
// makes the kit's span of each delivery through OpenTelemetry's globals,
// which hookflow's tracing installs when it is on, continuing the sender's
// traceparent. Not parallel: it installs the globals.
func TestDeliveriesAreTraced(t *testing.T) {
	_, rec := spantest.Install(t)
	b := setup(t)
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		return http.DefaultTransport.RoundTrip(r)
	})}
	code, err := post(client, srv.URL, b.secret, "evt_traced", body("evt_traced", "acct-1", 1, "1"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == otelreceiver.SpanName && spantest.Attrs(s)["hookflow.event_id"] == "evt_traced" {
			spans = append(spans, s)
		}
	}
	require.Len(t, spans, 1)
	require.Equal(t, traceID, spans[0].SpanContext().TraceID().String(), "the delivery joins the sender's trace")
	require.Equal(t, "applied", spantest.Attrs(spans[0])["hookflow.receiver.outcome"])
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
