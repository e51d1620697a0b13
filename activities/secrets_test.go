package activities_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// capturingStarter keeps the events the API accepted, to hand them to
// Deliver as the workflow would.
type capturingStarter struct {
	mu     sync.Mutex
	events []store.Event
}

func (s *capturingStarter) Start(_ context.Context, ev store.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return nil
}

func (s *capturingStarter) SignalDeadLetter(context.Context, store.DeadLetter, string, any) (bool, error) {
	return false, nil
}

func (s *capturingStarter) Resync(context.Context, string, string) error { return nil }

func (s *capturingStarter) SkipDeletedDeadLetters(context.Context, string, string, string) (int, error) {
	return 0, nil
}

// handOvers records what Deliver hands over to the sequencer.
type handOvers struct {
	mu    sync.Mutex
	dones []contract.Done
}

func (h *handOvers) HandOver(_ context.Context, _, _ string, d contract.Done) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dones = append(h.dones, d)
	return nil
}

type healthySignaler struct{}

func (healthySignaler) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("no sequencer here")
}
func (healthySignaler) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

// TestSecretsNeverLogged runs an endpoint's life through the real API and
// its deliveries through the real Deliver activity against a real receiver,
// with every log record of the API, the activities and the Temporal SDK
// captured at debug level; no secret and no API token may appear in them.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	pool := testenv.MigratedPool(t)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)

	// The receiver verifies with whatever secrets the test has learnt, and
	// answers what the test tells it to.
	var (
		mu       sync.Mutex
		secrets  []string
		verified atomic.Int64
		answer   atomic.Int64
	)
	answer.Store(http.StatusOK)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		held := append([]string(nil), secrets...)
		mu.Unlock()
		if err := webhook.VerifyHeader(held, r.Header, body, time.Now(), 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if len(strings.Split(r.Header.Get(webhook.HeaderSignature), " ")) != len(held) {
			http.Error(w, "expected one signature per live secret", http.StatusBadRequest)
			return
		}
		verified.Add(1)
		code := int(answer.Load())
		w.WriteHeader(code)
		fmt.Fprintf(w, "answered %d", code)
	}))
	t.Cleanup(receiver.Close)

	token := "tok_secret_" + base64.RawURLEncoding.EncodeToString([]byte(time.Now().String()))
	starter := &capturingStarter{}
	srv, err := api.New(api.RouterConfig{Token: token}, api.RouterDeps{
		Store: st, Pool: pool, Starter: starter, Temporal: healthySignaler{}, Logger: logger, Transports: devTransports(t),
	})
	require.NoError(t, err)
	apiSrv := httptest.NewServer(srv.Handler())
	t.Cleanup(apiSrv.Close)
	call := func(method, path, body string, want int) map[string]any {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, apiSrv.URL+path, r)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		require.Equal(t, want, resp.StatusCode, string(raw))
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out))
		return out
	}

	ep := call(http.MethodPost, "/v1/endpoints", fmt.Sprintf(`{"url":%q}`, receiver.URL+"/hooks"), http.StatusCreated)
	epID := ep["id"].(string)
	mu.Lock()
	secrets = append(secrets, ep["secret"].(string))
	mu.Unlock()
	rotated := call(http.MethodPost, "/v1/endpoints/"+epID+"/rotate-secret", "", http.StatusOK)
	mu.Lock()
	secrets = append(secrets, rotated["secret"].(string))
	mu.Unlock()
	require.NotEqual(t, secrets[0], secrets[1])
	for seq := 1; seq <= 2; seq++ {
		call(http.MethodPost, "/v1/events", fmt.Sprintf(
			`{"id":"evt_%d","correlation_id":"order-1","sequence":%d,"endpoint_id":%q,"type":"order.updated","data":{"n":%d}}`,
			seq, seq, epID, seq), http.StatusAccepted)
	}
	starter.mu.Lock()
	accepted := append([]store.Event(nil), starter.events...)
	starter.mu.Unlock()
	require.Len(t, accepted, 2)

	seq := &handOvers{}
	acts, err := activities.New(activities.Deps{Store: st, Sequencer: seq, Transports: devTransports(t), Logger: logger})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(logger))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	input := func(ev store.Event) contract.DeliverInput {
		return contract.DeliverInput{
			Tenant:  store.DefaultTenant,
			EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ev.Endpoints[0],
			Type: ev.Type, Timestamp: ev.AcceptedAt, Data: ev.Data, Timeout: 10 * time.Second,
		}
	}

	// Event 1: the receiver fails once, then takes it.
	answer.Store(http.StatusInternalServerError)
	_, err = env.ExecuteActivity(acts.Deliver, input(accepted[0]))
	require.Error(t, err)
	answer.Store(http.StatusOK)
	val, err := env.ExecuteActivity(acts.Deliver, input(accepted[0]))
	require.NoError(t, err)
	var res contract.DeliverResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, http.StatusOK, res.StatusCode)

	// The same attempt again (its result lost on the way back to the
	// workflow) sends nothing: the ledger has the event as delivered.
	before := verified.Load()
	answer.Store(http.StatusInternalServerError)
	val, err = env.ExecuteActivity(acts.Deliver, input(accepted[0]))
	require.NoError(t, err, "an event the ledger has as delivered is not sent again")
	require.NoError(t, val.Get(&res))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, before, verified.Load(), "no request reached the receiver")
	done := contract.Done{Sequence: 1, EventID: "evt_1", Lanes: []contract.LaneDone{{Endpoint: accepted[0].Endpoints[0]}}}
	require.Equal(t, []contract.Done{done, done}, seq.dones,
		"each answer hands the event over to its sequencer; the second repeats the first")

	// Event 2: rejected for good, and dead-lettered.
	answer.Store(http.StatusBadRequest)
	_, err = env.ExecuteActivity(acts.Deliver, input(accepted[1]))
	require.Error(t, err)
	_, err = env.ExecuteActivity(acts.WriteDeadLetter, contract.DeadLetterInput{Event: input(accepted[1]), Reason: err.Error(), Window: "run/1"})
	require.NoError(t, err)
	require.EqualValues(t, 3, verified.Load(), "every delivery was signed with both live secrets")

	dl := call(http.MethodGet, "/v1/dead-letters/evt_2", "", http.StatusOK)
	require.Equal(t, "evt_2", dl["event_id"])

	out := logs.String()
	require.Contains(t, out, "event dead-lettered", "the log was captured")
	require.NotContains(t, out, token)
	for _, s := range secrets {
		require.NotContains(t, out, s)
		key := strings.TrimPrefix(s, webhook.SecretPrefix)
		require.NotContains(t, out, key)
		raw, err := base64.StdEncoding.DecodeString(key)
		require.NoError(t, err)
		require.NotContains(t, out, base64.RawStdEncoding.EncodeToString(raw))
		require.NotContains(t, out, base64.URLEncoding.EncodeToString(raw))
		require.NotContains(t, out, fmt.Sprintf("%x", raw))
	}
}
