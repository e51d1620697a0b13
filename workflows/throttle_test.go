package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// tenantDisabledFor answers Deliver as a tenant disabled from disabled
// until enabled does: every attempt is told to look again in a minute,
// sending nothing; before and after, answer decides. It counts across
// runs.
type tenantDisabledFor struct {
	disabled time.Time
	enabled  time.Time
	answer   func(n int, number int32) (contract.DeliverResult, error)
	mu       sync.Mutex
	attempts []attempt
	sent     int
}

func (d *tenantDisabledFor) deliver(h *eventHarness) {
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverInput) (contract.DeliverResult, error) {
			number := activity.GetInfo(ctx).Attempt + in.AttemptOffset
			now := h.env.Now()
			d.mu.Lock()
			d.attempts = append(d.attempts, attempt{at: now, number: number, input: in})
			if !now.Before(d.disabled) && now.Before(d.enabled) {
				d.mu.Unlock()
				return contract.DeliverResult{Throttled: time.Minute, InFlightFull: true, Attempt: number}, nil
			}
			d.sent++
			n := d.sent
			d.mu.Unlock()
			return d.answer(n, number)
		})
}

// sends are the attempts made once the tenant was enabled.
func (d *tenantDisabledFor) sends() []attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []attempt
	for _, a := range d.attempts {
		if !a.at.Before(d.enabled) {
			out = append(out, a)
		}
	}
	return out
}

// runChain runs the event's workflow, and each run its continue-as-new
// starts, in a fresh environment from the time the run before ended (the
// test environment does not continue as new itself), until one completes.
// prepare mocks each run's activities. It returns each run's history
// length and the last run's result.
func runChain(t *testing.T, in workflows.EventInput, start time.Time, prepare func(h *eventHarness)) ([]int, workflows.EventResult) {
	t.Helper()
	now := start
	var histories []int
	for run := 1; ; run++ {
		require.Less(t, run, 500, "the runs end")
		h := newEventHarness(t, in)
		h.env.SetStartTime(now)
		prepare(h)
		// The environment keeps no history: the harness counts what a
		// server would record, and the workflow reads it at each timer.
		h.env.SetOnTimerScheduledListener(func(string, time.Duration) {
			h.counted(func(c *historyCount) { c.timers++ })
			h.env.SetCurrentHistoryLength(h.history())
		})
		h.env.ExecuteWorkflow(contract.EventWorkflow, in)
		require.True(t, h.env.IsWorkflowCompleted())
		histories = append(histories, h.history())
		var can *workflow.ContinueAsNewError
		if err := h.env.GetWorkflowError(); errors.As(err, &can) {
			var next workflows.EventInput
			require.NoError(t, converterFor().FromPayloads(can.Input, &next))
			in, now = next, h.env.Now()
			continue
		}
		require.NoError(t, h.env.GetWorkflowError())
		var res workflows.EventResult
		require.NoError(t, h.env.GetWorkflowResult(&res))
		return histories, res
	}
}

// TestEventWorkflowContinuesAsNewWhileItsTenantIsDisabled: the event's
// tenant is disabled for six hours, and its released lane is told to look
// again every minute. Waiting one's turn parks the lane, so the event
// continues as new whenever its history passes MaxHistory, instead of
// growing by about 8,700 events a day toward Temporal's 51,200; once the
// tenant is enabled the lane delivers, with the attempt number it had.
func TestEventWorkflowContinuesAsNewWhileItsTenantIsDisabled(t *testing.T) {
	t.Parallel()
	const maxHistory = 100
	in := eventInput(4)
	in.MaxHistory = maxHistory
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 3}
	start := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	d := &tenantDisabledFor{disabled: start, enabled: start.Add(6 * time.Hour), answer: delivered}

	histories, res := runChain(t, in, start, func(h *eventHarness) {
		d.deliver(h)
		h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(contract.DeadLetterResult{}, nil).Never()
	})

	total := 0
	for i, n := range histories {
		total += n
		require.LessOrEqual(t, n, maxHistory+20, "run %d's history stays bounded", i+1)
	}
	t.Logf("%d runs, history per run %v, %d events in all", len(histories), histories, total)
	require.Greater(t, len(histories), 10, "it continued as new while it waited")
	require.Equal(t, oneLane(contract.StateDelivered, 1), res, "delivered once the tenant is enabled, as its first attempt: nothing was sent before")
	sends := d.sends()
	require.Len(t, sends, 1)
	require.Less(t, sends[0].at.Sub(d.enabled), time.Minute+time.Second, "it looked again within a minute of the enabling")
	require.EqualValues(t, 3, sends[0].input.Previous, "the release is carried across every run")
}

// TestEventWorkflowCarriesAThrottledWindowAcrossContinueAsNew: the first
// attempt fails (503) and the retry finds the tenant disabled, for three
// hours, across many runs. The window spent before the throttle (the
// second before the retry) stays spent, and the throttled hours spend
// none of it: with the receiver failing throughout, the dead letter is
// written when the window's rest has run after the enabling, not at once
// (a window spent by the wait) and not a whole window later (one started
// afresh by a run).
func TestEventWorkflowCarriesAThrottledWindowAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	const maxHistory = 100
	in := eventInput(4)
	in.MaxHistory = maxHistory
	in.Lanes[0].Released = &contract.LaneRelease{Endpoint: "ep_1", Previous: 3}
	start := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	// The release's attempt (at start) finds the tenant enabled; the
	// retry a second later finds it disabled.
	d := &tenantDisabledFor{disabled: start.Add(time.Millisecond), enabled: start.Add(3 * time.Hour), answer: func(int, int32) (contract.DeliverResult, error) {
		return contract.DeliverResult{}, retryable("receiver answered 503")
	}}
	var mu sync.Mutex
	var dls []deadLetter

	histories, res := runChain(t, in, start, func(h *eventHarness) {
		d.deliver(h)
		h.env.OnActivity(act.WriteDeadLetter, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
				mu.Lock()
				dls = append(dls, deadLetter{at: h.env.Now(), input: in})
				mu.Unlock()
				return contract.DeadLetterResult{Generation: 1}, nil
			}).Maybe()
		// An operator skips the dead letter an hour after the enabling,
		// which ends the event.
		if at := d.enabled.Add(time.Hour).Sub(h.env.Now()); at > 0 {
			h.at(at, func() { h.signal(contract.SignalSkip, contract.Skip{EndpointID: "ep_1", By: "op"}) })
		}
		h.env.OnActivity(act.Skip, mock.Anything, mock.Anything).Return(contract.OperatorResult{}, nil).Maybe()
	})

	t.Logf("%d runs, history per run %v", len(histories), histories)
	require.Greater(t, len(histories), 5, "it continued as new while it waited")
	require.Equal(t, contract.StateSkipped, res.State)
	sends := d.sends()
	require.NotEmpty(t, sends)
	resumed := sends[0].at
	require.Less(t, resumed.Sub(d.enabled), time.Minute+time.Second, "it looked again within a minute of the enabling")
	require.Len(t, dls, 1)
	// One second of the window was spent before the throttle (the first
	// attempt and the retry after it).
	require.Equal(t, 5*time.Minute-time.Second, dls[0].at.Sub(resumed), "the dead letter comes when the window's rest has run")
	require.True(t, dls[0].input.WindowStart.Equal(resumed.Add(-time.Second)), "the window start moved on by the throttled time: %s", dls[0].input.WindowStart)
	require.Contains(t, dls[0].input.Reason, "503")
	for i, a := range sends {
		require.EqualValues(t, i+2, a.number, "attempts count on from the throttled retry, across every run")
	}
}
