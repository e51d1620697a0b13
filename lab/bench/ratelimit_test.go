package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSteadyRate: the rate is read over the window that begins skip after
// the first commit (or at the last post, when later), whatever order the
// commits come in, and over what there is when they end sooner.
func TestSteadyRate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var times []time.Time
	// A burst of 10 in the first second, then 5/s for 80 s, newest first.
	for i := range 10 {
		times = append(times, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	for i := range 400 {
		times = append(times, t0.Add(time.Second+time.Duration(i)*200*time.Millisecond))
	}
	for i, j := 0, len(times)-1; i < j; i, j = i+1, j-1 {
		times[i], times[j] = times[j], times[i]
	}
	rate, span := steadyRate(times, time.Time{}, 5*time.Second, 60*time.Second)
	require.InDelta(t, 5, rate, 1e-9, "the burst is skipped")
	require.InDelta(t, 60, span, 1e-9)

	rate, span = steadyRate(times, time.Time{}, 5*time.Second, 120*time.Second)
	require.InDelta(t, 75.8, span, 1e-9, "the commits end 80.8 s after the first")
	require.InDelta(t, 5, rate, 0.1)

	rate, span = steadyRate(times, t0.Add(20*time.Second), 5*time.Second, 60*time.Second)
	require.InDelta(t, 60, span, 1e-9, "from the last post, 20 s after the first commit")
	require.InDelta(t, 5, rate, 1e-9)

	rate, span = steadyRate(nil, time.Time{}, time.Second, time.Minute)
	require.Zero(t, rate)
	require.Zero(t, span)
}
