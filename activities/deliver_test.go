package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	webhooktransport "github.com/hookflow/hookflow/internal/transport/webhook"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/services/starter"
)

// finished is one hand-over Deliver made to the sequencer.
type finished struct {
	CorrelationID string
	Done          contract.Done
}

// sequencerSpy records the hand-overs, with the correlation each was for
// (handOvers in secrets_test.go keeps only the Done).
type sequencerSpy struct {
	mu    sync.Mutex
	calls []finished
	// resynced are the correlations it was asked to resync, in order.
	resynced []string
}

// The starter is the Sequencer the worker passes, and it resyncs.
var _ activities.Resyncer = (*starter.Starter)(nil)

func (s *sequencerSpy) Resync(_ context.Context, _, correlationID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resynced = append(s.resynced, correlationID)
	return nil
}

func (s *sequencerSpy) resyncs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.resynced...)
}

func (s *sequencerSpy) HandOver(_ context.Context, _, correlationID string, d contract.Done) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, finished{CorrelationID: correlationID, Done: d})
	return nil
}

func (s *sequencerSpy) handedOver() []finished {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]finished(nil), s.calls...)
}

// deliverBundle is one Deliver under test: its own database holding one
// endpoint (at the URL the test gives) and one event for it, the real
// activities with the real egress client, and the sequencer fake.
type deliverBundle struct {
	st     *store.Store
	acts   *activities.Activities
	env    *testsuite.TestActivityEnvironment
	seq    *sequencerSpy
	secret string
	in     contract.DeliverInput
}

// setupDeliver registers an endpoint at url and stores event evt_1, sequence
// 1 of order-1, whose workflow waits for its release.
func setupDeliver(t *testing.T, url string) *deliverBundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	ep, err := st.EndpointInsert(ctx, "ep_1", url, secret, nil)
	require.NoError(t, err)
	ev, ok, err := st.EventInsertRouted(ctx, intake.Event{
		ID: "evt_1", CorrelationID: "order-1", Sequence: 1, EndpointID: ep.ID,
		Type: "order.updated", Data: []byte(`{"n":1}`), PayloadHash: []byte{1},
	}, []string{ep.ID}, nil)

	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, st.EventMarkStarted(ctx, ev.ID, ""))

	logger := testenv.Logger(t)
	seq := &sequencerSpy{}
	acts, err := activities.New(activities.Deps{Store: st, Sequencer: seq, Transports: devTransports(t), Logger: logger})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(logger))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return &deliverBundle{
		st: st, acts: acts, env: env, seq: seq, secret: secret,
		in: contract.DeliverInput{
			Tenant:  store.DefaultTenant,
			EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ep.ID,
			// No Data, as the workflow sends it: Deliver reads the payload
			// from the ledger (TestDeliverSignsAndHandsOver sees it sent).
			Type: ev.Type, Timestamp: ev.AcceptedAt, Timeout: 5 * time.Second,
		},
	}
}

// devTransports are the worker's transports with every target allowed, as
// in hookflow dev: the tests' receivers listen on loopback.
func devTransports(t *testing.T) *transport.Registry {
	t.Helper()
	r, err := transport.NewRegistry(map[string]transport.Transport{webhooktransport.Type: webhooktransport.New(egress.Policy{AllowPrivate: true})})
	require.NoError(t, err)
	return r
}

// receiver serves h on 127.0.0.1 until the test ends and returns its hook URL.
func receiver(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/hooks"
}

// deliver runs one attempt of the real activity.
func (b *deliverBundle) deliver(t *testing.T) (contract.DeliverResult, error) {
	t.Helper()
	val, err := b.env.ExecuteActivity(b.acts.Deliver, b.in)
	if err != nil {
		return contract.DeliverResult{}, err
	}
	var res contract.DeliverResult
	require.NoError(t, val.Get(&res))
	return res, nil
}

// attempt returns the one attempt recorded for the event.
func (b *deliverBundle) attempt(t *testing.T) store.Attempt {
	t.Helper()
	got, err := b.st.AttemptsList(context.Background(), b.in.EventID, b.in.EndpointID)
	require.NoError(t, err)
	require.Len(t, got, 1, "every attempt is recorded, once")
	return got[0]
}

// event returns the event as the ledger has it.
func (b *deliverBundle) event(t *testing.T) store.Event {
	t.Helper()
	ev, err := b.st.EventGet(context.Background(), b.in.EventID)
	require.NoError(t, err)
	return ev
}

// requireFailure asserts err is the ApplicationError a workflow would see,
// of that type, retryable or not, with that NextRetryDelay.
func requireFailure(t *testing.T, err error, wantType string, retryable bool, delay time.Duration) {
	t.Helper()
	require.Error(t, err)
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	require.True(t, ok, "want an ApplicationError, got %T: %v", err, err)
	require.Equal(t, wantType, appErr.Type(), appErr.Error())
	require.Equal(t, !retryable, appErr.NonRetryable(), "non-retryable")
	require.Equal(t, delay, appErr.NextRetryDelay(), "next retry delay")
}

// TestDeliverAnswers runs Deliver against a real receiver for each answer of
// the wire contract: 2xx but 202 is delivered and handed over to the
// sequencer once; anything else is recorded, leaves the event undelivered
// and is not handed over. A 3xx points at a second server, which must get
// nothing: redirects are not followed.
func TestDeliverAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		code       int
		retryAfter string
		wantType   string // "" when delivered
		retryable  bool
		wantDelay  time.Duration
	}{
		{name: "200", code: 200},
		{name: "201", code: 201},
		{name: "204", code: 204},
		{name: "202 parked at the receiver", code: 202, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "301", code: 301, wantType: contract.ErrTypePermanent},
		{name: "302", code: 302, wantType: contract.ErrTypePermanent},
		{name: "303", code: 303, wantType: contract.ErrTypePermanent},
		{name: "307", code: 307, wantType: contract.ErrTypePermanent},
		{name: "308", code: 308, wantType: contract.ErrTypePermanent},
		{name: "400", code: 400, wantType: contract.ErrTypePermanent},
		{name: "401", code: 401, wantType: contract.ErrTypePermanent},
		{name: "404", code: 404, wantType: contract.ErrTypePermanent},
		{name: "422", code: 422, wantType: contract.ErrTypePermanent},
		{name: "408", code: 408, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "429 without Retry-After", code: 429, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "503 without Retry-After", code: 503, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "500", code: 500, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "502", code: 502, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "504", code: 504, wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "429 Retry-After seconds", code: 429, retryAfter: "30",
			wantType: contract.ErrTypeRetryAfter, retryable: true, wantDelay: 30 * time.Second},
		{name: "503 Retry-After seconds", code: 503, retryAfter: "7",
			wantType: contract.ErrTypeRetryAfter, retryable: true, wantDelay: 7 * time.Second},
		{name: "429 Retry-After of a day capped", code: 429, retryAfter: "86400",
			wantType: contract.ErrTypeRetryAfter, retryable: true, wantDelay: time.Hour},
		// 1e10 s fits an int but not a time.Duration in nanoseconds.
		{name: "429 Retry-After past a Duration capped", code: 429, retryAfter: "10000000000",
			wantType: contract.ErrTypeRetryAfter, retryable: true, wantDelay: time.Hour},
		{name: "503 Retry-After past an int64 capped", code: 503, retryAfter: "99999999999999999999",
			wantType: contract.ErrTypeRetryAfter, retryable: true, wantDelay: time.Hour},
		{name: "503 Retry-After far date capped", code: 503, retryAfter: "Fri, 31 Dec 9999 23:59:59 GMT",
			wantType: contract.ErrTypeRetryAfter, retryable: true, wantDelay: time.Hour},
		{name: "429 Retry-After unparsable", code: 429, retryAfter: "soon",
			wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "429 Retry-After zero", code: 429, retryAfter: "0",
			wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "429 Retry-After negative", code: 429, retryAfter: "-5",
			wantType: contract.ErrTypeRetryable, retryable: true},
		{name: "503 Retry-After past date", code: 503, retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT",
			wantType: contract.ErrTypeRetryable, retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var redirected atomic.Int64
			target := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
				redirected.Add(1)
				w.WriteHeader(http.StatusOK)
			})
			b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				if tc.code >= 300 && tc.code < 400 {
					w.Header().Set("Location", target)
				}
				w.WriteHeader(tc.code)
				fmt.Fprintf(w, "answered %d", tc.code)
			}))

			res, err := b.deliver(t)
			at := b.attempt(t)
			ev := b.event(t)
			require.EqualValues(t, 1, at.Attempt)
			require.NotNil(t, at.StatusCode, "the receiver's status is recorded")
			require.EqualValues(t, tc.code, *at.StatusCode)
			require.Zero(t, redirected.Load(), "redirects are not followed")

			if tc.wantType == "" {
				require.NoError(t, err)
				require.Equal(t, contract.DeliverResult{StatusCode: tc.code, Attempt: 1}, res)
				require.Equal(t, activities.OutcomeDelivered, at.Outcome)
				require.Equal(t, contract.StateDelivered, ev.State)
				require.NotNil(t, ev.DeliveredAt)
				require.Equal(t, []finished{{CorrelationID: "order-1", Done: contract.Done{Sequence: 1, EventID: "evt_1", Lanes: []contract.LaneDone{{Endpoint: "ep_1"}}}}},
					b.seq.handedOver(), "a delivered event is handed over to its sequencer once")
				return
			}
			requireFailure(t, err, tc.wantType, tc.retryable, tc.wantDelay)
			wantOutcome := activities.OutcomePermanent
			if tc.retryable {
				wantOutcome = activities.OutcomeRetry
			}
			require.Equal(t, wantOutcome, at.Outcome)
			require.NotNil(t, at.Error)
			require.Contains(t, *at.Error, "receiver answered "+strconv.Itoa(tc.code))
			require.Equal(t, contract.StateDelivering, ev.State, "the event is not delivered")
			require.Nil(t, ev.DeliveredAt)
			require.Empty(t, b.seq.handedOver(), "an undelivered event is not handed over")
		})
	}
}

// TestDeliverSignsAndHandsOver: a delivery is a signed POST of the envelope
// that verifies with the endpoint's secret; the 200 marks the event
// delivered, moves its correlation on and hands it over to its sequencer.
func TestDeliverSignsAndHandsOver(t *testing.T) {
	t.Parallel()
	type request struct {
		method, path string
		header       http.Header
		body         []byte
	}
	got := make(chan request, 1)
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusOK)
	}))

	before := time.Now()
	res, err := b.deliver(t)
	require.NoError(t, err)
	require.Equal(t, contract.DeliverResult{StatusCode: http.StatusOK, Attempt: 1}, res)

	req := <-got
	require.Equal(t, http.MethodPost, req.method)
	require.Equal(t, "/hooks", req.path)
	require.Equal(t, "application/json", req.header.Get("Content-Type"))
	require.Equal(t, "evt_1", req.header.Get(webhook.HeaderID))
	ts, err := strconv.ParseInt(req.header.Get(webhook.HeaderTimestamp), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, before.Unix(), ts, 2, "webhook-timestamp is the time of sending")
	require.NotEmpty(t, req.header.Get(webhook.HeaderSignature))
	require.NoError(t, webhook.VerifyHeader([]string{b.secret}, req.header, req.body, time.Now(), 0),
		"the signature verifies with the endpoint's secret")
	require.JSONEq(t, fmt.Sprintf(
		`{"id":"evt_1","type":"order.updated","timestamp":%q,"correlation_id":"order-1","endpoint_id":"ep_1","sequence":1,"previous_sequence":0,"data":{"n":1}}`,
		b.in.Timestamp.UTC().Format(time.RFC3339Nano)), string(req.body))

	at := b.attempt(t)
	require.Equal(t, activities.OutcomeDelivered, at.Outcome)
	require.EqualValues(t, 1, at.Attempt)
	require.NotNil(t, at.StatusCode)
	require.EqualValues(t, http.StatusOK, *at.StatusCode)
	require.Nil(t, at.Error)
	ev := b.event(t)
	require.Equal(t, contract.StateDelivered, ev.State)
	require.NotNil(t, ev.DeliveredAt)
	load, err := b.st.CorrelationLoadOf(context.Background(), "order-1", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, load.Next, "the correlation moves past the delivered event")
	require.Equal(t, []finished{{CorrelationID: "order-1", Done: contract.Done{Sequence: 1, EventID: "evt_1", Lanes: []contract.LaneDone{{Endpoint: "ep_1"}}}}}, b.seq.handedOver())
}

// TestDeliverGoneDisablesEndpoint: a 410 disables the endpoint in the ledger
// and fails for good; the next attempt does not reach the receiver.
func TestDeliverGoneDisablesEndpoint(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "no such hook", http.StatusGone)
	}))

	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypeEndpointGone, false, 0)
	at := b.attempt(t)
	require.Equal(t, activities.OutcomeGone, at.Outcome)
	require.NotNil(t, at.StatusCode)
	require.EqualValues(t, http.StatusGone, *at.StatusCode)
	ep, err := b.st.EndpointGet(context.Background(), b.in.EndpointID)
	require.NoError(t, err)
	require.True(t, ep.Disabled, "a 410 disables the endpoint")
	require.NotNil(t, ep.DisabledReason)
	require.Contains(t, *ep.DisabledReason, "410")
	require.Equal(t, contract.StateDelivering, b.event(t).State)
	require.Empty(t, b.seq.handedOver())

	_, err = b.deliver(t)
	requireFailure(t, err, contract.ErrTypeEndpointDisabled, false, 0)
	require.EqualValues(t, 1, hits.Load(), "a disabled endpoint gets no request")
}

// TestDeliverRetryAfterDate: Retry-After as an HTTP date two minutes ahead
// makes the next attempt wait about two minutes.
func TestDeliverRetryAfterDate(t *testing.T) {
	t.Parallel()
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", time.Now().Add(2*time.Minute).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	}))

	_, err := b.deliver(t)
	require.Error(t, err)
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	require.True(t, ok, "want an ApplicationError, got %T: %v", err, err)
	require.Equal(t, contract.ErrTypeRetryAfter, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.InDelta(t, 120, appErr.NextRetryDelay().Seconds(), 2)
	at := b.attempt(t)
	require.Equal(t, activities.OutcomeRetry, at.Outcome)
	require.NotNil(t, at.StatusCode)
	require.EqualValues(t, http.StatusTooManyRequests, *at.StatusCode)
	require.Equal(t, contract.StateDelivering, b.event(t).State)
	require.Empty(t, b.seq.handedOver())
}

// TestDeliverTimeoutIsRetryable: a receiver slower than the attempt's
// timeout costs one retryable attempt, bounded by that timeout.
func TestDeliverTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hang up, which
		// ends r.Context().
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		w.WriteHeader(http.StatusOK)
	}))
	b.in.Timeout = 300 * time.Millisecond

	start := time.Now()
	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypeRetryable, true, 0)
	require.Less(t, time.Since(start), 5*time.Second, "the attempt ends at its timeout")
	at := b.attempt(t)
	require.Equal(t, activities.OutcomeRetry, at.Outcome)
	require.Nil(t, at.StatusCode, "no answer came")
	require.NotNil(t, at.Error)
	require.Equal(t, contract.StateDelivering, b.event(t).State)
	require.Empty(t, b.seq.handedOver())
}

// TestDeliverConnectionErrorIsRetryable: a receiver that drops the
// connection without answering costs one retryable attempt.
func TestDeliverConnectionErrorIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	b := setupDeliver(t, "http://"+ln.Addr().String()+"/hooks")

	_, err = b.deliver(t)
	requireFailure(t, err, contract.ErrTypeRetryable, true, 0)
	at := b.attempt(t)
	require.Equal(t, activities.OutcomeRetry, at.Outcome)
	require.Nil(t, at.StatusCode)
	require.NotNil(t, at.Error)
	require.Equal(t, contract.StateDelivering, b.event(t).State)
	require.Empty(t, b.seq.handedOver())
}
