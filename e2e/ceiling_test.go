package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/webhook"
)

// longID is a 255-character identifier (the most the contract allows)
// that starts with prefix and is unique by i.
func longID(prefix string, i int) string {
	head := fmt.Sprintf("%s-%04d-", prefix, i)
	return head + strings.Repeat("x", 255-len(head))
}

// TestSubscriberCeilingHeldByAGapSurvivesASequencerTerminate (the
// subscriber ceiling, at its largest): 250 endpoints with 255-character
// IDs, each with a receiver of its own, subscribe to one type; in one
// correlation with a 255-character ID, events 2..N (255-character IDs)
// are posted first and held behind the missing 1; each is a workflow
// (accepted events are, from acceptance), however many lanes and however
// long their IDs. Then an operator presses Terminate on the correlation's
// sequencer, and 1 is posted: the fresh sequencer loads the held lanes from
// the ledger, within its byte budgets, and every receiver applies every
// event once and in order, each envelope's previous_sequence the one its
// compare-and-swap expects.
//
// It is the package's heaviest test (3,000 deliveries), yet not one that
// takes the machine: alone on 2 cores its process (the Temporal server
// with it) used 0.7 of a core over its 98 s, the rest waiting on
// Postgres and the deliveries' round trips. So it runs beside the others
// rather than alone before them, and its waits are for outcomes, with
// minutes to spare.
func TestSubscriberCeilingHeldByAGapSurvivesASequencerTerminate(t *testing.T) {
	t.Parallel()
	const lanes, events = contract.MaxSubscribersCeiling, 12
	b := setup(t, options{maxSubscribers: lanes})
	ctx := context.Background()
	typ := "ceiling." + b.prefix
	rcvs := map[string]*ledgerReceiver{}
	var eps []string
	for i := range lanes {
		rcv := newLedgerReceiver(t)
		secret, err := webhook.NewSecret()
		require.NoError(t, err)
		rcv.secret = secret
		// The API names endpoints itself; the store takes any ID the
		// contract allows (one imported, or named by an earlier version),
		// and the lane key carries it whole.
		ep, err := b.store.EndpointInsert(ctx, longID(b.prefix, i), rcv.URL(), secret, []string{typ})
		require.NoError(t, err)
		require.Len(t, ep.ID, 255)
		rcvs[ep.ID] = rcv
		eps = append(eps, ep.ID)
	}
	corr := longID(b.prefix+"-corr", 0)
	id := func(seq int64) string { return longID(b.prefix+"-evt", int(seq)) }

	began := time.Now()
	for seq := int64(2); seq <= events; seq++ {
		ev := b.publish(id(seq), corr, seq, typ)
		require.Len(t, ev.Deliveries, lanes)
	}
	// Every accepted event is a workflow, held: started by the post, or by
	// the queued sweep when the post's start ran out of time.
	for seq := int64(2); seq <= events; seq++ {
		waitFor(t, 5*time.Minute, fmt.Sprintf("the workflow of held event %d", seq), func() bool {
			_, err := b.client.DescribeWorkflowExecution(ctx, wf(id(seq)), "")
			return err == nil
		})
	}
	t.Logf("FIGURE %d held events of %d lanes posted and started in %s", events-1, lanes, time.Since(began).Round(time.Millisecond))
	for _, ep := range eps {
		require.Empty(t, rcvs[ep].appliedTo(corr), "held behind the missing 1")
	}
	// An operator finds them by correlation, whatever their workflow IDs.
	waitFor(t, 5*time.Minute, "the held events listed under their CorrelationId", func() bool {
		return len(b.visible(fmt.Sprintf("CorrelationId = '%s' AND WorkflowType = 'EventWorkflow'", corr))) == events-1
	})

	seqID := contract.SequencerID(store.DefaultTenant, corr)
	require.NoError(t, b.client.TerminateWorkflow(ctx, seqID, "", "pressed Terminate in the Web UI"))
	began = time.Now()
	b.publish(id(1), corr, 1, typ)

	want := make([]int64, 0, events)
	for seq := int64(1); seq <= events; seq++ {
		want = append(want, seq)
	}
	waitFor(t, 10*time.Minute, "every lane applied every event", func() bool {
		for _, ep := range eps {
			rcvs[ep].requireClean(t) // a breach ends the wait at once
			if len(rcvs[ep].appliedTo(corr)) < events {
				return false
			}
		}
		return true
	})
	t.Logf("FIGURE %d lanes applied %d events each, %s after 1 was posted", lanes, events, time.Since(began).Round(time.Millisecond))
	// The receiver's compare-and-swap on previous_sequence refuses (and
	// records) anything out of order, and applies an event once.
	for _, ep := range eps {
		require.Equal(t, want, rcvs[ep].appliedTo(corr), "lane %.16s…", ep)
	}
	// What the fresh sequencer and an event's workflow gave Temporal (a
	// load's marker, an update's answer, a start's input) stayed under the
	// budget, far from Temporal's 2 MiB blob limit.
	for what, wid := range map[string]string{"fresh sequencer": seqID, "event 1's workflow": wf(id(1))} {
		size, kind := b.largestHistoryEvent(wid)
		t.Logf("FIGURE %s: largest history event %s, %d bytes", what, kind, size)
		require.Less(t, size, contract.MaxPayloadBytes, what)
	}
}

// largestHistoryEvent is the size and type of the largest event in the
// history of the latest run of workflow id.
func (b *bundle) largestHistoryEvent(id string) (int, string) {
	b.t.Helper()
	it := b.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	size, kind := 0, ""
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b.t, err)
		if n := proto.Size(ev); n > size {
			size, kind = n, ev.GetEventType().String()
		}
	}
	return size, kind
}
