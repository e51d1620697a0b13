package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/eventtypes"
	"github.com/hookflow/hookflow/internal/store"
)

func endpointIDs(eps []store.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.ID
	}
	return out
}

// TestEndpointEventTypes: the patterns are stored as given, a change that
// leaves them out keeps them, a change to nil subscribes the endpoint to
// every type again, and an empty list is refused by the schema itself.
func TestEndpointEventTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	ep, err := st.EndpointInsert(ctx, "typed", "https://example.com/t", "whsec_x", []string{"order.*", "user.deleted"})
	require.NoError(t, err)
	require.Equal(t, []string{"order.*", "user.deleted"}, ep.EventTypes)
	got, err := st.EndpointGet(ctx, "typed")
	require.NoError(t, err)
	require.Equal(t, []string{"order.*", "user.deleted"}, got.EventTypes)
	all, err := st.EndpointGet(ctx, "ep")
	require.NoError(t, err)
	require.Nil(t, all.EventTypes, "an endpoint registered without types has none: every type")

	url := "https://example.com/moved"
	ep, err = st.EndpointUpdate(ctx, "typed", store.EndpointChange{URL: &url})
	require.NoError(t, err)
	require.Equal(t, url, ep.URL)
	require.Equal(t, []string{"order.*", "user.deleted"}, ep.EventTypes, "left out: unchanged")

	ep, err = st.EndpointUpdate(ctx, "typed", store.EndpointChange{EventTypes: &[]string{"invoice.paid"}})
	require.NoError(t, err)
	require.Equal(t, []string{"invoice.paid"}, ep.EventTypes)
	require.Equal(t, url, ep.URL)

	var every []string
	ep, err = st.EndpointUpdate(ctx, "typed", store.EndpointChange{EventTypes: &every})
	require.NoError(t, err)
	require.Nil(t, ep.EventTypes, "nil: every type again")
	var isNull bool
	require.NoError(t, st.Pool().QueryRow(ctx, "SELECT event_types IS NULL FROM endpoints WHERE id = 'typed'").Scan(&isNull))
	require.True(t, isNull)

	_, err = st.EndpointInsert(ctx, "empty", "https://example.com/e", "whsec_x", []string{})
	require.ErrorContains(t, err, "endpoints_event_types_valid", "an empty list is no subscription: refused")
	_, err = st.EndpointUpdate(ctx, "typed", store.EndpointChange{EventTypes: &[]string{}})
	require.ErrorContains(t, err, "endpoints_event_types_valid")
}

// TestEndpointsListPages: pages in id order, each after the last id of the
// one before, give every endpoint once.
func TestEndpointsListPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	want := []string{"ep", "a", "b", "c"} // newStore's
	for i := range 7 {
		id := fmt.Sprintf("ep_%02d", i)
		_, err := st.EndpointInsert(ctx, id, "https://example.com/"+id, "whsec_x", nil)
		require.NoError(t, err)
		want = append(want, id)
	}
	slices.Sort(want)

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the pages end")
		page, err := st.EndpointsList(ctx, after, 3)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 3)
		if len(page) == 0 {
			break
		}
		got = append(got, endpointIDs(page)...)
		after = page[len(page)-1].ID
	}
	require.Equal(t, want, got)

	last, err := st.EndpointsList(ctx, want[len(want)-1], 3)
	require.NoError(t, err)
	require.Empty(t, last)
}

// TestEndpointsSubscribedAgreesWithMatches holds the SQL of
// EndpointsSubscribed to eventtypes.Matches on the table both are tested
// against: for every type of the table, the endpoints the query returns are
// those Matches picks, disabled ones included (a disabled endpoint is
// paused: its events wait in its lanes).
func TestEndpointsSubscribedAgreesWithMatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	raw, err := os.ReadFile("../eventtypes/testdata/matches.json")
	require.NoError(t, err)
	var cases []struct {
		Patterns []string `json:"patterns"`
		Type     string   `json:"type"`
		Match    bool     `json:"match"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)

	patterns := map[string][]string{"ep": nil, "a": nil, "b": nil, "c": nil} // newStore's
	var types []string
	for i, c := range cases {
		id := fmt.Sprintf("case_%02d", i)
		_, err := st.EndpointInsert(ctx, id, "https://example.com/"+id, "whsec_x", c.Patterns)
		require.NoError(t, err)
		patterns[id] = c.Patterns
		off := id + "_disabled"
		_, err = st.EndpointInsert(ctx, off, "https://example.com/"+off, "whsec_x", c.Patterns)
		require.NoError(t, err)
		require.NoError(t, st.EndpointDisable(ctx, off, "test"))
		patterns[off] = c.Patterns
		if !slices.Contains(types, c.Type) {
			types = append(types, c.Type)
		}
	}

	for _, typ := range types {
		var want []string
		for id, ps := range patterns {
			if eventtypes.Matches(ps, typ) {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		got, err := st.EndpointsSubscribed(ctx, typ, 1000)
		require.NoError(t, err)
		require.Equal(t, want, subscriberIDs(got), "subscribers of %q", typ)
	}
	for i, c := range cases {
		subs, err := st.EndpointsSubscribed(ctx, c.Type, 1000)
		require.NoError(t, err)
		got := subscriberIDs(subs)
		require.Equal(t, c.Match, slices.Contains(got, fmt.Sprintf("case_%02d", i)), "%q against %q", c.Patterns, c.Type)
		require.Equal(t, c.Match, slices.Contains(got, fmt.Sprintf("case_%02d_disabled", i)), "%q against %q, disabled", c.Patterns, c.Type)
	}

	none, err := st.EndpointsSubscribed(ctx, "nobody.listens", 1000)
	require.NoError(t, err)
	require.NotEmpty(t, none)
	for _, id := range subscriberIDs(none) {
		ps := patterns[id]
		require.True(t, ps == nil || slices.Contains(ps, eventtypes.All),
			"a type no pattern names goes only to the endpoints of every type, not %s %q", id, ps)
	}
}

// TestEndpointCreateCap: creations racing at the cap pass it together
// never: of 10 concurrent creates with room for 2, exactly 2 succeed and
// the others answer ErrEndpointLimit. A deleted endpoint frees its place.
func TestEndpointCreateCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t) // 4 endpoints
	const max = 6
	errs := createRace(10, func(i int) error {
		_, err := st.EndpointCreate(ctx, store.Endpoint{ID: fmt.Sprintf("race_%d", i), URL: "https://example.com/r", Secret: "whsec_x"}, store.Caps{Endpoints: max})
		return err
	})
	created := 0
	for _, err := range errs {
		if err == nil {
			created++
			continue
		}
		require.ErrorIs(t, err, store.ErrEndpointLimit)
	}
	require.Equal(t, 2, created)
	require.NoError(t, st.EndpointDelete(ctx, "a", "test"))
	_, err := st.EndpointCreate(ctx, store.Endpoint{ID: "after_delete", URL: "https://example.com/r", Secret: "whsec_x"}, store.Caps{Endpoints: max})
	require.NoError(t, err, "a deleted endpoint does not count")
}

// TestRouteCap: an event more endpoints subscribe to than the cap is
// ErrTooManySubscribers; at the cap it is routed to each.
func TestRouteCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t) // 4 endpoints of every type
	ev := event("e-1", "c", 1)
	_, eps, err := st.Route(ctx, ev, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "ep"}, subscriberIDs(eps))
	_, _, err = st.Route(ctx, ev, 3)
	require.ErrorIs(t, err, store.ErrTooManySubscribers)
	ev.EndpointID = "a"
	_, eps, err = st.Route(ctx, ev, 1)
	require.NoError(t, err, "an addressed event has one lane")
	require.Equal(t, []store.Subscriber{{ID: "a"}}, eps)
}

// subscriberIDs are the ids of subs, in order.
func subscriberIDs(subs []store.Subscriber) []string {
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.ID
	}
	return ids
}

// TestEndpointSubscriberCap: creations racing for the last places on a
// type pass the cap together never, and a change of event_types is judged
// as a creation is (its own endpoint not counted). Endpoints that share no
// type are not added up.
func TestEndpointSubscriberCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t) // 4 endpoints of every type
	caps := store.Caps{Subscribers: 6}
	errs := createRace(10, func(i int) error {
		_, err := st.EndpointCreate(ctx, store.Endpoint{ID: fmt.Sprintf("sub_%d", i), URL: "https://example.com/r", Secret: "whsec_x", EventTypes: []string{"order.*"}}, caps)
		return err
	})
	created := 0
	for _, err := range errs {
		if err == nil {
			created++
			continue
		}
		var se *store.SubscribersError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, store.ErrTooManySubscribers)
		require.Equal(t, store.SubscribersError{Others: 6, Max: 6}, *se)
	}
	require.Equal(t, 2, created)
	_, err := st.EndpointCreate(ctx, store.Endpoint{ID: "inv", URL: "https://example.com/i", Secret: "whsec_x", EventTypes: []string{"invoice.paid"}}, caps)
	require.NoError(t, err, "invoice.paid has 4 subscribers besides")
	_, err = st.EndpointCreate(ctx, store.Endpoint{ID: "inv2", URL: "https://example.com/i", Secret: "whsec_x", EventTypes: []string{"invoice.*"}}, caps)
	require.NoError(t, err, "invoice.paid has 5 subscribers besides")
	_, err = st.EndpointUpdate(ctx, "inv", store.EndpointChange{EventTypes: &[]string{"order.created"}, MaxSubscribers: 6})
	require.ErrorIs(t, err, store.ErrTooManySubscribers)
	_, err = st.EndpointUpdate(ctx, "inv", store.EndpointChange{EventTypes: &[]string{"invoice.*"}, MaxSubscribers: 6})
	require.NoError(t, err, "its own subscription is not counted against it")
	_, err = st.EndpointUpdate(ctx, "inv", store.EndpointChange{EventTypes: &[]string{"order.created"}})
	require.NoError(t, err, "no cap given, none checked")
}

// createRace runs n creates at once and returns their errors.
func createRace(n int, create func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = create(i)
		}()
	}
	wg.Wait()
	return errs
}
