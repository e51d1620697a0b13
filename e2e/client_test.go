package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/client"
)

// newClient is the kit's client of b's API, authenticated with token.
func (b *bundle) newClient(token string) *client.Client {
	b.t.Helper()
	c, err := client.New(b.apiURL, token)
	require.NoError(b.t, err)
	return c
}

// waitEvent polls GET /v1/events/{id} through c until the event is in
// state.
func waitEvent(t *testing.T, c *client.Client, id string, state client.State) client.Event {
	t.Helper()
	var ev client.Event
	waitFor(t, 30*time.Second, id+" "+string(state), func() bool {
		var err error
		ev, err = c.EventGet(context.Background(), id)
		require.NoError(t, err)
		return ev.State == state
	})
	return ev
}

// flakyReceiver refuses every delivery for good (400, so the event is
// dead-lettered at once) until healed, then answers 200; it records the
// event ids it accepted.
type flakyReceiver struct {
	srv      *httptest.Server
	healed   atomic.Bool
	mu       sync.Mutex
	accepted []string
}

func newFlakyReceiver(t *testing.T) *flakyReceiver {
	r := &flakyReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.healed.Load() {
			http.Error(w, "no such order", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.accepted = append(r.accepted, req.Header.Get("webhook-id"))
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *flakyReceiver) acceptedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.accepted...)
}

// TestClientDeliversAndReplays drives the real API only through kit/client,
// each call with a key of the scopes it needs: events sent out of order are
// applied in order by the receiver, a repost is answered with the event as
// it stands, and a dead letter is found, replayed and delivered.
func TestClientDeliversAndReplays(t *testing.T) {
	b := setup(t, options{window: 4 * time.Second})
	ctx := context.Background()
	admin := b.newClient(b.cfg.APIToken)

	newKey := func(name string, scopes ...client.Scope) *client.Client {
		k, err := admin.APIKeyCreate(ctx, client.APIKeyCreateRequest{Name: name, Scopes: scopes})
		require.NoError(t, err)
		require.Equal(t, name, k.Name)
		require.ElementsMatch(t, scopes, k.Scopes)
		return b.newClient(k.Key)
	}
	producer := newKey("producer", client.ScopeEventsWrite, client.ScopeEventsRead)
	operator := newKey("operator", client.ScopeDeadLettersWrite, client.ScopeEventsRead)
	keys, err := admin.APIKeyList(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 2)

	rcv := newLedgerReceiver(t)
	ep, err := admin.EndpointCreate(ctx, client.EndpointCreateRequest{URL: rcv.URL()})
	require.NoError(t, err)
	require.NotEmpty(t, ep.Secret)
	rcv.secret = ep.Secret
	got, err := producer.EndpointGet(ctx, ep.ID)
	require.NoError(t, err)
	want := ep.Endpoint
	want.URL = rcv.srv.URL + "/[redacted]"
	require.Equal(t, want, got, "read back by a read key as created, without the secret and with the path redacted")

	// Sent 2 before 1: applied 1, 2.
	corr := b.id("client-order")
	send := func(c *client.Client, seq int64, endpointID string) client.Accepted {
		t.Helper()
		acc, err := c.EventCreate(ctx, client.EventCreateRequest{
			ID: fmt.Sprintf("%s-%d", corr, seq), CorrelationID: corr, Sequence: seq, EndpointID: endpointID,
			Type: "order.updated", Data: map[string]any{"amount": seq},
		})
		require.NoError(t, err)
		return acc
	}
	for _, seq := range []int64{2, 1} {
		acc := send(producer, seq, ep.ID)
		require.Equal(t, client.StateWaiting, acc.State)
		require.Nil(t, acc.Existing, "accepted now: 202")
	}
	for _, seq := range []int64{1, 2} {
		ev := waitEvent(t, producer, fmt.Sprintf("%s-%d", corr, seq), client.StateDelivered)
		d, ok := ev.Delivery(ep.ID)
		require.True(t, ok)
		require.NotEmpty(t, d.Attempts)
		require.Equal(t, http.StatusOK, d.Attempts[len(d.Attempts)-1].StatusCode)
		require.False(t, d.DeliveredAt.IsZero())
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
	again := send(producer, 1, ep.ID)
	require.NotNil(t, again.Existing, "the same event again: 200 with the event")
	require.Equal(t, client.StateDelivered, again.State)

	// A receiver that refuses for good: a dead letter, holding its
	// successor, replayed through the client once the receiver is fixed.
	flaky := newFlakyReceiver(t)
	bad, err := admin.EndpointCreate(ctx, client.EndpointCreateRequest{URL: flaky.srv.URL + "/hook"})
	require.NoError(t, err)
	corr = b.id("client-dlq")
	send(producer, 1, bad.ID)
	send(producer, 2, bad.ID)
	head, next := corr+"-1", corr+"-2"
	waitEvent(t, producer, head, client.StateDeadLettered)

	page, err := producer.DeadLetterList(ctx, client.DeadLetterFilter{CorrelationID: corr})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	dl, err := producer.DeadLetterGet(ctx, head, "")
	require.NoError(t, err)
	require.Equal(t, page.Items[0].EventID, dl.EventID)
	require.Equal(t, client.DeadLetterOpen, dl.Status)
	require.Equal(t, bad.ID, dl.EndpointID)
	require.Contains(t, dl.Reason, "400")
	require.Contains(t, string(dl.Envelope), `"sequence":1`)
	c, err := producer.CorrelationGet(ctx, corr)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.NextSequence)
	lane, ok := c.Lane(bad.ID)
	require.True(t, ok)
	require.Equal(t, []int64{2}, lane.Parked)
	require.NotNil(t, lane.BlockedBy)
	require.Equal(t, string(client.StateDeadLettered), lane.BlockedBy.State)
	st, err := producer.Stats(ctx, client.StatsParams{Top: new(5)})
	require.NoError(t, err)
	require.EqualValues(t, 1, st.DeadLettersOpen)

	flaky.healed.Store(true)
	act, err := operator.DeadLetterReplay(ctx, head, client.OperatorRequest{})
	require.NoError(t, err)
	require.Equal(t, client.OperatorAction{EventID: head, EndpointID: bad.ID, Status: "replaying"}, act)
	waitEvent(t, producer, head, client.StateDelivered)
	waitEvent(t, producer, next, client.StateDelivered)
	require.Equal(t, []string{head, next}, flaky.acceptedIDs(), "replayed, then its successor, in order")
	dl, err = producer.DeadLetterGet(ctx, head, "")
	require.NoError(t, err)
	require.Equal(t, client.DeadLetterReplayed, dl.Status)
	require.Equal(t, "operator", dl.ReplayedBy, "recorded under the name of the key that replayed")

	// A second click is refused: the dead letter is not open any more.
	_, err = operator.DeadLetterReplay(ctx, head, client.OperatorRequest{})
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusConflict, apiErr.Status)
}

// TestClientProblems: the API's refusals arrive as *client.Error with the
// problem's fields: a bad request names its field, a key without the scope
// gets 403 naming it, a revoked key 401, a taken sequence 409 with the high
// water mark. No error carries the key.
func TestClientProblems(t *testing.T) {
	b := setup(t, options{})
	ctx := context.Background()
	admin := b.newClient(b.cfg.APIToken)
	rcv := newLedgerReceiver(t)
	ep, err := admin.EndpointCreate(ctx, client.EndpointCreateRequest{URL: rcv.URL()})
	require.NoError(t, err)
	rcv.secret = ep.Secret
	corr := b.id("client-problems")
	event := func(seq int64) client.EventCreateRequest {
		return client.EventCreateRequest{ID: fmt.Sprintf("%s-%d", corr, seq), CorrelationID: corr, Sequence: seq,
			EndpointID: ep.ID, Type: "order.updated", Data: map[string]any{"amount": seq}}
	}
	problem := func(err error, status int) *client.Error {
		t.Helper()
		var e *client.Error
		require.True(t, errors.As(err, &e), "want *client.Error, got %v", err)
		require.Equal(t, status, e.Status, e.Error())
		return e
	}

	bad := event(0)
	_, err = admin.EventCreate(ctx, bad)
	e := problem(err, http.StatusBadRequest)
	require.Equal(t, "sequence", e.Field)
	require.Equal(t, "https://hookflow.dev/problems/invalid-field", e.Type)
	require.Equal(t, "/v1/events", e.Instance)
	require.NotEmpty(t, e.Detail)

	reader, err := admin.APIKeyCreate(ctx, client.APIKeyCreateRequest{Name: "reader", Scopes: []client.Scope{client.ScopeEventsRead}})
	require.NoError(t, err)
	readOnly := b.newClient(reader.Key)
	_, err = readOnly.EventCreate(ctx, event(1))
	e = problem(err, http.StatusForbidden)
	require.Equal(t, "https://hookflow.dev/problems/missing-scope", e.Type)
	var scope client.Scope
	require.NoError(t, json.Unmarshal(e.Extensions["scope"], &scope))
	require.Equal(t, client.ScopeEventsWrite, scope)
	require.NotContains(t, err.Error(), reader.Key)
	_, err = readOnly.APIKeyList(ctx)
	problem(err, http.StatusForbidden)

	_, err = admin.EventCreate(ctx, event(1))
	require.NoError(t, err)
	other := event(1)
	other.ID = corr + "-other"
	_, err = admin.EventCreate(ctx, other)
	e = problem(err, http.StatusConflict)
	require.Equal(t, "sequence", e.Field)
	require.JSONEq(t, `1`, string(e.Extensions["high_water_mark"]))

	revoked, err := admin.APIKeyRevoke(ctx, reader.ID)
	require.NoError(t, err)
	require.False(t, revoked.RevokedAt.IsZero())
	_, err = readOnly.EventGet(ctx, corr+"-1")
	problem(err, http.StatusUnauthorized)
	require.NotContains(t, err.Error(), reader.Key)

	_, err = admin.EventGet(ctx, b.id("never-sent"))
	problem(err, http.StatusNotFound)

	h, err := admin.Healthz(ctx)
	require.NoError(t, err)
	require.Equal(t, "ok", h.Status)
	r, err := admin.Readyz(ctx)
	require.NoError(t, err)
	require.Equal(t, "ready", r.Status)
	doc, err := admin.OpenAPI(ctx)
	require.NoError(t, err)
	require.Contains(t, string(doc), `"operationId": "eventCreate"`)
}
