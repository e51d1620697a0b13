package activities_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestDeliverOfASkippedEventSendsNothing (a Reset once sent a skipped event): a Reset runs
// the delivery of an event an operator skipped again. The ledger has it
// skipped, so nothing is sent, and the workflow is told so.
func TestDeliverOfASkippedEventSendsNothing(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	require.NoError(t, b.st.DeliverySkipped(context.Background(), b.in.EventID, b.in.EndpointID, b.in.CorrelationID, b.in.Sequence, time.Now()))

	res, err := b.deliver(t)
	require.NoError(t, err)
	require.True(t, res.Skipped)
	require.Zero(t, requests.Load(), "the skipped event is not sent")
	require.Equal(t, contract.StateSkipped, b.event(t).State)
	require.Empty(t, b.seq.handedOver(), "the workflow hands over, once it has ended the event as skipped")
}

// TestOperatorActionsClaimOnce (an API replay and a raw skip once both acted): of a replay the API
// claimed and a skip sent by hand from the Web UI, only the replay acts;
// the skip reports it lost and changes nothing. The API's own claim does
// not stop the action it claimed.
func TestOperatorActionsClaimOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	_, err := b.deliver(t)
	require.Error(t, err)
	val, err := b.env.ExecuteActivity(b.acts.WriteDeadLetter, contract.DeadLetterInput{Event: b.in, Reason: "400", Window: "run/1"})
	require.NoError(t, err)
	var dl contract.DeadLetterResult
	require.NoError(t, val.Get(&dl))
	require.EqualValues(t, 1, dl.Generation)
	ok, err := b.st.DeadLetterMarkReplayed(ctx, b.in.EventID, b.in.EndpointID, 1, "api-key")
	require.NoError(t, err)
	require.True(t, ok, "the API claims the replay")

	skip := contract.SkipInput{Tenant: b.in.Tenant, EventID: b.in.EventID, EndpointID: b.in.EndpointID, CorrelationID: b.in.CorrelationID, Sequence: b.in.Sequence, Generation: 1, By: "web-ui"}
	val, err = b.env.ExecuteActivity(b.acts.Skip, skip)
	require.NoError(t, err)
	var res contract.OperatorResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, store.DeadLetterReplayed, res.Lost, "the skip lost to the replay")
	require.Equal(t, contract.StateDeadLettered, b.event(t).State, "and skipped nothing")
	require.Empty(t, b.seq.handedOver())

	val, err = b.env.ExecuteActivity(b.acts.Replayed, contract.ReplayedInput{Tenant: b.in.Tenant, EventID: b.in.EventID, EndpointID: b.in.EndpointID, Generation: 1, By: "api-key"})
	require.NoError(t, err)
	var replayed contract.OperatorResult
	require.NoError(t, val.Get(&replayed))
	require.Empty(t, replayed.Lost, "the replay the API claimed goes ahead")
	d, err := b.st.DeadLetterGet(ctx, b.in.EventID, b.in.EndpointID)
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterReplayed, d.Status)
	require.Equal(t, "api-key", *d.ReplayedBy)
	var env contract.Envelope
	require.NoError(t, json.Unmarshal(d.Envelope, &env))
	require.JSONEq(t, `{"n":1}`, string(env.Data), "the envelope kept has the ledger's payload, which the workflow does not carry")
}

// TestDeliverOfADeadLetterWaitsForItsReplay (found by the operator model,
// seed 17): a Reset runs the delivery of a dead-lettered event again. With
// no replay of its dead letter claimed, nothing is sent and the workflow is
// told which dead letter to wait on; once a replay is claimed, it is sent.
func TestDeliverOfADeadLetterWaitsForItsReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var answer atomic.Int32
	answer.Store(http.StatusBadRequest)
	var requests atomic.Int32
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(int(answer.Load()))
	}))
	_, err := b.deliver(t)
	require.Error(t, err)
	_, err = b.env.ExecuteActivity(b.acts.WriteDeadLetter, contract.DeadLetterInput{Event: b.in, Reason: "400", Window: "run/1"})
	require.NoError(t, err)
	answer.Store(http.StatusOK)

	res, err := b.deliver(t)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.DeadLettered, "it waits on dead letter 1")
	require.EqualValues(t, 1, requests.Load(), "nothing is sent before a replay")
	require.Equal(t, contract.StateDeadLettered, b.event(t).State)

	ok, err := b.st.DeadLetterMarkReplayed(ctx, b.in.EventID, b.in.EndpointID, 1, "api-key")
	require.NoError(t, err)
	require.True(t, ok)
	res, err = b.deliver(t)
	require.NoError(t, err)
	require.Zero(t, res.DeadLettered)
	require.Equal(t, http.StatusOK, res.StatusCode, "the replay is sent")
	require.Equal(t, contract.StateDelivered, b.event(t).State)
}
