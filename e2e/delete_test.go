package e2e

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestDeletingAnEndpointEndsItsLanesSkipped: an endpoint that no one will
// enable again is deleted with DELETE /v1/endpoints/{id}. Its lane with a
// dead letter at the head and two deliveries parked behind it ends: the dead
// letter is skipped as the deleting key's (noted "endpoint deleted"), the
// parked ones end skipped at their attempts, which send nothing, each
// recorded with who deleted it; its sequencer lane moves past them. Routing
// to it stops at once, it answers 404 to every route, and the other
// endpoint's lane of the same correlation gets everything in order.
func TestDeletingAnEndpointEndsItsLanesSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: time.Minute})
	steady := b.subscribe("order.*")
	doomed := b.subscribe("order.*")
	doomed.rcv.fault = func(contract.Envelope, int) string { return "400" }
	corr := b.id("order-21")
	for seq := int64(1); seq <= 3; seq++ {
		b.publish(fmt.Sprintf("%s-%d", corr, seq), corr, seq, "order.updated")
	}
	b.waitDelivery(corr+"-1", doomed.ID, contract.StateDeadLettered, 30*time.Second)
	b.waitDelivery(corr+"-3", steady.ID, contract.StateDelivered, 30*time.Second)

	ops := b.createKey("ops-alice", "endpoints:write", "events:read")
	reader := b.createKey("reader", "events:read")
	require.Equal(t, http.StatusForbidden, b.callAs(reader, http.MethodDelete, "/v1/endpoints/"+doomed.ID, nil, nil), "events:read cannot delete")
	var del struct {
		ID                 string `json:"id"`
		Deleted            bool   `json:"deleted"`
		DeletedBy          string `json:"deleted_by"`
		SkippedDeadLetters int    `json:"skipped_dead_letters"`
	}
	require.Equal(t, http.StatusOK, b.callAs(ops, http.MethodDelete, "/v1/endpoints/"+doomed.ID, nil, &del))
	require.True(t, del.Deleted)
	require.Equal(t, "ops-alice", del.DeletedBy)
	require.Equal(t, 1, del.SkippedDeadLetters, "the lane's head")

	for seq := int64(1); seq <= 3; seq++ {
		b.waitDelivery(fmt.Sprintf("%s-%d", corr, seq), doomed.ID, contract.StateSkipped, 60*time.Second)
	}
	var dl store.DeadLetter
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters/"+corr+"-1?endpoint_id="+doomed.ID, nil, &dl))
	require.Equal(t, store.DeadLetterSkipped, dl.Status, "the dead letter row stays, skipped")
	require.NotNil(t, dl.SkippedBy)
	require.Equal(t, "ops-alice", *dl.SkippedBy)
	require.NotNil(t, dl.SkipNote)
	require.Equal(t, "endpoint deleted", *dl.SkipNote)
	parked, ok := b.fanned(corr + "-2").delivery(doomed.ID)
	require.True(t, ok)
	require.NotEmpty(t, parked.Attempts)
	last := parked.Attempts[len(parked.Attempts)-1]
	require.Equal(t, "deleted", last.Outcome)
	require.NotNil(t, last.Error)
	require.Contains(t, *last.Error, "endpoint deleted by ops-alice")
	require.Zero(t, doomed.rcv.requestsFor(corr+"-2"), "nothing parked is sent once the endpoint is deleted")
	require.Zero(t, doomed.rcv.requestsFor(corr+"-3"))

	// Gone, to every route, as an unknown endpoint is.
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/endpoints/" + doomed.ID},
		{http.MethodGet, "/v1/endpoints/" + doomed.ID + "/stats"},
		{http.MethodPatch, "/v1/endpoints/" + doomed.ID},
		{http.MethodPost, "/v1/endpoints/" + doomed.ID + "/rotate-secret"},
		{http.MethodDelete, "/v1/endpoints/" + doomed.ID},
	} {
		var body any
		if r.method == http.MethodPatch {
			body = map[string]any{"disabled": false}
		}
		require.Equal(t, http.StatusNotFound, b.call(r.method, r.path, body, nil), "%s %s", r.method, r.path)
	}
	var page struct {
		Items []endpoint `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints?limit=500", nil, &page))
	for _, ep := range page.Items {
		require.NotEqual(t, doomed.ID, ep.ID, "not listed")
	}

	// Routing stops: a later event goes to the other subscriber only, and
	// one naming it is refused as naming an unknown endpoint, storing nothing.
	late := b.publish(corr+"-4", corr, 4, "order.updated")
	require.Equal(t, []string{steady.ID}, late.Endpoints())
	code, _ := b.postEvent(b.id("addressed-1"), b.id("order-22"), 1, doomed.ID, map[string]any{})
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/events/"+b.id("addressed-1"), nil, nil))

	b.waitDelivery(corr+"-4", steady.ID, contract.StateDelivered, 30*time.Second)
	require.Equal(t, []int64{1, 2, 3, 4}, steady.rcv.appliedTo(corr))
	var c struct {
		Lanes []struct {
			EndpointID string `json:"endpoint_id"`
			BlockedBy  any    `json:"blocked_by"`
		} `json:"lanes"`
		NextSequence int64 `json:"next_sequence"`
	}
	// The deleted lane's 4 ends skipped at its own attempt, which may come
	// after the steady lane's 4 is delivered.
	waitFor(t, 30*time.Second, "every lane past 1..4, the deleted one by its skips", func() bool {
		return b.call(http.MethodGet, "/v1/correlations/"+corr, nil, &c) == http.StatusOK && c.NextSequence == 5
	})
	for _, l := range c.Lanes {
		require.Nil(t, l.BlockedBy, "lane %s holds nothing back", l.EndpointID)
	}
	steady.rcv.requireClean(t)
	require.Empty(t, doomed.rcv.appliedTo(corr), "it refused 1 and was sent nothing after")
	doomed.rcv.requireClean(t)
}

// TestDeletingAnEndpointDuringAReplayEndsItsDeadLetterSkipped: a dead
// letter replayed into a receiver that now answers 503 is retrying when its
// endpoint is deleted. The replay's next attempt sends nothing and ends the
// delivery skipped, and its dead letter row, which said replayed, says
// skipped, by the deleting key, noted "endpoint deleted": the replay never
// delivered it (on e6735eb the row stayed "replayed" for a delivery that
// ended skipped).
func TestDeletingAnEndpointDuringAReplayEndsItsDeadLetterSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: time.Minute})
	doomed := b.subscribe("order.*")
	var retrying atomic.Bool
	doomed.rcv.fault = func(contract.Envelope, int) string {
		if retrying.Load() {
			return "503"
		}
		return "400"
	}
	corr := b.id("order-23")
	id := corr + "-1"
	b.publish(id, corr, 1, "order.updated")
	b.waitDelivery(id, doomed.ID, contract.StateDeadLettered, 30*time.Second)

	retrying.Store(true)
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", nil, nil))
	waitFor(t, 30*time.Second, "the replay's first attempt answered 503", func() bool {
		d, ok := b.fanned(id).delivery(doomed.ID)
		return ok && len(d.Attempts) >= 2 && d.Attempts[len(d.Attempts)-1].Outcome == "retry"
	})
	var dl store.DeadLetter
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters/"+id+"?endpoint_id="+doomed.ID, nil, &dl))
	require.Equal(t, store.DeadLetterReplayed, dl.Status, "claimed by the replay")

	ops := b.createKey("ops-bob", "endpoints:write", "events:read")
	require.Equal(t, http.StatusOK, b.callAs(ops, http.MethodDelete, "/v1/endpoints/"+doomed.ID, nil, nil))
	b.waitDelivery(id, doomed.ID, contract.StateSkipped, 60*time.Second)
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters/"+id+"?endpoint_id="+doomed.ID, nil, &dl))
	require.Equal(t, store.DeadLetterSkipped, dl.Status, "the replay never delivered it")
	require.NotNil(t, dl.SkippedBy)
	require.Equal(t, "ops-bob", *dl.SkippedBy)
	require.NotNil(t, dl.SkipNote)
	require.Equal(t, contract.EndpointDeletedNote, *dl.SkipNote)
	require.Empty(t, doomed.rcv.appliedTo(corr))
}
