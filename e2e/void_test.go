package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestVoidingASequenceTheProducerLostFreesEveryLane: a producer posts 1, 2
// and 5 and loses 3 and 4, so 5 waits in both lanes for ever. An operator
// voids 3 and 4 (POST /v1/correlations/{id}/skip): a key without
// dead-letters:write may not, a sequence that arrived refuses the whole
// request and voids nothing, and then 5 goes to both lanes with 3 and 4 in
// its skipped_sequences. A later post of 3 is refused (409) and delivered
// nowhere; a repeat of the void changes nothing; the correlation lists the
// voided sequences, and the tombstones record who voided them and why.
func TestVoidingASequenceTheProducerLostFreesEveryLane(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: time.Minute})
	a := b.subscribe("order.*")
	c := b.subscribe("order.*")
	var mu sync.Mutex
	envelopes := map[string]contract.Envelope{}
	capture := func(name string) func(contract.Envelope, int) string {
		return func(ev contract.Envelope, _ int) string {
			mu.Lock()
			defer mu.Unlock()
			envelopes[name+"/"+ev.ID] = ev
			return ""
		}
	}
	a.rcv.fault, c.rcv.fault = capture("a"), capture("c")
	corr := b.id("order-31")
	for _, seq := range []int64{1, 2, 5} {
		b.publish(fmt.Sprintf("%s-%d", corr, seq), corr, seq, "order.updated")
	}
	b.waitDelivery(corr+"-2", a.ID, contract.StateDelivered, 30*time.Second)
	b.waitDelivery(corr+"-2", c.ID, contract.StateDelivered, 30*time.Second)
	var before struct {
		Missing *int64 `json:"missing"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/correlations/"+corr, nil, &before))
	require.NotNil(t, before.Missing)
	require.EqualValues(t, 3, *before.Missing)

	reader := b.createKey("reader", "events:read")
	ops := b.createKey("ops-bob", "dead-letters:write", "events:read")
	body := map[string]any{"sequences": []int64{4, 3}, "note": "lost in the producer's outage"}
	require.Equal(t, http.StatusForbidden, b.callAs(reader, http.MethodPost, "/v1/correlations/"+corr+"/skip", body, nil))
	var refused struct {
		Type    string  `json:"type"`
		Field   string  `json:"field"`
		Arrived []int64 `json:"arrived"`
	}
	require.Equal(t, http.StatusUnprocessableEntity, b.callAs(ops, http.MethodPost, "/v1/correlations/"+corr+"/skip",
		map[string]any{"sequences": []int64{2, 3}}, &refused))
	require.Equal(t, "sequences", refused.Field)
	require.Equal(t, []int64{2}, refused.Arrived)
	for _, bad := range []map[string]any{{"sequences": []int64{}}, {"sequences": []int64{0}}, {"sequences": []int64{3}, "extra": 1}} {
		code := b.callAs(ops, http.MethodPost, "/v1/correlations/"+corr+"/skip", bad, nil)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, code, "%v", bad)
	}
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/events/"+contract.VoidedID(corr, 3), nil, nil), "a refused void stores nothing")

	var voided struct {
		Voided        []int64 `json:"voided"`
		AlreadyVoided []int64 `json:"already_voided"`
		VoidedBy      string  `json:"voided_by"`
	}
	require.Equal(t, http.StatusOK, b.callAs(ops, http.MethodPost, "/v1/correlations/"+corr+"/skip", body, &voided))
	require.Equal(t, []int64{3, 4}, voided.Voided)
	require.Empty(t, voided.AlreadyVoided)
	require.Equal(t, "ops-bob", voided.VoidedBy)

	b.waitDelivery(corr+"-5", a.ID, contract.StateDelivered, 30*time.Second)
	b.waitDelivery(corr+"-5", c.ID, contract.StateDelivered, 30*time.Second)
	require.Equal(t, []int64{1, 2, 5}, a.rcv.appliedTo(corr))
	require.Equal(t, []int64{1, 2, 5}, c.rcv.appliedTo(corr))
	mu.Lock()
	for _, name := range []string{"a", "c"} {
		ev := envelopes[name+"/"+corr+"-5"]
		require.EqualValues(t, 2, ev.PreviousSequence, name)
		require.Equal(t, []int64{3, 4}, ev.SkippedSequences, "%s is told 3 and 4 will never come", name)
	}
	mu.Unlock()

	// A late 3 is refused, and goes nowhere.
	var late struct {
		Detail string `json:"detail"`
	}
	require.Equal(t, http.StatusConflict, b.call(http.MethodPost, "/v1/events", map[string]any{
		"id": corr + "-3", "correlation_id": corr, "sequence": 3, "type": "order.updated", "data": map[string]any{},
	}, &late))
	require.Contains(t, late.Detail, "voided")
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/events/"+corr+"-3", nil, nil))
	require.Equal(t, http.StatusOK, b.callAs(ops, http.MethodPost, "/v1/correlations/"+corr+"/skip", body, &voided))
	require.Empty(t, voided.Voided, "a repeat voids nothing more")
	require.Equal(t, []int64{3, 4}, voided.AlreadyVoided)

	var after struct {
		NextSequence int64   `json:"next_sequence"`
		Voided       []int64 `json:"voided"`
		Missing      *int64  `json:"missing"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/correlations/"+corr, nil, &after))
	require.EqualValues(t, 6, after.NextSequence)
	require.Equal(t, []int64{3, 4}, after.Voided)
	require.Nil(t, after.Missing)
	var tomb struct {
		Type       string         `json:"type"`
		State      contract.State `json:"state"`
		Deliveries []any          `json:"deliveries"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/events/"+contract.VoidedID(corr, 3), nil, &tomb))
	require.Equal(t, contract.VoidedType, tomb.Type)
	require.Equal(t, contract.StateSkipped, tomb.State)
	require.Empty(t, tomb.Deliveries)
	stored, err := b.store.EventGet(context.Background(), contract.VoidedID(corr, 4))
	require.NoError(t, err)
	var record map[string]string
	require.NoError(t, json.Unmarshal(stored.Data, &record))
	require.Equal(t, "ops-bob", record["voided_by"])
	require.Equal(t, "lost in the producer's outage", record["note"])
	require.NotEmpty(t, record["voided_at"])

	// The lanes go on: 6 follows 5 with nothing skipped.
	b.publish(corr+"-6", corr, 6, "order.updated")
	b.waitDelivery(corr+"-6", a.ID, contract.StateDelivered, 30*time.Second)
	b.waitDelivery(corr+"-6", c.ID, contract.StateDelivered, 30*time.Second)
	mu.Lock()
	require.EqualValues(t, 5, envelopes["a/"+corr+"-6"].PreviousSequence)
	require.Empty(t, envelopes["a/"+corr+"-6"].SkippedSequences)
	mu.Unlock()
	a.rcv.requireClean(t)
	c.rcv.requireClean(t)
}
