package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/hookflow/hookflow/activities"
	hfworker "github.com/hookflow/hookflow/worker"
)

// replayRegistry lets hfworker.Register fill a replayer, so histories are
// replayed under exactly the names a production worker registers. A
// replayer runs no activities: their registrations are dropped, and the
// embedded nil Registry panics on anything else Register might start doing.
type replayRegistry struct {
	worker.Registry
	replayer worker.WorkflowReplayer
}

func (r replayRegistry) RegisterWorkflow(w any) { r.replayer.RegisterWorkflow(w) }
func (r replayRegistry) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	r.replayer.RegisterWorkflowWithOptions(w, o)
}
func (r replayRegistry) RegisterDynamicWorkflow(w any, o workflow.DynamicRegisterOptions) {
	r.replayer.RegisterDynamicWorkflow(w, o)
}
func (replayRegistry) RegisterActivity(any)                                         {}
func (replayRegistry) RegisterActivityWithOptions(any, activity.RegisterOptions)    {}
func (replayRegistry) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {}

// TestReplayRecordedHistories replays every workflow history recorded from a
// real server (workflows/testdata/*_history.json, exported with the
// recorder in lab/tools/recordhistory) against the current workflow
// code: a change that would break open workflows fails here with a
// non-determinism error. testdata/README.md says what each file shows.
//
// An empty folder fails too: a glob that matched nothing would otherwise
// pass with nothing replayed, and the guard would be gone unnoticed.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*_history.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in workflows/testdata (testdata/README.md says how to record them)")

	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			replayer := worker.NewWorkflowReplayer()
			hfworker.Register(replayRegistry{replayer: replayer}, &activities.Activities{})
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, file))
		})
	}
}
