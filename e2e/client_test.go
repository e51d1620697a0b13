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
	c, err := client.New(b.apiURL, token, client.WithHTTPClient(b.checked()))
	require.NoError(b.t, err)
	return c
}

// waitEvent polls GET /v1/events/{id} through c until the event is in
// state.
func waitEvent(t *testing.T, c *client.Client, id string, state client.State) client.Event {
	t.Helper()
	var ev client.Event
	waitFor(t, 30*time.Second, id+" "+string(state), func() bool {
		r, err := c.EventGetWithResponse(context.Background(), id, nil)
		require.NoError(t, err)
		ev = *r.JSON200
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
	t.Parallel()
	b := setup(t, options{window: 4 * time.Second})
	ctx := context.Background()
	admin := b.newClient(b.cfg.APIToken)

	newKey := func(name string, scopes ...client.Scope) *client.Client {
		r, err := admin.APIKeyCreateWithResponse(ctx, client.APIKeyCreate{Name: name, Scopes: scopes})
		require.NoError(t, err)
		k := r.JSON201
		require.Equal(t, name, k.Name)
		require.ElementsMatch(t, scopes, k.Scopes)
		return b.newClient(k.Key)
	}
	producer := newKey("producer", client.ScopeEventsWrite, client.ScopeEventsRead)
	operator := newKey("operator", client.ScopeDeadLettersWrite, client.ScopeEventsRead)
	keys, err := admin.APIKeyListWithResponse(ctx)
	require.NoError(t, err)
	require.Len(t, keys.JSON200.Items, 2)

	rcv := newLedgerReceiver(t)
	created, err := admin.EndpointCreateWithResponse(ctx, client.EndpointCreate{URL: rcv.URL()})
	require.NoError(t, err)
	ep := created.JSON201
	require.NotEmpty(t, ep.Secret)
	rcv.secret = ep.Secret
	got, err := producer.EndpointGetWithResponse(ctx, ep.ID, nil)
	require.NoError(t, err)
	var want client.Endpoint // the created endpoint, without its secret
	b2, err := json.Marshal(ep)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b2, &want))
	want.URL = rcv.srv.URL + "/[redacted]"
	require.Equal(t, want, *got.JSON200, "read back by a read key as created, without the secret and with the path redacted")

	// Sent 2 before 1: applied 1, 2.
	corr := b.id("client-order")
	send := func(c *client.Client, seq int64, endpointID string) *client.EventCreateResponse {
		t.Helper()
		acc, err := c.EventCreateWithResponse(ctx, client.EventCreate{
			ID: fmt.Sprintf("%s-%d", corr, seq), CorrelationID: corr, Sequence: seq, EndpointID: endpointID,
			Type: "order.updated", Data: map[string]any{"amount": seq},
		})
		require.NoError(t, err)
		return acc
	}
	for _, seq := range []int64{2, 1} {
		acc := send(producer, seq, ep.ID)
		require.NotNil(t, acc.JSON202)
		require.Equal(t, client.AcceptedStateWaiting, acc.JSON202.State)
		require.Nil(t, acc.JSON200, "accepted now: 202")
	}
	for _, seq := range []int64{1, 2} {
		ev := waitEvent(t, producer, fmt.Sprintf("%s-%d", corr, seq), client.StateDelivered)
		d, ok := ev.Delivery(ep.ID)
		require.True(t, ok)
		require.NotEmpty(t, d.Attempts)
		require.EqualValues(t, http.StatusOK, d.Attempts[len(d.Attempts)-1].StatusCode)
		require.False(t, d.DeliveredAt.IsZero())
	}
	applied, violations := rcv.snapshot()
	require.Empty(t, violations)
	require.Equal(t, []int64{1, 2}, applied[corr])
	again := send(producer, 1, ep.ID)
	require.NotNil(t, again.JSON200, "the same event again: 200 with the event")
	require.Equal(t, client.StateDelivered, again.JSON200.State)

	// A receiver that refuses for good: a dead letter, holding its
	// successor, replayed through the client once the receiver is fixed.
	flaky := newFlakyReceiver(t)
	badr, err := admin.EndpointCreateWithResponse(ctx, client.EndpointCreate{URL: flaky.srv.URL + "/hook"})
	require.NoError(t, err)
	bad := badr.JSON201
	corr = b.id("client-dlq")
	send(producer, 1, bad.ID)
	send(producer, 2, bad.ID)
	head, next := corr+"-1", corr+"-2"
	waitEvent(t, producer, head, client.StateDeadLettered)

	pager, err := producer.DeadLetterListWithResponse(ctx, &client.DeadLetterListParams{CorrelationID: &corr})
	require.NoError(t, err)
	page := pager.JSON200
	require.Len(t, page.Items, 1)
	dlr, err := producer.DeadLetterGetWithResponse(ctx, head, nil)
	require.NoError(t, err)
	dl := dlr.JSON200
	require.Equal(t, page.Items[0].EventID, dl.EventID)
	require.Equal(t, client.DeadLetterStatusOpen, dl.Status)
	require.Equal(t, bad.ID, dl.EndpointID)
	require.Contains(t, dl.Reason, "400")
	require.Contains(t, string(dl.Envelope), `"sequence":1`)
	cr, err := producer.CorrelationGetWithResponse(ctx, corr, nil)
	require.NoError(t, err)
	c := cr.JSON200
	require.EqualValues(t, 1, c.NextSequence)
	lane, ok := c.Lane(bad.ID)
	require.True(t, ok)
	require.Equal(t, []int64{2}, lane.Parked)
	require.NotNil(t, lane.BlockedBy)
	require.Equal(t, string(client.StateDeadLettered), lane.BlockedBy.State)
	st, err := producer.StatsWithResponse(ctx, &client.StatsParams{Top: new(int64(5))})
	require.NoError(t, err)
	require.EqualValues(t, 1, st.JSON200.DeadLettersOpen)

	flaky.healed.Store(true)
	act, err := operator.DeadLetterReplayWithResponse(ctx, head, nil, client.Operator{})
	require.NoError(t, err)
	require.Equal(t, client.OperatorAction{EventID: head, EndpointID: bad.ID, Status: "replaying"}, *act.JSON202)
	waitEvent(t, producer, head, client.StateDelivered)
	waitEvent(t, producer, next, client.StateDelivered)
	require.Equal(t, []string{head, next}, flaky.acceptedIDs(), "replayed, then its successor, in order")
	dlr, err = producer.DeadLetterGetWithResponse(ctx, head, nil)
	require.NoError(t, err)
	dl = dlr.JSON200
	require.Equal(t, client.DeadLetterStatusReplayed, dl.Status)
	require.Equal(t, "operator", dl.ReplayedBy, "recorded under the name of the key that replayed")

	// A second click is refused: the dead letter is not open any more.
	_, err = operator.DeadLetterReplayWithResponse(ctx, head, nil, client.Operator{})
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusConflict, apiErr.Status)
}

// TestClientProblems: the API's refusals arrive as *client.Error with the
// problem's fields: a bad request names its field, a key without the scope
// gets 403 naming it, a revoked key 401, a taken sequence 409 with the high
// water mark. No error carries the key.
func TestClientProblems(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	admin := b.newClient(b.cfg.APIToken)
	rcv := newLedgerReceiver(t)
	created, err := admin.EndpointCreateWithResponse(ctx, client.EndpointCreate{URL: rcv.URL()})
	require.NoError(t, err)
	ep := created.JSON201
	rcv.secret = ep.Secret
	corr := b.id("client-problems")
	event := func(seq int64) client.EventCreate {
		return client.EventCreate{ID: fmt.Sprintf("%s-%d", corr, seq), CorrelationID: corr, Sequence: seq,
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
	_, err = admin.EventCreateWithResponse(ctx, bad)
	e := problem(err, http.StatusBadRequest)
	require.Equal(t, "sequence", e.Field)
	require.Equal(t, "https://hookflow.dev/problems/invalid-field", e.Type)
	require.Equal(t, "/v1/events", e.Instance)
	require.NotEmpty(t, e.Detail)

	readerr, err := admin.APIKeyCreateWithResponse(ctx, client.APIKeyCreate{Name: "reader", Scopes: []client.Scope{client.ScopeEventsRead}})
	require.NoError(t, err)
	reader := readerr.JSON201
	readOnly := b.newClient(reader.Key)
	_, err = readOnly.EventCreateWithResponse(ctx, event(1))
	e = problem(err, http.StatusForbidden)
	require.Equal(t, "https://hookflow.dev/problems/missing-scope", e.Type)
	var scope client.Scope
	require.NoError(t, json.Unmarshal(e.Extensions["scope"], &scope))
	require.Equal(t, client.ScopeEventsWrite, scope)
	require.NotContains(t, err.Error(), reader.Key)
	_, err = readOnly.APIKeyListWithResponse(ctx)
	problem(err, http.StatusForbidden)

	_, err = admin.EventCreateWithResponse(ctx, event(1))
	require.NoError(t, err)
	other := event(1)
	other.ID = corr + "-other"
	_, err = admin.EventCreateWithResponse(ctx, other)
	e = problem(err, http.StatusConflict)
	require.Equal(t, "sequence", e.Field)
	require.JSONEq(t, `1`, string(e.Extensions["high_water_mark"]))

	revoked, err := admin.APIKeyRevokeWithResponse(ctx, reader.ID)
	require.NoError(t, err)
	require.False(t, revoked.JSON200.RevokedAt.IsZero())
	_, err = readOnly.EventGetWithResponse(ctx, corr+"-1", nil)
	problem(err, http.StatusUnauthorized)
	require.NotContains(t, err.Error(), reader.Key)

	_, err = admin.EventGetWithResponse(ctx, b.id("never-sent"), nil)
	problem(err, http.StatusNotFound)

	h, err := admin.HealthzWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, "ok", h.JSON200.Status)
	r, err := admin.ReadyzWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, client.ReadinessStatusReady, r.JSON200.Status)
	doc, err := admin.OpenapiWithResponse(ctx)
	require.NoError(t, err)
	require.Contains(t, string(doc.Body), `"operationId": "eventCreate"`)
}
