package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/client"
)

// TestEndpointStatsCountFailures: one endpoint's receiver answers 503 once
// to x-1 (retried, then delivered) and 400 to x-2 (dead-lettered, x-3 held
// behind it), while y-1 goes through at once; another endpoint's receiver
// takes everything. GET /v1/endpoints/{id}/stats counts exactly those
// attempts for each endpoint, and the failing one's dead letter, held
// delivery and oldest undelivered.
func TestEndpointStatsCountFailures(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	flaky, well := newLedgerReceiver(t), newLedgerReceiver(t)
	epFlaky, epWell := b.createEndpoint(flaky.URL()), b.createEndpoint(well.URL())
	flaky.secret, well.secret = epFlaky.Secret, epWell.Secret
	x, y := b.id("x"), b.id("y")
	// Each answer takes a few milliseconds, so that no attempt's latency
	// rounds down to 0 ms on a fast machine: the figures are asserted > 0.
	slow := func() { time.Sleep(3 * time.Millisecond) }
	well.fault = func(contract.Envelope, int) string { slow(); return "" }
	flaky.fault = func(ev contract.Envelope, n int) string {
		slow()
		switch {
		case ev.ID == x+"-1" && n == 1:
			return "503"
		case ev.ID == x+"-2":
			return "400"
		}
		return ""
	}
	for s, id := range []string{x + "-1", x + "-2", x + "-3"} {
		code, _ := b.postEvent(id, x, int64(s+1), epFlaky.ID, map[string]any{"n": s})
		require.Equal(t, http.StatusAccepted, code)
	}
	code, _ := b.postEvent(y+"-1", y, 1, epFlaky.ID, map[string]any{"n": 0})
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.postEvent(b.id("w-1"), b.id("w"), 1, epWell.ID, map[string]any{"n": 0})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(x+"-1", contract.StateDelivered, 30*time.Second)
	b.waitState(x+"-2", contract.StateDeadLettered, 30*time.Second)
	b.waitState(y+"-1", contract.StateDelivered, 30*time.Second)
	b.waitState(b.id("w-1"), contract.StateDelivered, 30*time.Second)

	var h client.EndpointHealth
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+epFlaky.ID+"/stats", nil, &h))
	require.Equal(t, epFlaky.ID, h.EndpointID)
	require.EqualValues(t, 4, h.Attempts, "x-1 twice, x-2 once, y-1 once; x-3 never")
	require.Equal(t, client.AttemptOutcomes{Delivered: 2, Retry: 1, Permanent: 1}, h.Outcomes)
	require.Equal(t, 0.5, h.SuccessRate.MustGet())
	require.Greater(t, h.LatencyP50Ms.MustGet(), 0.0)
	require.GreaterOrEqual(t, h.LatencyP99Ms.MustGet(), h.LatencyP50Ms.MustGet())
	require.EqualValues(t, 1, h.DeadLettersOpen)
	require.EqualValues(t, 1, h.Waiting, "x-3 waits behind the dead letter")
	require.Zero(t, h.Delivering)
	require.NotNil(t, h.OldestUndelivered)
	require.Equal(t, x+"-2", h.OldestUndelivered.EventID)
	require.Equal(t, x, h.OldestUndelivered.CorrelationID)
	require.EqualValues(t, 2, h.OldestUndelivered.Sequence)
	require.Equal(t, contract.StateDeadLettered, contract.State(h.OldestUndelivered.State))
	require.Zero(t, flaky.requestsFor(x+"-3"))

	var w client.EndpointHealth
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints/"+epWell.ID+"/stats", nil, &w))
	require.EqualValues(t, 1, w.Attempts)
	require.Equal(t, client.AttemptOutcomes{Delivered: 1}, w.Outcomes)
	require.Equal(t, 1.0, w.SuccessRate.MustGet())
	require.Greater(t, w.LatencyP50Ms.MustGet(), 0.0)
	require.Zero(t, w.DeadLettersOpen)
	require.Zero(t, w.Waiting+w.Delivering)
	require.Nil(t, w.OldestUndelivered)

	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/endpoints/nosuch/stats", nil, nil))
}
