package e2e

import (
	"context"
	"errors"
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
	b := setup(t, options{})
	ctx := context.Background()
	c := b.newClient(b.cfg.APIToken)
	subscribers := func(eventType string) []string {
		t.Helper()
		ids, err := b.store.EndpointsSubscribed(ctx, eventType, 1000)
		require.NoError(t, err)
		return ids
	}
	sorted := func(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

	orders, err := c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://example.com/orders",
		EventTypes: []string{"order.*", "user.deleted", "order.*"}})
	require.NoError(t, err)
	require.Equal(t, []string{"order.*", "user.deleted"}, orders.EventTypes, "repeats dropped")
	every, err := c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://example.com/every"})
	require.NoError(t, err)
	require.Nil(t, every.EventTypes)
	star, err := c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://example.com/star", EventTypes: []string{"*"}})
	require.NoError(t, err)
	invoices, err := c.EndpointCreate(ctx, client.EndpointCreateRequest{URL: "https://example.com/invoices", EventTypes: []string{"invoice.paid"}})
	require.NoError(t, err)

	first, err := c.EndpointList(ctx, client.EndpointListOptions{Limit: 3})
	require.NoError(t, err)
	require.Len(t, first.Items, 3)
	require.NotEmpty(t, first.NextCursor)
	rest, err := c.EndpointList(ctx, client.EndpointListOptions{Limit: 3, Cursor: first.NextCursor})
	require.NoError(t, err)
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

	changed, err := c.EndpointUpdate(ctx, orders.ID, client.EndpointUpdateRequest{EventTypes: &[]string{"invoice.*"}})
	require.NoError(t, err)
	require.Equal(t, []string{"invoice.*"}, changed.EventTypes)
	require.Equal(t, sorted(every.ID, star.ID), subscribers("order.created"))
	require.Equal(t, sorted(orders.ID, every.ID, star.ID, invoices.ID), subscribers("invoice.paid"))

	_, err = c.EndpointUpdate(ctx, orders.ID, client.EndpointUpdateRequest{Disabled: new(true), EventTypes: &[]string{"invoice.paid", "*.paid"}})
	var pe *client.Error
	require.True(t, errors.As(err, &pe), "want *client.Error, got %v", err)
	require.Equal(t, http.StatusUnprocessableEntity, pe.Status)
	require.Equal(t, "event_types[1]", pe.Field)
	got, err := c.EndpointGet(ctx, orders.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"invoice.*"}, got.EventTypes, "the refused change changed nothing")
	require.False(t, got.Disabled)

	var all []string
	back, err := c.EndpointUpdate(ctx, orders.ID, client.EndpointUpdateRequest{EventTypes: &all})
	require.NoError(t, err)
	require.Nil(t, back.EventTypes, "null: every type again")
	require.Equal(t, sorted(orders.ID, every.ID, star.ID), subscribers("order.created"))

	_, err = c.EndpointUpdate(ctx, star.ID, client.EndpointUpdateRequest{Disabled: new(true)})
	require.NoError(t, err)
	require.Equal(t, sorted(orders.ID, every.ID, star.ID), subscribers("order.created"), "a disabled endpoint is still a subscriber: paused, its events wait in its lanes")
	everyOne, err := c.EndpointListAll(ctx, client.EndpointListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, everyOne, 4, "the list keeps disabled endpoints")
}
