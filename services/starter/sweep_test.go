package starter

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestNamesDeadLetterReadsTheWorkflowsSearchAttribute: the sweep trusts a
// dead-lettered head's workflow to wait on it only when the workflow's
// DeadLetteredEndpointIds names the endpoint; without the attribute (a
// Reset to before the dead letter) it asks the workflow.
func TestNamesDeadLetterReadsTheWorkflowsSearchAttribute(t *testing.T) {
	t.Parallel()
	describe := func(ids ...string) *workflowservice.DescribeWorkflowExecutionResponse {
		fields := map[string]*commonpb.Payload{}
		if ids != nil {
			p, err := converter.GetDefaultDataConverter().ToPayload(ids)
			require.NoError(t, err)
			fields[contract.DeadLetteredEndpointIDsKey.GetName()] = p
		}
		return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
		}}
	}
	require.True(t, namesDeadLetter(describe("ep_a", "ep_b"), "ep_b"))
	require.False(t, namesDeadLetter(describe("ep_a"), "ep_b"))
	require.False(t, namesDeadLetter(describe(), "ep_b"))
	require.False(t, namesDeadLetter(&workflowservice.DescribeWorkflowExecutionResponse{}, "ep_b"))
}
