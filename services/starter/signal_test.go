package starter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/signalerr"
	"github.com/hookflow/hookflow/internal/store"
)

// TestSignalDeadLetterSendsNothingOnADoneContext: a request already gone
// sends nothing (no client is called here) and says so.
func TestSignalDeadLetterSendsNothingOnADoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Starter{}).SignalDeadLetter(ctx, store.DeadLetter{EventID: "e-1", EndpointID: "ep"}, "replay", nil)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, signalerr.NotSent(err))
}
