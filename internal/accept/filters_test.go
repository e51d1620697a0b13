package accept_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/store"
)

// setFilter gives endpoint id the filter raw (nil removes it).
func (b *bundle) setFilter(id string, raw string) {
	b.t.Helper()
	f := json.RawMessage(raw)
	if raw == "" {
		f = nil
	}
	_, err := b.st.EndpointUpdate(context.Background(), id, store.EndpointChange{Filter: &f})
	require.NoError(b.t, err)
}

// An endpoint's filter decides, at acceptance, whether it takes an event
// its types route to it: the event is stored with the endpoints that took
// it (its deliveries) and those whose filter left it out, and the ledger
// reads both back. A change of filter applies to the events accepted
// after it; an event addressed to the endpoint is not filtered.
func TestAcceptAppliesFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.acceptor(accept.Config{})
	ctx := context.Background()
	b.setFilter("ep_2", `{"data":{"amount":{"$gte":1000}}}`)

	o := b.offer(a, request("small", "c", 1, "", `{"amount":10}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.Equal(t, []string{"ep_1"}, o.Stored.Endpoints)
	require.Equal(t, []string{"ep_2"}, o.Stored.FilteredOut)
	ev, err := b.st.EventGet(ctx, "small")
	require.NoError(t, err)
	require.Equal(t, []string{"ep_1"}, ev.Endpoints)
	require.Equal(t, []string{"ep_2"}, ev.FilteredOut)

	o = b.offer(a, request("large", "c", 2, "", `{"amount":1000}`))
	require.Equal(t, []string{"ep_1", "ep_2"}, o.Stored.Endpoints)
	require.Empty(t, o.Stored.FilteredOut)

	// Addressed to the filtered endpoint: it takes it.
	o = b.offer(a, request("direct", "c", 3, "ep_2", `{"amount":1}`))
	require.Equal(t, []string{"ep_2"}, o.Stored.Endpoints)
	require.Empty(t, o.Stored.FilteredOut)

	// Both filtered: stored, routed nowhere, both named.
	b.setFilter("ep_1", `{"metadata":{"region":"eu"}}`)
	o = b.offer(a, request("none", "c", 4, "", `{"amount":5}`))
	require.Equal(t, accept.Accepted, o.Kind)
	require.Empty(t, o.Stored.Endpoints)
	require.Equal(t, []string{"ep_1", "ep_2"}, o.Stored.FilteredOut)

	// Metadata is matched, kept with the event, and part of its content.
	req := request("eu", "c", 5, "", `{"amount":5}`)
	req.Event.Metadata = json.RawMessage(`{ "region": "eu", "plan":"pro" }`)
	o = b.offer(a, req)
	require.Equal(t, []string{"ep_1"}, o.Stored.Endpoints)
	require.Equal(t, []string{"ep_2"}, o.Stored.FilteredOut)
	ev, err = b.st.EventGet(ctx, "eu")
	require.NoError(t, err)
	require.JSONEq(t, `{"region":"eu","plan":"pro"}`, string(ev.Metadata))
	require.Equal(t, accept.Repost, b.offer(a, req).Kind, "the same event again")
	req.Event.Metadata = json.RawMessage(`{"region":"us"}`)
	require.Equal(t, accept.KeyReused, b.offer(a, req).Kind, "the same id with other metadata is another event")

	// The filter removed: the next event goes to ep_2 whatever it holds.
	b.setFilter("ep_2", "")
	o = b.offer(a, request("after", "c", 6, "", `{"amount":1}`))
	require.Equal(t, []string{"ep_2"}, o.Stored.Endpoints)
	require.Equal(t, []string{"ep_1"}, o.Stored.FilteredOut)
	ev, err = b.st.EventGet(ctx, "small")
	require.NoError(t, err)
	require.Equal(t, []string{"ep_2"}, ev.FilteredOut, "an event accepted before the change keeps its routing")
}

// A stored filter that does not compile (a language that has since grown
// stricter) refuses the event with an error rather than guess either way:
// nothing is stored.
func TestAcceptRefusesOnAFilterThatNoLongerCompiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.acceptor(accept.Config{})
	_, err := b.st.Pool().Exec(context.Background(), `UPDATE endpoints SET filter = '{"data":{"amount":{"$near":1}}}' WHERE id = 'ep_2'`)
	require.NoError(t, err)
	_, err = a.Accept(context.Background(), b.st, request("e-1", "c", 1, "", `{"amount":1}`))
	require.ErrorContains(t, err, "endpoint ep_2's filter")
	require.False(t, b.stored("e-1"))
}
