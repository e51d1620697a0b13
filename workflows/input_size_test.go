package workflows

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestLaneInputsStayUnderThePayloadLimit: the largest
// input an event's workflow can be given after its start (a continue-as-
// new, or a restart with every lane dead-lettered) at the most lanes
// HOOKFLOW_MAX_SUBSCRIBERS allows stays under half of Temporal's 2 MB
// payload limit: every lane at once released, dead-lettered with a replay
// claimed by a key of the longest name, in a window with a failure and a
// dead letter due, with the longest endpoint ID and reasons a receiver
// made as long and as escape-heavy as contract.CapReason lets them be, and
// the longest skipped list a release names (contract.MaxSkippedListed of
// the largest sequences). Operators' skip notes are left out: they come
// one operator action at a time, not from a receiver's answer.
func TestLaneInputsStayUnderThePayloadLimit(t *testing.T) {
	t.Parallel()
	reason := contract.CapReason(contract.WindowSpentPrefix + strings.Repeat("<", 10_000))
	by := strings.Repeat("<", 100) // a key's name: at most 100 printable characters
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("k", 255)
	in := EventInput{
		Event: contract.DeliverInput{EventID: long, CorrelationID: long, Sequence: math.MaxInt64, Type: long,
			Timestamp: now, Timeout: time.Hour, AttemptOffset: math.MaxInt32},
		RecoveryWindow: 24 * time.Hour, MaxHistory: math.MaxInt32,
		Published: &Published{State: contract.StateDeadLettered},
	}
	var skipped []int64
	for i := range contract.MaxSkippedListed {
		skipped = append(skipped, math.MaxInt64-int64(contract.MaxSkippedListed-i))
	}
	require.Equal(t, skipped, contract.ReleaseSkipped(append(slices.Clone(skipped), 1, 2, 3), []int64{4, 5}, 0, math.MaxInt64), "the longest list a release names")
	for i := range contract.MaxSubscribersCeiling {
		ep := fmt.Sprintf("%0255d", i)
		in.Published.DeadLettered = append(in.Published.DeadLettered, ep)
		in.Lanes = append(in.Lanes, LaneInput{
			Endpoint: ep,
			Released: &contract.LaneRelease{Endpoint: ep, Previous: 1, Skipped: skipped},
			DeadLetter: &DeadLetter{Generation: math.MaxInt32, Reason: reason,
				Replay: &contract.Replay{EndpointID: ep, Generation: math.MaxInt32, By: by}},
			RecoveryWindow: 24 * time.Hour, Timeout: time.Hour, Finished: contract.StateDeadLettered,
			Attempts: math.MaxInt32, Windows: math.MaxInt32,
			Resume: &LaneResume{WindowStart: now, Retrying: true, AttemptOffset: math.MaxInt32, Failure: reason,
				WaitUntil: now, Woken: true, DeadLetterDue: reason},
		})
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(in)
	require.NoError(t, err)
	size := len(p.GetData())
	t.Logf("FIGURE the largest event input at %d lanes: %d bytes (%d a lane)", contract.MaxSubscribersCeiling, size, size/contract.MaxSubscribersCeiling)
	require.Less(t, size, contract.MaxPayloadBytes)
}
