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

// slowFront sits in front of a ledger receiver: each request waits until
// the test opens its gate, then the receiver answers it. The receiver is
// slow by the test's say, not by a duration: what the test proves holds
// however long a loaded machine takes over the rest. It counts the requests
// in flight at once, and those whose sender gave up before the answer.
type slowFront struct {
	srv  *httptest.Server
	gate chan struct{}
	// arrive, when set, is called as each request comes in, before it
	// waits.
	arrive   func()
	inFlight atomic.Int32
	// peak is the most requests in flight at once.
	peak atomic.Int32
	// cut counts the requests that ended unanswered (their attempt's
	// timeout).
	cut atomic.Int32
	mu  sync.Mutex
	// answered is when each event's first request was answered.
	answered map[string]time.Time
}

func newSlowFront(t *testing.T, rcv *ledgerReceiver, arrive func()) *slowFront {
	f := &slowFront{gate: make(chan struct{}), arrive: arrive, answered: map[string]time.Time{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			p := f.peak.Load()
			if n <= p || f.peak.CompareAndSwap(p, n) {
				break
			}
		}
		if f.arrive != nil {
			f.arrive()
		}
		select {
		case <-f.gate:
		case <-req.Context().Done():
			f.cut.Add(1)
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
	// A test that fails with the gate shut must not leave the server's
	// Close waiting on the requests it holds.
	t.Cleanup(f.open)
	return f
}

func (f *slowFront) URL() string { return f.srv.URL + "/webhook" }

// open lets every request held, and every later one, through (once).
func (f *slowFront) open() {
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

// firstAnswered is when the receiver answered event id's first request
// (zero: not yet).
func (f *slowFront) firstAnswered(id string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answered[id]
}

// slowSubscriber is an endpoint subscribed to eventTypes whose receiver
// answers nothing until its front's gate is open, with extra settings.
func (b *bundle) slowSubscriber(arrive func(), settings map[string]any, eventTypes ...string) (subscriber, *slowFront) {
	b.t.Helper()
	rcv := newLedgerReceiver(b.t)
	front := newSlowFront(b.t, rcv, arrive)
	body := map[string]any{"url": front.URL(), "event_types": eventTypes}
	for k, v := range settings {
		body[k] = v
	}
	ep := b.createEndpointWith(body)
	rcv.secret = ep.Secret
	return subscriber{endpoint: ep, rcv: rcv}, front
}

// heldAttempt is the HTTP timeout of the tests whose receivers hold
// requests until the test lets them through: far longer than any of their
// waits (slowWait), so an attempt held is never cut by a loaded machine's
// slowness, and an outcome that could come only after it was cut (a
// defect) comes too late for the wait.
const heldAttempt, slowWait = 10 * time.Minute, 5 * time.Minute

// TestAFastLaneDoesNotWaitForASlowPeer: two endpoints take every event of
// one correlation; one's receiver answers nothing until the test lets it.
// The fast lane delivers all of them, in order, while the slow receiver
// holds its first request unanswered: its hand-overs do not wait for the
// slow lane's attempts (if they did, the fast lane would move at the slow
// one's pace: here, not before the held attempt's ten-minute timeout).
// The slow lane then delivers them all in order too.
func TestAFastLaneDoesNotWaitForASlowPeer(t *testing.T) {
	t.Parallel()
	b := setup(t, options{timeout: heldAttempt, window: 30 * time.Minute})
	fast := b.subscribe("order.*")
	slow, front := b.slowSubscriber(nil, nil, "order.*")
	corr := b.id("order-7")
	id := func(seq int64) string { return fmt.Sprintf("%s-%d", corr, seq) }
	const events = 4
	for seq := int64(1); seq <= events; seq++ {
		ev := b.publish(id(seq), corr, seq, "order.updated")
		require.Len(t, ev.Deliveries, 2)
	}
	waitFor(t, slowWait, "the fast lane delivers every event", func() bool { return len(fast.rcv.appliedTo(corr)) == events })
	require.Equal(t, []int64{1, 2, 3, 4}, fast.rcv.appliedTo(corr))
	waitFor(t, slowWait, "the slow lane's first attempt at its receiver", func() bool { return front.inFlight.Load() == 1 })
	require.Zero(t, front.cut.Load(), "the slow lane's attempt was still waiting for its answer")
	require.True(t, front.firstAnswered(id(1)).IsZero(), "the slow receiver answered nothing yet")
	front.open()

	waitFor(t, slowWait, "the slow lane delivers every event", func() bool { return len(slow.rcv.appliedTo(corr)) == events })
	require.Equal(t, []int64{1, 2, 3, 4}, slow.rcv.appliedTo(corr))
	fast.rcv.mu.Lock()
	lastFast := fast.rcv.appliedAt[id(events)]
	fast.rcv.mu.Unlock()
	firstSlow := front.firstAnswered(id(1))
	require.True(t, lastFast.Before(firstSlow), "fast lane's last delivery %s, slow receiver's first answer %s", lastFast, firstSlow)
	require.Zero(t, front.cut.Load(), "no attempt of the slow lane was cut")
	for seq := int64(1); seq <= events; seq++ {
		b.waitDelivery(id(seq), slow.ID, contract.StateDelivered, slowWait)
	}
	fast.rcv.requireClean(t)
	slow.rcv.requireClean(t)
	b.waitCompleted(id(1))
	b.recordHistory(id(1), "event_fast_lane_beside_a_slow_peer_history.json")
}

// TestThreeLanesDeliveredTogetherAreHandedOverTogether: an event whose
// three lanes are released at once and whose receivers answer at once is
// handed over to its sequencer in one Finish: one finished update for the
// three lanes, not one each. "At once"
// is the receivers' own: each holds its request until all three have
// theirs in hand, then all answer, so a loaded machine that sends the
// three attempts seconds apart still has them answered together. What it
// cannot make together is the three answers' arrival at the workflow,
// which the batch bounds: 20 s here, not 100 ms, for what is under test
// is that lanes delivered within the batch go in one hand-over (the
// hand-over goes as soon as every first attempt has ended; the workflow
// ends when the batch's pause does). The HTTP timeout is a minute, so an
// attempt that waits at the barrier is never cut.
func TestThreeLanesDeliveredTogetherAreHandedOverTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, options{handOverBatch: 20 * time.Second, timeout: time.Minute})
	var arrived atomic.Int32
	var fronts []*slowFront
	var subs []subscriber
	all := make(chan struct{})
	arrive := func() {
		if arrived.Add(1) == 3 {
			close(all)
		}
	}
	for range 3 {
		s, f := b.slowSubscriber(arrive, nil, "order.*")
		subs, fronts = append(subs, s), append(fronts, f)
	}
	go func() {
		<-all
		for _, f := range fronts {
			f.open()
		}
	}()
	corr := b.id("order-3")
	ev := b.publish(corr+"-1", corr, 1, "order.updated")
	require.Len(t, ev.Deliveries, 3)
	waitFor(t, slowWait, "the event is delivered", func() bool { return b.fanned(ev.ID).State == contract.StateDelivered })
	b.waitCompleted(ev.ID)
	for _, f := range fronts {
		require.Zero(t, f.cut.Load(), "no attempt cut: each lane delivered by its first")
	}
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
// gets the heads of four correlations at once, and its receiver holds the
// first request it gets: its receiver never sees two requests at once;
// another endpoint's events, published after them, are all delivered while
// the capped one has answered none; and once every head has made its first
// attempt (the three without a place told to wait for one) the receiver
// goes on holding for longer than the 5 s window, then answers: each of
// the four is delivered, none dead-lettered (waiting its turn spends no
// window, though the three waited longer than the window before they were
// sent).
//
// The receiver is held by the test, not for a duration: a loaded machine
// only makes the waits longer, which proves more, and the HTTP timeout
// (heldAttempt) is far longer than any wait, so the held request is never
// cut.
func TestMaxInFlightCapsASlowReceiver(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	b := setup(t, options{timeout: heldAttempt, window: window})
	slow, front := b.slowSubscriber(nil, map[string]any{"max_in_flight": 1}, "slow.*")
	require.Equal(t, 1, b.endpointSetting(slow.ID, "max_in_flight"))
	fast := b.subscribe("fast.*")
	const n = 4
	slowID := func(i int) string { return b.id(fmt.Sprintf("s%d", i)) + "-1" }
	for i := range n {
		corr := b.id(fmt.Sprintf("s%d", i))
		b.publish(slowID(i), corr, 1, "slow.updated")
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
	waitFor(t, slowWait, "the other endpoint delivers every event", func() bool {
		for i := range n {
			if len(fast.rcv.appliedTo(b.id(fmt.Sprintf("f%d", i)))) != 1 {
				return false
			}
		}
		return true
	})
	require.Zero(t, slowDone(), "the other endpoint did not wait for the capped one")
	// Every head released and attempted: one holds the place, at the
	// receiver, and three were told to wait for it.
	waitFor(t, slowWait, "every capped head attempted", func() bool {
		for i := range n {
			if d, ok := b.fanned(slowID(i)).delivery(slow.ID); !ok || d.State != contract.StateDelivering {
				return false
			}
		}
		return front.inFlight.Load() > 0
	})
	time.Sleep(window + time.Second)
	require.Zero(t, slowDone(), "the receiver held its first request past the window")
	front.open()
	waitFor(t, slowWait, "the capped endpoint delivers every event", func() bool { return slowDone() == n })
	for i := range n {
		b.waitDelivery(slowID(i), slow.ID, contract.StateDelivered, slowWait)
	}
	require.EqualValues(t, 1, front.peak.Load(), "the receiver never saw two requests at once")
	require.Zero(t, front.cut.Load(), "no request cut: each head delivered by the attempt that got the place")
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
