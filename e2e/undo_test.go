package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// signalTimeout fails the next replay signal to one workflow, once it is
// armed, with the DeadlineExceeded a client sees when the server does not
// answer in time: after sending it, and after the workflow acted on it
// (acted, polled for up to 30 s: the answer came too late), or instead of
// sending it (the request never got there).
type signalTimeout struct {
	workflowID atomic.Value // string: the armed workflow
	send       bool
	acted      func() bool
	fired      atomic.Bool
}

func (p *signalTimeout) hook() *signalHook {
	return &signalHook{hook: func(in *interceptor.ClientSignalWorkflowInput, send func() error) error {
		armed, _ := p.workflowID.Load().(string)
		if in.SignalName != contract.SignalReplay || in.WorkflowID != armed || !p.fired.CompareAndSwap(false, true) {
			return send()
		}
		if p.send {
			if err := send(); err != nil {
				return err
			}
			for deadline := time.Now().Add(30 * time.Second); !p.acted() && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
			}
		}
		return serviceerror.NewDeadlineExceeded("context deadline exceeded")
	}}
}

// TestAnOperatorsActionWhoseSignalTimedOutStands: an
// operator replays a dead letter and the signal to its workflow times out.
// A timeout says nothing of whether the server took the signal, so the API
// keeps its claim (it once undid it on any error, and the row then said
// open, counted in dead_letters_open, for a delivery its workflow carried
// out) and answers 202 with signal_unconfirmed. Whether the signal arrived
// (the workflow carries the replay out) or not (the repair sweep sends the
// claimed replay again), the event is delivered once, in order, and the dead
// letter ends replayed by the operator.
func TestAnOperatorsActionWhoseSignalTimedOutStands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sent bool
	}{{"arrived", true}, {"lost", false}} {
		t.Run(tc.name, func(t *testing.T) {
			probe := &signalTimeout{send: tc.sent}
			b, rcv, ep, healed := setupRejecting(t, options{window: 3 * time.Second, repairAfter: 2 * time.Second,
				interceptors: []interceptor.ClientInterceptor{probe.hook()}}, 1)
			corr, id := b.deadLetteredHead("signal-timeout-"+tc.name, ep.ID, 2)
			healed.Store(true)
			probe.acted = func() bool {
				ev, err := b.store.EventGet(context.Background(), id)
				return err == nil && ev.State == contract.StateDelivered
			}
			probe.workflowID.Store(wf(id))

			var raw json.RawMessage
			code := b.call(http.MethodPost, "/v1/dead-letters/"+id+"/replay", map[string]any{"endpoint_id": ep.ID}, &raw)
			require.True(t, probe.fired.Load(), "the replay's signal met the timeout")

			b.waitState(corr+"-2", contract.StateDelivered, 60*time.Second)
			require.Equal(t, contract.StateDelivered, b.eventState(id).State)
			d := b.deadLetter(id)
			require.Equal(t, store.DeadLetterReplayed, d.Status, "the dead letter of a delivered delivery is not open")
			require.Equal(t, "bootstrap", *d.ReplayedBy, "the claim stands as the operator made it")
			require.EqualValues(t, 1, d.ReplayCount)
			var stats struct {
				DeadLettersOpen int64 `json:"dead_letters_open"`
			}
			require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats", nil, &stats))
			require.Zero(t, stats.DeadLettersOpen)
			applied, violations := rcv.snapshot()
			require.Empty(t, violations)
			require.Equal(t, []int64{1, 2}, applied[corr])
			require.Equal(t, 2, rcv.requestsFor(id), "one rejected attempt, one replay")

			require.Equal(t, http.StatusAccepted, code, "the action stands: accepted (%s)", raw)
			var act struct {
				Status            string `json:"status"`
				SignalUnconfirmed bool   `json:"signal_unconfirmed"`
				Detail            string `json:"detail"`
			}
			require.NoError(t, json.Unmarshal(raw, &act))
			require.Equal(t, "replaying", act.Status)
			require.True(t, act.SignalUnconfirmed)
			require.Contains(t, act.Detail, "repair sweep")
		})
	}
}
