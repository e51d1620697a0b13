package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// TestEventWorkflowHistoryStaysBoundedOverA72HourWindow: a lane must not
// outgrow Temporal's history limit through a 72-hour window, a 100 KB
// payload, and the endpoint's circuit open for the whole window: the first
// attempt fails (503), and every regular attempt after it is told to wait
// 30 s on the open circuit: about 8,600 waits of about 11 history events
// each, far past Temporal's 51,200. The workflow continues as new whenever
// its history passes MaxHistory; each run is run here in a fresh
// environment with the input its ContinueAsNewError carries (the test
// environment does not continue as new itself), from the time the run
// before ended. Each run's history stays under the bound, no input carries
// the payload, the window is counted from the release across every run, and
// the dead letter is written when it ends: 72 hours after the release, not
// later and not never.
func TestEventWorkflowHistoryStaysBoundedOverA72HourWindow(t *testing.T) {
	t.Parallel()
	const window = 72 * time.Hour
	const circuitWait = 30 * time.Second
	in := eventInput(11)
	in.Event.Data = json.RawMessage(`{"blob":"` + strings.Repeat("x", 100<<10) + `"}`)
	in.Lanes[0].RecoveryWindow = window
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 10}
	released := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	now := released

	var mu sync.Mutex
	calls := 0
	var histories []int
	var attempts []attempt
	var dls []deadLetter
	var res workflows.EventResult
	for run := 1; ; run++ {
		require.Less(t, run, 200, "the runs end")
		h := newEventHarness(t, in)
		h.env.SetStartTime(now)
		h.onDeliver(func(_ int, number int32) (contract.DeliverResult, error) {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first {
				return contract.DeliverResult{}, retryable("receiver answered 503") // the failure that opened the circuit
			}
			return contract.DeliverResult{CircuitOpen: circuitWait, Attempt: number}, nil
		})
		h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
				h.deadLetters.add(deadLetter{at: h.env.Now(), input: in})
				return contract.DeadLetterResult{Generation: 1}, nil
			}).Maybe()
		h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(contract.OperatorResult{}, nil).Maybe()
		// The environment keeps no history: the harness counts what a
		// server would record, and the workflow reads it at each timer,
		// which is when its lane parks on the open circuit.
		h.env.SetOnTimerScheduledListener(func(string, time.Duration) {
			h.counted(func(c *historyCount) { c.timers++ })
			h.env.SetCurrentHistoryLength(h.history())
		})
		// An operator skips the dead letter an hour after the window's end,
		// which ends the event; a run that continues as new before then
		// never gets there.
		if d := released.Add(window + time.Hour).Sub(now); d > 0 {
			h.at(d, func() { h.signal(contract.SignalSkip, contract.Skip{EndpointID: "ep_1", By: "op"}) })
		}

		h.env.ExecuteWorkflow(contract.EventWorkflow, in)

		require.True(t, h.env.IsWorkflowCompleted())
		histories = append(histories, h.history())
		attempts = append(attempts, h.attempts.all()...)
		dls = append(dls, h.deadLetters.all()...)
		err := h.env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			size := 0
			for _, p := range can.Input.GetPayloads() {
				size += len(p.GetData())
			}
			require.Less(t, size, 2048, "run %d's continue-as-new input carries the lanes' state, not the payload", run)
			var next workflows.EventInput
			require.NoError(t, converterFor().FromPayloads(can.Input, &next))
			require.Empty(t, next.Event.Data)
			require.Len(t, next.Lanes, 1)
			in, now = next, h.env.Now()
			continue
		}
		require.NoError(t, err)
		require.NoError(t, h.env.GetWorkflowResult(&res))
		break
	}

	total := 0
	for i, n := range histories {
		total += n
		require.LessOrEqual(t, n, workflows.DefaultEventMaxHistory+20, "run %d's history stays bounded", i+1)
	}
	t.Logf("%d runs, history per run %v, %d events in all, %d attempts", len(histories), histories, total, len(attempts))
	require.Greater(t, len(histories), 10, "it continued as new")
	require.Greater(t, total, 51_200, "one run would have passed Temporal's limit")

	for _, a := range attempts {
		require.Empty(t, a.input.Data, "no attempt carries the payload")
	}
	require.EqualValues(t, 1, attempts[0].number)
	for _, a := range attempts[1:] {
		require.EqualValues(t, 2, a.number, "the attempt told to wait is made again with its number, across every run")
	}
	require.Len(t, dls, 1, "one dead letter, when the window ends")
	t.Logf("dead letter written %s after the release, in run %d", dls[0].at.Sub(released), len(histories))
	require.Equal(t, window, dls[0].at.Sub(released), "72 hours after the release: the window was not restarted")
	require.Equal(t, contract.WindowSpentPrefix+"receiver answered 503", dls[0].input.Reason,
		"the window's failure, carried across every run: the last answer the receiver gave")
	require.True(t, dls[0].input.WindowStart.Equal(released), "the window counted from the release")
	require.Empty(t, dls[0].input.Event.Data, "the dead letter's envelope takes the ledger's payload")
	require.Equal(t, contract.StateSkipped, res.State)
	last := attempts[len(attempts)-1]
	require.Less(t, window-last.at.Sub(released), circuitWait+time.Second, "it kept looking until the window's end")
}

// TestEventWorkflowContinuesAsNewWithTheSignalsNotTaken: signals that come
// in the task that continues as new are not lost: ep_1 waits on its dead
// letter and ep_2 on its release when the history passes MaxHistory, and
// an operator's skip of ep_1's dead letter, ep_2's release and a close of
// ep_1's circuit come together. The new run's input carries each: the skip
// (for generation 1), the release, and ep_1's window state with its
// generation.
func TestEventWorkflowContinuesAsNewWithTheSignalsNotTaken(t *testing.T) {
	t.Parallel()
	in := eventInput(12, "ep_1", "ep_2")
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 11}
	h := newEventHarness(t, in)
	h.manualRelease = true
	h.rejecting(0, "ep_1")
	h.onDeadLetter(func(int) error { return nil })
	h.at(time.Hour, func() {
		require.Equal(t, contract.StateDeadLettered, h.lane("ep_1").State)
		// The signals are delivered once this callback returns, and the
		// history grows past MaxHistory before the workflow task that
		// takes them all together (the last signal's) runs.
		h.env.SignalWorkflowSkippingWorkflowTask(contract.SignalSkip, contract.Skip{EndpointID: "ep_1", By: "op", Note: "gone"})
		h.env.SignalWorkflowSkippingWorkflowTask(contract.SignalRelease, contract.Release{Sequence: 12, Lanes: []contract.LaneRelease{{Endpoint: "ep_2", Previous: 9}}})
		h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistoryLength(workflows.DefaultEventMaxHistory + 1) }, 0)
		h.signal(contract.SignalCircuitClosed, contract.CircuitClosed{EndpointID: "ep_1"})
	})

	h.env.ExecuteWorkflow(contract.EventWorkflow, in)

	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.env.GetWorkflowError(), &can)
	var next workflows.EventInput
	require.NoError(t, converterFor().FromPayloads(can.Input, &next))
	require.Len(t, next.Lanes, 2)
	ep1, ep2 := next.Lanes[0], next.Lanes[1]
	require.Equal(t, "ep_1", ep1.Endpoint)
	require.NotNil(t, ep1.DeadLetter, "ep_1 waits on its dead letter in the new run")
	require.EqualValues(t, 1, ep1.DeadLetter.Generation)
	require.Equal(t, &contract.Skip{EndpointID: "ep_1", Generation: 1, By: "op", Note: "gone"}, ep1.DeadLetter.Skip, "the skip is carried out by the new run")
	require.Equal(t, &contract.LaneRelease{Endpoint: "ep_1", Previous: 11}, ep1.Released)
	require.Equal(t, "ep_2", ep2.Endpoint)
	require.Equal(t, &contract.LaneRelease{Endpoint: "ep_2", Previous: 9}, ep2.Released, "the release is carried")
	require.Nil(t, ep2.DeadLetter)
	require.Equal(t, &workflows.Published{State: contract.StateDeadLettered, DeadLettered: []string{"ep_1"}}, next.Published)

	// The new run carries the skip out, and delivers ep_2 with its release.
	h2 := newEventHarness(t, next)
	h2.manualRelease = true
	h2.rejecting(0) // ep_2 is delivered
	h2.expectSkip("ep_1", 1, "op", "gone")
	h2.env.ExecuteWorkflow(contract.EventWorkflow, next)
	require.True(t, h2.env.IsWorkflowCompleted())
	require.NoError(t, h2.env.GetWorkflowError())
	var res workflows.EventResult
	require.NoError(t, h2.env.GetWorkflowResult(&res))
	require.Equal(t, []workflows.LaneResult{{Endpoint: "ep_1", State: contract.StateSkipped}, {Endpoint: "ep_2", State: contract.StateDelivered, Attempts: 1}}, res.Lanes)
	got := h2.attemptsTo("ep_2")
	require.Len(t, got, 1)
	require.EqualValues(t, 9, got[0].input.Previous, "the release carried names ep_2's previous sequence")
}
