package activities_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestDeliverSendsNothingWhileTheCircuitIsOpen: failures up to the
// endpoint's threshold open its circuit; an attempt then sends nothing,
// records nothing and answers how long to wait; once the probe is due one
// attempt probes, and its success closes the circuit.
func TestDeliverSendsNothingWhileTheCircuitIsOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var up atomic.Bool
	var calls atomic.Int32
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b := setupDeliver(t, url)
	threshold := 2
	_, err := b.st.EndpointUpdate(ctx, b.in.EndpointID, store.EndpointChange{CircuitFailureThreshold: &threshold})
	require.NoError(t, err)

	for range threshold {
		_, err := b.deliver(t)
		requireFailure(t, err, contract.ErrTypeRetryable, true, 0)
	}
	c, err := b.st.CircuitGet(ctx, b.in.EndpointID)
	require.NoError(t, err)
	require.Equal(t, store.CircuitOpen, c.State)

	res, err := b.deliver(t)
	require.NoError(t, err)
	require.Greater(t, res.CircuitOpen, time.Duration(0), "the workflow is told to wait")
	require.LessOrEqual(t, res.CircuitOpen, store.ProbeBackoffInitial)
	require.EqualValues(t, threshold, calls.Load(), "an open circuit sends nothing")
	require.Len(t, b.attempts(t), threshold, "and records nothing")

	up.Store(true)
	_, err = b.st.Pool().Exec(ctx, `UPDATE endpoint_circuits SET next_probe_at = now() WHERE endpoint_id = $1`, b.in.EndpointID)
	require.NoError(t, err)
	res, err = b.deliver(t)
	require.NoError(t, err)
	require.Zero(t, res.CircuitOpen)
	require.Equal(t, http.StatusOK, res.StatusCode, "the probe is delivered")
	require.EqualValues(t, threshold+1, calls.Load())
	c, err = b.st.CircuitGet(ctx, b.in.EndpointID)
	require.NoError(t, err)
	require.Equal(t, store.CircuitHalfOpen, c.State, "one answer does not close it (store.DefaultCloseSuccesses)")
	require.Equal(t, 1, c.ProbeSuccesses)
	require.Zero(t, c.ConsecutiveFailures)
	require.False(t, c.NextProbeAt.After(c.Now), "the next probe is due at once")
}

// TestDeliverRejectionIsNotAnOutage: a 4xx is the endpoint answering: it
// never opens the circuit.
func TestDeliverRejectionIsNotAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	b := setupDeliver(t, url)
	threshold := 1
	_, err := b.st.EndpointUpdate(ctx, b.in.EndpointID, store.EndpointChange{CircuitFailureThreshold: &threshold})
	require.NoError(t, err)
	_, err = b.deliver(t)
	requireFailure(t, err, contract.ErrTypePermanent, false, 0)
	c, err := b.st.CircuitGet(ctx, b.in.EndpointID)
	require.NoError(t, err)
	require.Equal(t, store.CircuitClosed, c.State)
	require.Zero(t, c.ConsecutiveFailures)
}
