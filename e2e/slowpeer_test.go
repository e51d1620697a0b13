package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/hookflow/hookflow/internal/contract"
)

// Each lane hands over on its own. A slow receiver must
// not pace the other lanes of the events it shares, nor take every worker
// slot.

// slowFront sits in front of a ledger receiver: each request waits delay,
// then the receiver answers it. It counts the requests in flight at once.
type slowFront struct {
	srv      *httptest.Server
	inFlight atomic.Int32
	// peak is the most requests in flight at once.
	peak atomic.Int32
	mu   sync.Mutex
	// answered is when each event's first request was answered.
	answered map[string]time.Time
}

func newSlowFront(t *testing.T, rcv *ledgerReceiver, delay time.Duration) *slowFront {
	f := &slowFront{answered: map[string]time.Time{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			p := f.peak.Load()
			if n <= p || f.peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return
		}
		rcv.serve(w, req)
		f.mu.Lock()
		if id := req.Header.Get("webhook-id"); f.answered[id].IsZero() {
			f.answered[id] = time.Now()
		}
		f.mu.Unlock()
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *slowFront) URL() string { return f.srv.URL + "/webhook" }

// slowSubscriber is an endpoint subscribed to eventTypes whose receiver
// answers each request after delay, with extra settings.
func (b *bundle) slowSubscriber(delay time.Duration, settings map[string]any, eventTypes ...string) (subscriber, *slowFront) {
	b.t.Helper()
	rcv := newLedgerReceiver(b.t)
	front := newSlowFront(b.t, rcv, delay)
	body := map[string]any{"url": front.URL(), "event_types": eventTypes}
	for k, v := range settings {
		body[k] = v
	}
	ep := b.createEndpointWith(body)
	rcv.secret = ep.Secret
	return subscriber{endpoint: ep, rcv: rcv}, front
}

// TestAFastLaneDoesNotWaitForASlowPeer: two endpoints take every event of
// one correlation; one's receiver answers each after 5 s. The fast lane
// delivers all of them, in order, before the slow receiver has answered
// the first: its hand-overs do not wait for the slow lane's attempts (they
// did, and the fast lane moved at the slow one's pace). The slow lane then
// delivers them all in order too.
func TestAFastLaneDoesNotWaitForASlowPeer(t *testing.T) {
	const delay = 5 * time.Second
	b := setup(t, options{timeout: 15 * time.Second})
	fast := b.subscribe("order.*")
	slow, front := b.slowSubscriber(delay, nil, "order.*")
	corr := b.id("order-7")
	id := func(seq int64) string { return fmt.Sprintf("%s-%d", corr, seq) }
	const events = 4
	for seq := int64(1); seq <= events; seq++ {
		ev := b.publish(id(seq), corr, seq, "order.updated")
		require.Len(t, ev.Deliveries, 2)
	}
	waitFor(t, 3*delay, "the fast lane delivers every event", func() bool { return len(fast.rcv.appliedTo(corr)) == events })
	require.Equal(t, []int64{1, 2, 3, 4}, fast.rcv.appliedTo(corr))
	front.mu.Lock()
	_, slowAnswered := front.answered[id(1)]
	front.mu.Unlock()
	require.False(t, slowAnswered, "the fast lane delivered %d events before the slow receiver answered the first", events)

	waitFor(t, (events+2)*delay, "the slow lane delivers every event", func() bool { return len(slow.rcv.appliedTo(corr)) == events })
	require.Equal(t, []int64{1, 2, 3, 4}, slow.rcv.appliedTo(corr))
	fast.rcv.mu.Lock()
	lastFast := fast.rcv.appliedAt[id(events)]
	fast.rcv.mu.Unlock()
	front.mu.Lock()
	firstSlow := front.answered[id(1)]
	front.mu.Unlock()
	require.True(t, lastFast.Before(firstSlow), "fast lane's last delivery %s, slow receiver's first answer %s", lastFast, firstSlow)
	for seq := int64(1); seq <= events; seq++ {
		b.waitDelivery(id(seq), slow.ID, contract.StateDelivered, 10*time.Second)
	}
	fast.rcv.requireClean(t)
	slow.rcv.requireClean(t)
	b.waitCompleted(id(1))
	b.recordHistory(id(1), "event_fast_lane_beside_a_slow_peer_history.json")
}

// TestThreeLanesDeliveredTogetherAreHandedOverTogether: an event whose
// three lanes are released at once and whose receivers answer at once is
// handed over to its sequencer in one Finish: one finished update for the
// three lanes, as before each lane could hand over on its own. The batch
// is 10 s here, not 100 ms: on a loaded machine three receivers that answer
// together can reach the workflow more than 100 ms apart, and what is under
// test is that lanes delivered within the batch go in one hand-over.
func TestThreeLanesDeliveredTogetherAreHandedOverTogether(t *testing.T) {
	b := setup(t, options{handOverBatch: 10 * time.Second})
	subs := []subscriber{b.subscribe("order.*"), b.subscribe("order.*"), b.subscribe("order.*")}
	corr := b.id("order-3")
	ev := b.publish(corr+"-1", corr, 1, "order.updated")
	require.Len(t, ev.Deliveries, 3)
	waitFor(t, 20*time.Second, "the event is delivered", func() bool { return b.fanned(ev.ID).State == contract.StateDelivered })
	b.waitCompleted(ev.ID)
	finishes := 0
	for _, m := range b.localActivities(ev.ID) {
		if m == contract.ActivityFinish {
			finishes++
		}
	}
	require.Equal(t, 1, finishes, "one hand-over for the three lanes")
	for _, s := range subs {
		require.Equal(t, []int64{1}, s.rcv.appliedTo(corr))
		s.rcv.requireClean(t)
	}
	b.recordHistory(ev.ID, "event_three_lanes_released_at_start_history.json")
}

// localActivities are the activity types of the local activities the
// workflow's history records (its markers), in order.
func (b *bundle) localActivities(workflowID string) []string {
	b.t.Helper()
	var out []string
	it := b.client.GetWorkflowHistory(context.Background(), wf(workflowID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b.t, err)
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil {
			continue
		}
		for _, p := range m.GetDetails()["data"].GetPayloads() {
			var d struct {
				ActivityType string `json:"ActivityType"`
			}
			if json.Unmarshal(p.GetData(), &d) == nil && d.ActivityType != "" {
				out = append(out, d.ActivityType)
			}
		}
	}
	return out
}

// TestMaxInFlightCapsASlowReceiver: an endpoint with max_in_flight 1
// whose receiver answers each request after 1.5 s gets the heads of four
// correlations at once: its receiver never sees two requests at once,
// each is delivered (waiting its turn spends no window: the window is
// shorter than the four take together), and another endpoint's events,
// published after them, are all delivered before the slow one is done.
func TestMaxInFlightCapsASlowReceiver(t *testing.T) {
	const delay = 1500 * time.Millisecond
	b := setup(t, options{timeout: 4 * time.Second, window: 5 * time.Second})
	slow, front := b.slowSubscriber(delay, map[string]any{"max_in_flight": 1}, "slow.*")
	require.Equal(t, 1, b.endpointSetting(slow.ID, "max_in_flight"))
	fast := b.subscribe("fast.*")
	const n = 4
	for i := range n {
		corr := b.id(fmt.Sprintf("s%d", i))
		b.publish(corr+"-1", corr, 1, "slow.updated")
	}
	for i := range n {
		corr := b.id(fmt.Sprintf("f%d", i))
		b.publish(corr+"-1", corr, 1, "fast.updated")
	}
	slowDone := func() int {
		d := 0
		for i := range n {
			corr := b.id(fmt.Sprintf("s%d", i))
			d += len(slow.rcv.appliedTo(corr))
		}
		return d
	}
	waitFor(t, 20*time.Second, "the other endpoint delivers every event", func() bool {
		for i := range n {
			if len(fast.rcv.appliedTo(b.id(fmt.Sprintf("f%d", i)))) != 1 {
				return false
			}
		}
		return true
	})
	require.Less(t, slowDone(), n, "the other endpoint did not wait for the capped one")
	waitFor(t, 60*time.Second, "the capped endpoint delivers every event", func() bool { return slowDone() == n })
	for i := range n {
		corr := b.id(fmt.Sprintf("s%d", i))
		b.waitDelivery(corr+"-1", slow.ID, contract.StateDelivered, 10*time.Second)
	}
	require.EqualValues(t, 1, front.peak.Load(), "the receiver never saw two requests at once")
	slow.rcv.requireClean(t)
	fast.rcv.requireClean(t)
	var dls deadLetterPage
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters?endpoint_id="+slow.ID, nil, &dls))
	require.Empty(t, dls.Items, "waiting for a place spends no recovery window")
}

// endpointSetting is one integer setting of the endpoint as GET shows it.
func (b *bundle) endpointSetting(id, name string) int {
	b.t.Helper()
	var ep map[string]any
	require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+id, nil, &ep))
	v, _ := ep[name].(float64)
	return int(v)
}
