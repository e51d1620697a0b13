package workflows

import (
	"testing"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/temporal"
)

// deliverFailure is Deliver's failure as a real server reports it in
// ActivityTaskFailed/TimedOut, converted the way the SDK hands it to the
// workflow. The test environment does not set the retry state a server
// sets, so the wording of a spent window is checked here.
func deliverFailure(retryState enumspb.RetryState, cause *failurepb.Failure) error {
	return temporal.GetDefaultFailureConverter().FailureToError(&failurepb.Failure{
		Message: "activity error",
		FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{
			ActivityType: &commonpb.ActivityType{Name: "Deliver"}, ActivityId: "5", RetryState: retryState,
		}},
		Cause: cause,
	})
}

func appFailure(msg, typ string, nonRetryable bool) *failurepb.Failure {
	return &failurepb.Failure{Message: msg, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
		ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: typ, NonRetryable: nonRetryable},
	}}
}

func TestFailureReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		err       error
		reason    string
		permanent bool
	}{
		{
			"window spent after a 503",
			deliverFailure(enumspb.RETRY_STATE_TIMEOUT, appFailure("receiver answered 503", contract.ErrTypeRetryable, false)),
			"recovery window spent; last attempt: receiver answered 503", false,
		},
		{
			"window spent while an attempt was running",
			deliverFailure(enumspb.RETRY_STATE_TIMEOUT, &failurepb.Failure{Message: "activity ScheduleToClose timeout",
				FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{
					TimeoutType: enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
				}}}),
			"recovery window spent; last attempt: timed out", false,
		},
		{
			"permanent 4xx",
			deliverFailure(enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, appFailure("receiver answered 400", contract.ErrTypePermanent, true)),
			"permanent rejection: receiver answered 400", true,
		},
		{
			"410 gone",
			deliverFailure(enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, appFailure("receiver answered 410", contract.ErrTypeEndpointGone, true)),
			"endpoint gone (410), endpoint disabled: receiver answered 410", true,
		},
		{
			"endpoint disabled",
			deliverFailure(enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, appFailure("endpoint ep_1 is disabled", contract.ErrTypeEndpointDisabled, true)),
			"endpoint disabled: endpoint ep_1 is disabled", true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reason, permanent := failureReason(tc.err)
			require.Equal(t, tc.reason, reason)
			require.Equal(t, tc.permanent, permanent)
		})
	}
}

// TestOutageCaused: auto_replay replays the dead letters an outage wrote,
// in failureReason's words, and never a rejection, a 410 or a disabling.
func TestOutageCaused(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]bool{
		contract.CircuitOpenReason:                                      true,
		"recovery window spent; last attempt: receiver answered 503":    true,
		"recovery window spent; last attempt: timed out":                true,
		"permanent rejection: receiver answered 400":                    false,
		"endpoint gone (410), endpoint disabled: receiver answered 410": false,
		"endpoint disabled: endpoint ep_1 is disabled":                  false,
	} {
		require.Equal(t, want, contract.OutageCaused(reason), reason)
	}
	reason, permanent := failureReason(temporal.NewApplicationError(contract.CircuitOpenReason, contract.ErrTypeCircuitOpen))
	require.Equal(t, contract.CircuitOpenReason, reason)
	require.False(t, permanent)
}

// TestDisablingCaused: enabling an endpoint replays the dead letters its
// disabling wrote, in failureReason's words: an attempt refused as disabled
// (or gone) and the 410 that disabled it, never an outage's or a rejection.
func TestDisablingCaused(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]bool{
		"endpoint gone (410), endpoint disabled: receiver answered 410": true,
		"endpoint disabled: endpoint ep_1 is disabled":                  true,
		"endpoint disabled: endpoint ep_1 does not exist":               true,
		contract.CircuitOpenReason:                                      false,
		"recovery window spent; last attempt: receiver answered 503":    false,
		"permanent rejection: receiver answered 400":                    false,
	} {
		require.Equal(t, want, contract.DisablingCaused(reason), reason)
	}
}
