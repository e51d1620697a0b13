package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/client"
)

// TestAnEventNoEndpointTakesSaysSo: an event of a type
// no endpoint subscribes to is accepted and takes its place in its
// correlation, and its answer and GET /v1/events/{id} say it went nowhere
// (unrouted), where they once said only "delivered" with no deliveries;
// an event that was routed says unrouted false. The kit's client reads it.
func TestAnEventNoEndpointTakesSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	orders := b.subscribe("order.*")
	corr := b.id("unrouted")
	type answer struct {
		State      contract.State `json:"state"`
		Unrouted   *bool          `json:"unrouted"`
		Deliveries []delivery     `json:"deliveries"`
	}
	post := func(id string, seq int64, typ string) (int, answer) {
		var a answer
		code := b.call(http.MethodPost, "/v1/events", map[string]any{
			"id": id, "correlation_id": corr, "sequence": seq, "type": typ, "data": map[string]any{"seq": seq},
		}, &a)
		return code, a
	}
	get := func(id string) answer {
		var a answer
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/events/"+id, nil, &a))
		return a
	}

	code, a := post(corr+"-1", 1, "invoice.paid")
	require.Equal(t, http.StatusAccepted, code)
	require.NotNil(t, a.Unrouted, "the answer says whether any endpoint took it")
	require.True(t, *a.Unrouted)
	require.Empty(t, a.Deliveries)
	require.Equal(t, contract.StateDelivered, a.State)
	got := get(corr + "-1")
	require.NotNil(t, got.Unrouted)
	require.True(t, *got.Unrouted)
	require.Empty(t, got.Deliveries)

	code, a = post(corr+"-2", 2, "order.updated")
	require.Equal(t, http.StatusAccepted, code)
	require.NotNil(t, a.Unrouted)
	require.False(t, *a.Unrouted)
	require.Equal(t, []string{orders.ID}, fannedEvent{Deliveries: a.Deliveries}.Endpoints())
	b.waitDelivery(corr+"-2", orders.ID, contract.StateDelivered, 30*time.Second)
	got = get(corr + "-2")
	require.NotNil(t, got.Unrouted)
	require.False(t, *got.Unrouted)
	require.Equal(t, []int64{2}, orders.rcv.appliedTo(corr), "the unrouted 1 took its place; 2 went on")

	c := b.newClient(b.cfg.APIToken)
	again, err := c.EventCreateWithResponse(context.Background(), client.EventCreate{ID: corr + "-1", CorrelationID: corr, Sequence: 1, Type: "invoice.paid", Data: map[string]any{"seq": 1}})
	require.NoError(t, err)
	require.NotNil(t, again.JSON200, "the same event again: 200")
	require.True(t, again.JSON200.Unrouted)
	ev, err := c.EventGetWithResponse(context.Background(), corr+"-1", nil)
	require.NoError(t, err)
	require.True(t, ev.JSON200.Unrouted)
	ev, err = c.EventGetWithResponse(context.Background(), corr+"-2", nil)
	require.NoError(t, err)
	require.False(t, ev.JSON200.Unrouted)
}
