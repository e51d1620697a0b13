package workflows_test

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/workflows"
)

// TestSequencerFinishRacingAResyncAfterAReset plays, in the workflow, what
// an end-to-end run once left behind: an operator reset the sequencer to
// when 1 was in flight at ep_1 (it forgot 2's arrival, 1's finish and 2's
// release); the heads sweep started 2's workflow again where the ledger had
// it (released) and resynced the sequencer; 2 was delivered, and its
// finish, unknown to the sequencer, resynced it again while the sweep's
// load was under way, and read the ledger with nothing open. The sweep's
// load read the ledger while 2 was still delivering, or after (both updates
// reached the sequencer in one workflow task), and the loads land in
// either order. Every way the sequencer must end through 2: its cursor at
// 3, nothing in flight.
func TestSequencerFinishRacingAResyncAfterAReset(t *testing.T) {
	for _, tc := range []struct {
		name       string
		staleFirst bool
		// freshSweep: the sweep's load read the ledger after the mark too
		// (both updates came in one workflow task).
		freshSweep bool
	}{
		{"the stale load lands first", true, false},
		{"the stale load lands last", false, false},
		{"both read after the finish, the sweep's lands first", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t)
			lane := func(lastFinished int64, open ...int64) contract.LaneState {
				return contract.LaneState{Endpoint: "ep_1", Previous: lastFinished, LastFinished: lastFinished, Queued: queued(open...)}
			}
			var (
				mu         sync.Mutex
				sweepID    string // the sweep's load: the first the sequencer runs
				bothCalled = make(chan struct{})
				landed     = map[string]chan struct{}{}
				loads      = map[string]bool{}
				order      []string // the loads of the correlation as they landed
			)
			landedCh := func(id string) chan struct{} {
				mu.Lock()
				defer mu.Unlock()
				if landed[id] == nil {
					landed[id] = make(chan struct{})
				}
				return landed[id]
			}
			env.SetOnLocalActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
				mu.Lock()
				if loads[info.ActivityID] {
					order = append(order, info.ActivityID)
				}
				mu.Unlock()
				close(landedCh(info.ActivityID))
			})
			env.OnActivity(act.LoadSequencer, mock.Anything, tenant, correlation).Return(func(ctx context.Context, _, _ string) (contract.SequencerLoad, error) {
				id := activity.GetInfo(ctx).ActivityID
				mu.Lock()
				loads[id] = true
				if len(loads) == 2 {
					close(bothCalled)
				}
				mu.Unlock()
				// Both run at once; the sweep's was scheduled first.
				<-bothCalled
				mu.Lock()
				// Activity IDs count up: shorter is smaller.
				sweepOf := slices.SortedFunc(maps.Keys(loads), func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })[0]
				sweepID = sweepOf
				mu.Unlock()
				sweep := id == sweepOf
				if sweep {
					// It read the ledger before 2's delivered mark committed
					// (unless freshSweep).
					if !tc.staleFirst {
						<-landedCh("the finish's")
					}
					if tc.freshSweep {
						return contract.SequencerLoad{Next: 3, Frontier: 3}, nil
					}
					return contract.SequencerLoad{Next: 2, Frontier: 3, Lanes: []contract.LaneState{lane(1, 2)}}, nil
				}
				if tc.staleFirst {
					<-landedCh(sweepOf)
				} else {
					defer func() {
						go func() { <-landedCh(id); close(landedCh("the finish's")) }()
					}()
				}
				return contract.SequencerLoad{Next: 3, Frontier: 3}, nil
			})
			env.OnActivity(act.LoadLanes, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.LoadLanesInput) ([]contract.LaneState, error) {
				var out []contract.LaneState
				for range in.Lanes {
					out = append(out, lane(2))
				}
				return out, nil
			}).Maybe()
			var failures []error
			callback := &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { failures = append(failures, err) },
				OnComplete: func(_ any, err error) { failures = append(failures, err) },
			}
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(contract.UpdateResync, "sweep", callback)
				env.UpdateWorkflow(contract.UpdateFinished, "finish-2", callback,
					contract.Done{Sequence: 2, EventID: eventID(2), Lanes: []contract.LaneDone{{Endpoint: "ep_1"}}})
			}, time.Second)
			var later contract.SequencerState
			env.RegisterDelayedCallback(func() {
				v, err := env.QueryWorkflow(contract.QueryState)
				require.NoError(t, err)
				require.NoError(t, v.Get(&later))
				// Its main loop wakes at an update's start, not at its end,
				// so it would wait for the next update to go idle.
				env.CancelWorkflow()
			}, 30*time.Second)
			reset := contract.SequencerState{Next: 1, Frontier: 2,
				Lanes: []contract.LaneState{{Endpoint: "ep_1", InFlight: 1, InFlightEvent: eventID(1)}}}

			env.ExecuteWorkflow(contract.SequencerWorkflow, workflows.SequencerInput{Tenant: tenant, CorrelationID: correlation, State: &reset, IdleTimeout: time.Minute})

			require.True(t, env.IsWorkflowCompleted())
			require.Len(t, order, 2)
			require.Equal(t, tc.staleFirst, order[0] == sweepID, "the loads landed in the order the case is about")
			require.Equal(t, []error{nil, nil}, failures, "both updates answered")
			require.EqualValues(t, 3, later.Next, "both events are delivered: %+v", later)
			require.Empty(t, later.Lanes[0].Queued)
			require.Zero(t, later.Lanes[0].InFlight)
		})
	}
}
