package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/services/starter"
)

// outage is a receiver's fault that answers 503 while down is set, and
// counts the requests it refuses.
type outage struct {
	down    atomic.Bool
	refused atomic.Int64
}

func (o *outage) fault(contract.Envelope, int) string {
	if o.down.Load() {
		o.refused.Add(1)
		return "503"
	}
	return ""
}

// postLanes posts seqs events to each of n correlations (named by prefix)
// for endpoint ep, all sequence 1 first, and returns the correlations.
func (b *bundle) postLanes(prefix string, n int, seqs int64, ep string) []string {
	b.t.Helper()
	var corrs []string
	for i := range n {
		corrs = append(corrs, b.id(fmt.Sprintf("%s-%d", prefix, i)))
	}
	for seq := int64(1); seq <= seqs; seq++ {
		for _, corr := range corrs {
			code, _ := b.postEvent(fmt.Sprintf("%s-%d", corr, seq), corr, seq, ep, map[string]any{"n": seq})
			require.Equal(b.t, http.StatusAccepted, code)
		}
	}
	return corrs
}

// requireDrained waits until every correlation has 1..seqs applied, in
// order, exactly once.
func requireDrained(t *testing.T, rcv *ledgerReceiver, corrs []string, seqs int64, timeout time.Duration) {
	t.Helper()
	want := make([]int64, 0, seqs)
	for s := int64(1); s <= seqs; s++ {
		want = append(want, s)
	}
	waitFor(t, timeout, "every lane drained", func() bool {
		for _, c := range corrs {
			if len(rcv.appliedTo(c)) < int(seqs) {
				return false
			}
		}
		return true
	})
	for _, c := range corrs {
		require.Equal(t, want, rcv.appliedTo(c), "lane %s in order, exactly once", c)
	}
	rcv.requireClean(t)
}

// TestCircuitBreakerHoldsADeadReceiverToItsProbes: a receiver is down for
// a while under many correlations: the breaker opens after 5 failures, the
// heads wait and make no attempts but for one probe at a time, and once
// the receiver is back a probe closes it and every lane drains in order,
// exactly once, with no dead letter (every window is longer than the
// outage).
func TestCircuitBreakerHoldsADeadReceiverToItsProbes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	rcv := newLedgerReceiver(t)
	var o outage
	o.down.Store(true)
	rcv.fault = o.fault
	ep := b.createEndpoint(rcv.URL())
	rcv.secret = ep.Secret
	const n, seqs = 40, 3
	start := time.Now()
	corrs := b.postLanes("cb", n, seqs, ep.ID)

	waitFor(t, time.Minute, "the circuit opens", func() bool {
		c, err := b.store.CircuitGet(context.Background(), ep.ID)
		require.NoError(t, err)
		return c.State == store.CircuitOpen
	})
	const outageFor = 30 * time.Second
	time.Sleep(time.Until(start.Add(outageFor)))
	refused := o.refused.Load()
	o.down.Store(false)
	back := time.Now()

	requireDrained(t, rcv, corrs, seqs, 3*time.Minute)
	drained := time.Since(back)
	c, err := b.store.CircuitGet(context.Background(), ep.ID)
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	var open int
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM dead_letters WHERE endpoint_id = $1`, ep.ID).Scan(&open))
	require.Zero(t, open, "no window was spent")
	// Without the breaker each head retries at about 0, 1, 5 and 21 s in
	// 30 s: 4 attempts each.
	t.Logf("FIGURE circuit breaker: %d attempts during a %s outage with %d correlations (%d heads × 4 attempts = %d without the breaker); drained %d lanes × %d events %.1f s after the receiver came back",
		refused, outageFor, n, n, n*4, n, seqs, drained.Seconds())
	require.Less(t, refused, int64(n*4), "the breaker holds the heads back")
}

// TestCircuitAutoReplayRecoversAnOutageLongerThanTheWindow: with
// auto_replay, an outage longer than the endpoint's window dead-letters
// the heads of its lanes; once the receiver is back, a probe closes the
// circuit and hookflow replays those dead letters itself, each lane in
// order, recorded as by "hookflow (auto-replay)": nothing lost, nothing
// delivered twice. With every head dead-lettered no attempt is left to
// probe: the API's sweep replays one dead letter as the probe. A dead
// letter of a permanent rejection (400) is not replayed.
func TestCircuitAutoReplayRecoversAnOutageLongerThanTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	var o outage
	rejected := b.id("rejected-1")
	rcv.fault = func(ev contract.Envelope, n int) string {
		if ev.ID == rejected {
			return "400"
		}
		return o.fault(ev, n)
	}
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "recovery_window": "6s", "auto_replay": true})
	rcv.secret = ep.Secret
	code, _ := b.postEvent(rejected, b.id("rejected"), 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(rejected, contract.StateDeadLettered, time.Minute)

	o.down.Store(true)
	const n, seqs = 10, 3
	corrs := b.postLanes("ar", n, seqs, ep.ID)
	heads := make([]string, 0, n)
	for _, c := range corrs {
		heads = append(heads, c+"-1")
	}
	for _, h := range heads {
		b.waitState(h, contract.StateDeadLettered, time.Minute)
	}
	recorded := heads[0] // a head held by the open circuit, for the recorded history
	for _, h := range slices.Backward(heads) {
		dl := b.deadLetter(h + "?endpoint_id=" + ep.ID)
		if dl.Reason == contract.CircuitOpenReason {
			recorded = h
		}
		require.True(t, contract.OutageCaused(dl.Reason), "dead-lettered by the outage (its window spent, or held by the open circuit until it ended): %s", dl.Reason)
	}
	refused := o.refused.Load()
	o.down.Store(false)
	back := time.Now()

	requireDrained(t, rcv, corrs, seqs, 3*time.Minute)
	t.Logf("FIGURE auto-replay: %d lanes × %d events drained %.1f s after the receiver came back; %d attempts during the outage",
		n, seqs, time.Since(back).Seconds(), refused)
	for _, h := range heads {
		dl := b.deadLetter(h + "?endpoint_id=" + ep.ID)
		require.Equal(t, store.DeadLetterReplayed, dl.Status)
		require.NotNil(t, dl.ReplayedBy)
		require.Equal(t, starter.AutoReplayBy, *dl.ReplayedBy)
	}
	b.recordHistory(recorded, "event_circuit_open_auto_replayed_history.json")
	dl := b.deadLetter(rejected + "?endpoint_id=" + ep.ID)
	require.Equal(t, store.DeadLetterOpen, dl.Status, "a permanent rejection is never auto-replayed")
	require.Equal(t, 1, rcv.requestsFor(rejected))

	// The breaker told the operators: opened, closed, and each replay.
	rows, err := b.store.Pool().Query(ctx, `SELECT type FROM events WHERE correlation_id = $1 ORDER BY sequence`, contract.OperationalCorrelation(ep.ID))
	require.NoError(t, err)
	var types []string
	for rows.Next() {
		var typ string
		require.NoError(t, rows.Scan(&typ))
		types = append(types, typ)
	}
	require.NoError(t, rows.Err())
	count := func(typ string) int {
		k := 0
		for _, x := range types {
			if x == typ {
				k++
			}
		}
		return k
	}
	// One per replay: a head replayed to probe while the receiver was still
	// down is dead-lettered again and replayed again.
	require.GreaterOrEqual(t, count(contract.OpDeadLetterAutoReplayed), n, "one per dead letter replayed: %v", types)
	require.GreaterOrEqual(t, count(contract.OpCircuitOpened), 1)
	require.Equal(t, count(contract.OpCircuitOpened), count(contract.OpCircuitClosed))
	lastReplayed := -1
	for i, x := range types {
		if x == contract.OpDeadLetterAutoReplayed {
			lastReplayed = i
		}
	}
	require.Less(t, slices.Index(types, contract.OpCircuitClosed), lastReplayed, "the outage's dead letters replayed once it closed")
}

// TestCircuitOpensOnTheFailureRate: a receiver that fails the first request
// of every event, and takes its retry, fails one request in two and never
// twice in a row, so its consecutive failures never reach the threshold
// (5); the failure rate of its window opens the breaker, whose event names
// that trigger and its figures; once the receiver is well, the probe closes
// it and the lane drains in order, exactly once.
func TestCircuitOpensOnTheFailureRate(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	rcv := newLedgerReceiver(t)
	var well atomic.Bool
	rcv.fault = func(_ contract.Envelope, n int) string {
		if n == 1 && !well.Load() {
			return "503"
		}
		return ""
	}
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "circuit_window": "30s", "circuit_min_attempts": 10})
	rcv.secret = ep.Secret
	const seqs = 12
	corrs := b.postLanes("rate", 1, seqs, ep.ID)

	waitFor(t, 45*time.Second, "the circuit opens", func() bool {
		c, err := b.store.CircuitGet(ctx, ep.ID)
		require.NoError(t, err)
		return c.State == store.CircuitOpen
	})
	well.Store(true)
	var data map[string]any
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT data FROM events WHERE correlation_id = $1 AND type = $2`,
		contract.OperationalCorrelation(ep.ID), contract.OpCircuitOpened).Scan(&data))
	t.Logf("FIGURE failure rate: the circuit opened on %v", data)
	require.Equal(t, store.TriggerFailureRate, data["trigger"])
	require.Less(t, data["consecutive_failures"], float64(store.DefaultCircuitFailureThreshold), "not by the consecutive count")
	require.GreaterOrEqual(t, data["window_attempts"], float64(10))
	require.GreaterOrEqual(t, data["window_failure_rate"], float64(store.DefaultCircuitFailureRate))

	requireDrained(t, rcv, corrs, seqs, time.Minute)
	c, err := b.store.CircuitGet(ctx, ep.ID)
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State, "the probe closed it")
}

// TestCircuitDisablesAnEndpointFailingLongerThanDisableAfter: an endpoint
// with disable_after 1m (the shortest allowed) whose receiver is down opens
// its circuit, and the probe that fails once the run of failures has lasted
// a minute disables it, as a PATCH would: the operators' endpoint is sent
// hookflow.endpoint.disabled after the circuit_opened, and the receiver has
// had nothing. Once the receiver is back, PATCH {"disabled": false} enables
// it, the circuit starts afresh, and every lane drains in order, exactly
// once, with no dead letter left open. Held: the windows outlast the
// minute, so the heads wait on the circuit (or are dead-lettered "endpoint
// disabled", which the enabling replays). Auto-replay: the windows (20 s)
// are spent first, the heads are dead-lettered "endpoint circuit open", and
// the sweep's replays probe the endpoint until one disables it; the
// enabling closes the open circuit as a probe would, so those dead letters
// are auto-replayed besides the disabling's.
func TestCircuitDisablesAnEndpointFailingLongerThanDisableAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings map[string]any
	}{
		{"held", map[string]any{}},
		{"auto-replay", map[string]any{"auto_replay": true, "recovery_window": "20s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each waits out minutes of timers on a stack of its own (its
			// database, task queue and API; the Temporal server is shared).
			t.Parallel()
			b := setup(t, options{window: 5 * time.Minute})
			ctx := context.Background()
			ops := b.subscribeOps()
			rcv := newLedgerReceiver(t)
			var o outage
			o.down.Store(true)
			rcv.fault = o.fault
			body := map[string]any{"url": rcv.URL(), "disable_after": "1m"}
			maps.Copy(body, tc.settings)
			ep := b.createEndpointWith(body)
			rcv.secret = ep.Secret
			const n, seqs = 5, 3
			start := time.Now()
			corrs := b.postLanes("disable", n, seqs, ep.ID)

			type endpointView struct {
				Disabled       bool    `json:"disabled"`
				DisabledReason *string `json:"disabled_reason"`
			}
			var view endpointView
			waitFor(t, 4*time.Minute, "the endpoint is disabled", func() bool {
				require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+ep.ID, nil, &view))
				return view.Disabled
			})
			disabledAfter := time.Since(start)
			require.NotNil(t, view.DisabledReason)
			require.Contains(t, *view.DisabledReason, "disable_after")
			require.GreaterOrEqual(t, disabledAfter, time.Minute, "not before it has failed for disable_after")
			waitFor(t, time.Minute, "the operators are told", func() bool {
				return slices.Contains(ops.seen(), contract.OpEndpointDisabled)
			})
			opTypes := ops.seen()
			require.Less(t, slices.Index(opTypes, contract.OpCircuitOpened), slices.Index(opTypes, contract.OpEndpointDisabled), "opened, then disabled: %v", opTypes)
			for _, c := range corrs {
				require.Empty(t, rcv.appliedTo(c), "nothing reached the dead receiver")
			}
			refused := o.refused.Load()
			openDeadLetters := func() int {
				t.Helper()
				var n int
				require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM dead_letters WHERE endpoint_id = $1 AND status = 'open'`, ep.ID).Scan(&n))
				return n
			}
			deadLettered := openDeadLetters()

			o.down.Store(false)
			back := time.Now()
			var enabled struct {
				Resumed int `json:"resumed_dead_letters"`
			}
			require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"disabled": false}, &enabled))
			requireDrained(t, rcv, corrs, seqs, 5*time.Minute)
			t.Logf("FIGURE auto-disable (%s): disabled %.1f s after %d lanes' first attempts (disable_after 1m), %d attempts while failing; %d dead letters open when enabled, %d of them resumed by the enabling; drained %d lanes × %d events %.1f s later",
				tc.name, disabledAfter.Seconds(), n, refused, deadLettered, enabled.Resumed, n, seqs, time.Since(back).Seconds())
			c, err := b.store.CircuitGet(ctx, ep.ID)
			require.NoError(t, err)
			require.Equal(t, store.CircuitClosed, c.State, "enabling starts the breaker afresh")
			require.Zero(t, openDeadLetters(), "no dead letter left for an operator")
			ops.rcv.requireClean(t)
		})
	}
}

// recordHistory writes the workflow's history, as the recorder in
// lab/tools/recordhistory does, to $HOOKFLOW_RECORD_HISTORY_DIR/name
// when that is set (workflows/testdata/README: how the recorded histories
// were made); otherwise it does nothing.
func (b *bundle) recordHistory(workflowID, name string) {
	b.t.Helper()
	b.recordRunHistory(workflowID, "", name)
}

// recordRunHistory is recordHistory of one run of the workflow ("": its
// latest).
func (b *bundle) recordRunHistory(workflowID, runID, name string) {
	b.t.Helper()
	dir := os.Getenv("HOOKFLOW_RECORD_HISTORY_DIR")
	if dir == "" {
		return
	}
	var h historypb.History
	it := b.client.GetWorkflowHistory(context.Background(), wf(workflowID), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b.t, err)
		h.Events = append(h.Events, ev)
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&h)
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name), append(out, '\n'), 0o644))
}

// TestEnablingWakesTheLanesAnOpenCircuitHolds: heads held by an open
// circuit whose probe backoff has grown to its 5 minutes sleep until the
// next probe; an operator who sees the receiver back and enables the
// endpoint (PATCH {"disabled": false}, which closes its circuit) must not
// wait those minutes: the starter signals every lane in flight at the
// endpoint (SignalCircuitClosed), and each makes its attempt at once.
// Every lane drains in order, exactly once, well before any of their
// timers would have fired.
func TestEnablingWakesTheLanesAnOpenCircuitHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 30 * time.Minute})
	rcv := newLedgerReceiver(t)
	var o outage
	o.down.Store(true)
	rcv.fault = o.fault
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(), "circuit_failure_threshold": 1})
	rcv.secret = ep.Secret
	const n, seqs = 10, 2
	corrs := b.postLanes("wake", n, seqs, ep.ID)

	ctx := context.Background()
	waitFor(t, time.Minute, "the circuit opens", func() bool {
		c, err := b.store.CircuitGet(ctx, ep.ID)
		require.NoError(t, err)
		return c.State == store.CircuitOpen
	})
	// As after a long outage: the next probe is the backoff's 5 minutes
	// away, and every head that looks is told so.
	_, err := b.store.Pool().Exec(ctx, `UPDATE endpoint_circuits SET next_probe_at = now() + interval '5 minutes',
		probe_backoff_ms = $2 WHERE endpoint_id = $1`, ep.ID, store.ProbeBackoffMax.Milliseconds())
	require.NoError(t, err)
	time.Sleep(15 * time.Second) // the heads told the first 5 s look again and are told 5 minutes
	refused := o.refused.Load()
	o.down.Store(false)

	back := time.Now()
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"disabled": false}, nil))
	requireDrained(t, rcv, corrs, seqs, 2*time.Minute)
	b.recordHistory(corrs[0]+"-1", "event_circuit_closed_woken_history.json")
	t.Logf("FIGURE enabling wakes the held lanes: %d lanes × %d events drained %.1f s after the PATCH (their timers: about 5 minutes); %d requests refused while down",
		n, seqs, time.Since(back).Seconds(), refused)
	var dead int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM dead_letters WHERE endpoint_id = $1`, ep.ID).Scan(&dead))
	require.Zero(t, dead)
}
