package e2e

import (
	"context"
	"errors"
	"github.com/oapi-codegen/nullable"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/client"
)

// TestEndpointEventTypes drives endpoints' event types through the real API
// with kit/client: registered with patterns, listed page by page, changed,
// a bad change refused without effect, and back to every type; at each step
// the store's subscribers of a type (what fan-out routes by) follow.
func TestEndpointEventTypes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	c := b.newClient(b.cfg.APIToken)
	subscribers := func(eventType string) []string {
		t.Helper()
		subs, err := b.store.EndpointsSubscribed(ctx, eventType, 1000)
		require.NoError(t, err)
		ids := make([]string, len(subs))
		for i, s := range subs {
			ids[i] = s.ID
		}
		return ids
	}
	sorted := func(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

	create := func(ep client.EndpointCreate) *client.EndpointWithSecret {
		t.Helper()
		r, err := c.EndpointCreateWithResponse(ctx, ep)
		require.NoError(t, err)
		return r.JSON201
	}
	list := func(p client.EndpointListParams) *client.EndpointPage {
		t.Helper()
		r, err := c.EndpointListWithResponse(ctx, &p)
		require.NoError(t, err)
		return r.JSON200
	}
	update := func(id string, u client.EndpointUpdate) (*client.Endpoint, error) {
		r, err := c.EndpointUpdateWithResponse(ctx, id, nil, u)
		if err != nil {
			return nil, err
		}
		return r.JSON200, nil
	}
	orders := create(client.EndpointCreate{URL: "https://example.com/orders",
		EventTypes: nullable.NewNullableWithValue([]string{"order.*", "user.deleted", "order.*"})})
	require.Equal(t, []string{"order.*", "user.deleted"}, orders.EventTypes, "repeats dropped")
	every := create(client.EndpointCreate{URL: "https://example.com/every"})
	require.Nil(t, every.EventTypes)
	star := create(client.EndpointCreate{URL: "https://example.com/star", EventTypes: nullable.NewNullableWithValue([]string{"*"})})
	invoices := create(client.EndpointCreate{URL: "https://example.com/invoices", EventTypes: nullable.NewNullableWithValue([]string{"invoice.paid"})})

	first := list(client.EndpointListParams{Limit: new(int64(3))})
	require.Len(t, first.Items, 3)
	require.NotEmpty(t, first.NextCursor)
	rest := list(client.EndpointListParams{Limit: new(int64(3)), Cursor: &first.NextCursor})
	require.Len(t, rest.Items, 1)
	require.Empty(t, rest.NextCursor, "the last page has no cursor")
	listed := map[string][]string{}
	var order []string
	for _, ep := range append(first.Items, rest.Items...) {
		listed[ep.ID] = ep.EventTypes
		order = append(order, ep.ID)
	}
	require.Equal(t, sorted(orders.ID, every.ID, star.ID, invoices.ID), order, "every endpoint once, in id order")
	require.Equal(t, map[string][]string{orders.ID: {"order.*", "user.deleted"}, every.ID: nil, star.ID: {"*"}, invoices.ID: {"invoice.paid"}}, listed)

	require.Equal(t, sorted(orders.ID, every.ID, star.ID), subscribers("order.created"))
	require.Equal(t, sorted(every.ID, star.ID), subscribers("order"), `"order.*" is below "order.", not "order" itself`)
	require.Equal(t, sorted(every.ID, star.ID, invoices.ID), subscribers("invoice.paid"))

	changed, err := update(orders.ID, client.EndpointUpdate{EventTypes: nullable.NewNullableWithValue([]string{"invoice.*"})})
	require.NoError(t, err)
	require.Equal(t, []string{"invoice.*"}, changed.EventTypes)
	require.Equal(t, sorted(every.ID, star.ID), subscribers("order.created"))
	require.Equal(t, sorted(orders.ID, every.ID, star.ID, invoices.ID), subscribers("invoice.paid"))

	_, err = update(orders.ID, client.EndpointUpdate{Disabled: new(true), EventTypes: nullable.NewNullableWithValue([]string{"invoice.paid", "*.paid"})})
	var pe *client.Error
	require.True(t, errors.As(err, &pe), "want *client.Error, got %v", err)
	require.Equal(t, http.StatusUnprocessableEntity, pe.Status)
	require.Equal(t, "event_types[1]", pe.Field)
	r, err := c.EndpointGetWithResponse(ctx, orders.ID, nil)
	require.NoError(t, err)
	got := r.JSON200
	require.Equal(t, []string{"invoice.*"}, got.EventTypes, "the refused change changed nothing")
	require.False(t, got.Disabled)

	back, err := update(orders.ID, client.EndpointUpdate{EventTypes: nullable.NewNullNullable[[]string]()})
	require.NoError(t, err)
	require.Nil(t, back.EventTypes, "null: every type again")
	require.Equal(t, sorted(orders.ID, every.ID, star.ID), subscribers("order.created"))

	_, err = update(star.ID, client.EndpointUpdate{Disabled: new(true)})
	require.NoError(t, err)
	require.Equal(t, sorted(orders.ID, every.ID, star.ID), subscribers("order.created"), "a disabled endpoint is still a subscriber: paused, its events wait in its lanes")
	everyOne, err := c.EndpointListAll(ctx, client.EndpointListParams{Limit: new(int64(1))})
	require.NoError(t, err)
	require.Len(t, everyOne, 4, "the list keeps disabled endpoints")
}
