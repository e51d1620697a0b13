package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
)

// TestRepostsOfPrunedEventsAreAnsweredAsBefore: once the cleaner emptied a
// delivered event's payload, a repost of its key with the same content is
// 200, with other content 422, and another key claiming its sequence 409,
// as before; once its row is gone too (HOOKFLOW_KEY_RETENTION), a repost is
// 409 (its sequence is behind the cursor) and stores nothing: it is never
// delivered twice.
func TestRepostsOfPrunedEventsAreAnsweredAsBefore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	post := func(with map[string]string) (*http.Response, string) {
		return b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, with), b.bearer())
	}
	resp, body := post(nil)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	require.NoError(t, b.store.DeliveryDelivered(ctx, "evt_1", b.endpointID, "order-1", 1, store.Attempt{Attempt: 1, StartedAt: time.Now(), Outcome: "delivered"}, time.Now()))
	pruned, err := b.store.EventsPrunePayloads(ctx, 0, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, pruned)
	ev, err := b.store.EventGet(ctx, "evt_1")
	require.NoError(t, err)
	require.Nil(t, ev.Data, "the payload is gone")

	resp, body = post(nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"state":"delivered"`)
	resp, body = post(map[string]string{"data": `{"total":43}`})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "id")
	resp, body = post(map[string]string{"id": `"evt_other"`})
	p := requireProblem(t, resp, body, http.StatusConflict, "sequence")
	require.Contains(t, p["detail"], "already delivered")

	deleted, attempts, err := b.store.EventsPruneKeys(ctx, 0, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, deleted)
	require.EqualValues(t, 1, attempts, "the key's row goes with its attempt")
	for _, with := range []map[string]string{nil, {"data": `{"total":43}`}, {"id": `"evt_other"`}} {
		resp, body = post(with)
		p := requireProblem(t, resp, body, http.StatusConflict, "sequence")
		require.EqualValues(t, 2, p["next_sequence"])
	}
	require.Zero(t, b.count(t, "events"), "nothing is stored again")
	require.EqualValues(t, 1, b.starter.calls.Load(), "and nothing started again")
}
