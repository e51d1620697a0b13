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

// TestAPayloadThatBreaksItsSchemaReachesNoLane: once order.updated has a
// schema in the catalog, an event whose data breaks it is refused with
// the failing path and reaches no lane (no event, no workflow, nothing at
// the receiver); the producer sends that sequence again, valid, and the
// lane goes on in order, its receiver never waiting on the refused one.
func TestAPayloadThatBreaksItsSchemaReachesNoLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, options{})
	orders := b.subscribe("order.*")
	c := b.newClient(b.cfg.APIToken)
	put, err := c.EventTypePutWithResponse(ctx, "order.updated", nil, client.EventTypePut{
		Description: "An order changed.",
		Schema: map[string]any{"type": "object", "required": []string{"seq"},
			"properties": map[string]any{"seq": map[string]any{"type": "integer", "minimum": 1},
				"lines": map[string]any{"type": "array", "items": map[string]any{"type": "object", "required": []string{"sku"}}}}},
	})
	require.NoError(t, err)
	require.NotNil(t, put.JSON201, string(put.Body))
	require.EqualValues(t, 1, put.JSON201.Version)

	corr := b.id("catalog")
	post := func(id string, seq int64, data map[string]any) error {
		_, err := c.Send(ctx, client.EventCreate{ID: id, CorrelationID: corr, Sequence: seq, Type: "order.updated", Data: data})
		return err
	}
	require.NoError(t, post(corr+"-1", 1, map[string]any{"seq": 1}))
	err = post(corr+"-2", 2, map[string]any{"seq": 2, "lines": []any{map[string]any{"sku": "a"}, map[string]any{"qty": 1}}})
	var p *client.Error
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, string(p.Body))
	require.Equal(t, "https://hookflow.dev/problems/schema-violation", p.Type)
	require.Equal(t, "data.lines[1]", p.Field)
	require.JSONEq(t, `"order.updated"`, string(p.Extensions["event_type"]))
	require.JSONEq(t, `1`, string(p.Extensions["schema_version"]))
	_, err = c.EventGetWithResponse(ctx, corr+"-2", nil)
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusNotFound, p.Status, "nothing stored")
	_, err = b.client.DescribeWorkflowExecution(ctx, wf(corr+"-2"), "")
	require.Error(t, err, "no workflow was started")

	require.NoError(t, post(corr+"-2", 2, map[string]any{"seq": 2, "lines": []any{map[string]any{"sku": "a"}}}),
		"the same id and sequence, valid this time")
	require.NoError(t, post(corr+"-3", 3, map[string]any{"seq": 3}))
	for _, id := range []string{corr + "-1", corr + "-2", corr + "-3"} {
		b.waitDelivery(id, orders.ID, contract.StateDelivered, time.Minute)
	}
	require.Equal(t, []int64{1, 2, 3}, orders.rcv.appliedTo(corr))
	orders.rcv.requireClean(t)
}
