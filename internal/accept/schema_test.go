package accept_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/catalog"
)

const orderUpdatedSchema = `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"},
  "lines":{"type":"array","items":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}}}}`

// An event whose data breaks its type's schema is refused with the path
// and stored nowhere, and starts nothing; a valid one is accepted; a type
// without an entry passes; the same event accepted before its schema
// changed is still answered as a repost.
func TestAcceptValidatesAgainstTheCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.acceptor(accept.Config{})

	o := b.offer(a, request("before", "c", 1, "", `{"n":"one"}`))
	require.Equal(t, accept.Accepted, o.Kind, "no entry yet: accepted as before")

	_, _, err := b.st.EventTypePut(ctx, catalog.Entry{Name: "order.updated", Schema: json.RawMessage(orderUpdatedSchema)}, 0)
	require.NoError(t, err)

	o = b.offer(a, request("bad", "c", 2, "", `{"n":2,"lines":[{"sku":"a"},{"sku":7}]}`))
	require.Equal(t, accept.SchemaInvalid, o.Kind)
	require.Equal(t, "data.lines[1].sku", o.Violation.Field.Field)
	require.Equal(t, "order.updated", o.Violation.Type)
	require.Equal(t, 1, o.Violation.Version)
	require.False(t, b.stored("bad"), "a refused event is stored nowhere")
	require.Equal(t, []string{"before"}, b.starter.calls(), "and starts no workflow")
	hw, err := b.st.CorrelationHighWater(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 1, hw)

	o = b.offer(a, request("good", "c", 2, "", `{"n":2,"lines":[{"sku":"a"}]}`))
	require.Equal(t, accept.Accepted, o.Kind)

	o = b.offer(a, request("before", "c", 1, "", `{"n":"one"}`))
	require.Equal(t, accept.Repost, o.Kind, "accepted before the schema: a repost, not a violation")
	o = b.offer(a, request("before", "c", 1, "", `{"n":"two"}`))
	require.Equal(t, accept.SchemaInvalid, o.Kind, "other content under the id is judged as any new event")

	_, err = b.st.EventTypeDelete(ctx, "order.updated")
	require.NoError(t, err)
	o = b.offer(a, request("bad", "c", 3, "", `{"n":"three"}`))
	require.Equal(t, accept.Accepted, o.Kind, "entry deleted: the type passes as before")
}
