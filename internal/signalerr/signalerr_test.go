package signalerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNotSentOnlyWhenSurely: an operator's claim is undone only for
// a refusal of the request itself; a timeout, an outage, a missing
// workflow or an error nobody knows may follow a signal the server took.
func TestNotSentOnlyWhenSurely(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		notSent bool
	}{
		{"nil", nil, false},
		{"invalid argument", serviceerror.NewInvalidArgument("bad signal"), true},
		{"invalid argument, wrapped", fmt.Errorf("signal e-1: %w", serviceerror.NewInvalidArgument("bad signal")), true},
		{"invalid argument, from a gRPC status", serviceerror.FromStatus(status.New(codes.InvalidArgument, "bad")), true},
		{"namespace not found", serviceerror.NewNamespaceNotFound("ns"), true},
		{"namespace not active", serviceerror.NewNamespaceNotActive("ns", "a", "b"), true},
		{"permission denied", serviceerror.NewPermissionDenied("no", ""), true},
		{"met before sending", beforeSend{context.Canceled}, true},
		{"met before sending, wrapped", fmt.Errorf("signal: %w", beforeSend{errors.New("ledger down")}), true},
		{"deadline exceeded", serviceerror.NewDeadlineExceeded("timeout"), false},
		{"deadline exceeded, from a gRPC status", serviceerror.FromStatus(status.New(codes.DeadlineExceeded, "timeout")), false},
		{"context deadline", context.DeadlineExceeded, false},
		{"context canceled while sending", context.Canceled, false},
		{"canceled", serviceerror.NewCanceled("gone"), false},
		{"unavailable", serviceerror.NewUnavailable("down"), false},
		{"resource exhausted", serviceerror.FromStatus(status.New(codes.ResourceExhausted, "busy")), false},
		{"workflow not found", serviceerror.NewNotFound("workflow execution already completed"), false},
		{"internal", serviceerror.NewInternal("oops"), false},
		{"unknown", errors.New("connection reset by peer"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.notSent, NotSent(tc.err))
		})
	}
}
