package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/catalog"
	"github.com/hookflow/hookflow/internal/store"
)

// checked is e as catalog.Check passes it to the store: its schema and
// example written canonically.
func checked(t *testing.T, e catalog.Entry) catalog.Entry {
	t.Helper()
	e, fe := catalog.Check("name", "description", "", e)
	require.Nil(t, fe)
	return e
}

// TestEventTypePutVersions: a new type is created at version 1, the same
// content again (written differently) leaves it as it is, a change of
// schema, description or example raises the version by one, and delete
// removes it. The schema is kept as the text it was put as.
func TestEventTypePutVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	e := checked(t, catalog.Entry{Name: "order.paid", Description: "paid", Schema: json.RawMessage(`{"type":"object","required":["id"],"maxProperties":1e99}`)})
	got, res, err := st.EventTypePut(ctx, e, 0)
	require.NoError(t, err)
	require.Equal(t, store.Created, res)
	require.Equal(t, 1, got.Version)
	require.Nil(t, got.Example)

	e = checked(t, catalog.Entry{Name: e.Name, Description: e.Description, Schema: json.RawMessage(`{ "required" : ["id"], "type" : "object", "maxProperties" : 1e99 }`)})
	again, res, err := st.EventTypePut(ctx, e, 0)
	require.NoError(t, err)
	require.Equal(t, store.Unchanged, res, "the same schema, keys reordered, is no change")
	require.Equal(t, 1, again.Version)
	require.Equal(t, got.UpdatedAt, again.UpdatedAt)

	e.Description = "paid, at last"
	got, res, err = st.EventTypePut(ctx, e, 0)
	require.NoError(t, err)
	require.Equal(t, store.Updated, res)
	require.Equal(t, 2, got.Version)
	e.Example = json.RawMessage(`{"id":"1"}`)
	got, res, err = st.EventTypePut(ctx, e, 0)
	require.NoError(t, err)
	require.Equal(t, store.Updated, res)
	require.Equal(t, 3, got.Version)
	require.JSONEq(t, `{"id":"1"}`, string(got.Example))

	sch, err := st.EventTypeSchema(ctx, "order.paid")
	require.NoError(t, err)
	require.Equal(t, 3, sch.Version)
	require.Equal(t, `{"maxProperties":1e99,"required":["id"],"type":"object"}`, string(sch.Schema))
	_, err = st.EventTypeSchema(ctx, "order.unknown")
	require.ErrorIs(t, err, store.ErrNotFound)

	// Another tenant's catalog is its own: the name is free there.
	_, _, err = st.TenantPut(ctx, store.Tenant{ID: "other-catalog"})
	require.NoError(t, err)
	other := st.Tenant("other-catalog")
	_, err = other.EventTypeGet(ctx, "order.paid")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = other.EventTypeDelete(ctx, "order.paid")
	require.ErrorIs(t, err, store.ErrNotFound)

	deleted, err := st.EventTypeDelete(ctx, "order.paid")
	require.NoError(t, err)
	require.Equal(t, 3, deleted.Version, "the entry as it was")
	_, err = st.EventTypeGet(ctx, "order.paid")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.EventTypeDelete(ctx, "order.paid")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestEventTypesPutAllOrNothing: past the cap, a batch stores nothing,
// not even its entries that fit; pages list every entry once.
func TestEventTypesPutAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	entry := func(i int) catalog.Entry {
		return catalog.Entry{Name: fmt.Sprintf("t.%02d", i), Schema: json.RawMessage(`true`)}
	}
	_, _, err := st.EventTypesPut(ctx, []catalog.Entry{entry(0), entry(1), entry(2)}, 3)
	require.NoError(t, err)
	_, _, err = st.EventTypesPut(ctx, []catalog.Entry{entry(1), entry(3)}, 3)
	require.ErrorIs(t, err, store.ErrCatalogFull)
	_, err = st.EventTypeGet(ctx, "t.03")
	require.ErrorIs(t, err, store.ErrNotFound, "a refused batch stores none of its entries")
	_, res, err := st.EventTypesPut(ctx, []catalog.Entry{entry(1), entry(2)}, 3)
	require.NoError(t, err, "updates at the cap add no entry")
	require.Equal(t, []store.PutResult{store.Unchanged, store.Unchanged}, res)

	_, _, err = st.EventTypesPut(ctx, []catalog.Entry{entry(3), entry(4), entry(5), entry(6)}, 0)
	require.NoError(t, err)
	var names []string
	after := ""
	for {
		page, err := st.EventTypesList(ctx, after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			names = append(names, e.Name)
		}
		after = page[len(page)-1].Name
	}
	require.Equal(t, []string{"t.00", "t.01", "t.02", "t.03", "t.04", "t.05", "t.06"}, names)
}

// TestEventTypeListPagesByName: the types seen are listed from the first
// name after the page's last, for the tenant and for a store limited to
// some endpoints alike (the API merges them with the catalog's page).
func TestEventTypeListPagesByName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i, typ := range []string{"a.one", "b.two", "c.three"} {
		e := event(fmt.Sprintf("e-%d", i), "k", int64(i+1))
		e.Type = typ
		_, ok, err := st.EventInsertRouted(ctx, e, []string{"ep"}, nil)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for _, s := range []*store.Store{st, st.OnlyEndpoints([]string{"ep"})} {
		types, err := s.EventTypeList(ctx, "a.one", 4096, 10)
		require.NoError(t, err)
		var names []string
		for _, ty := range types {
			names = append(names, ty.Type)
		}
		require.Equal(t, []string{"b.two", "c.three"}, names)
	}
}
