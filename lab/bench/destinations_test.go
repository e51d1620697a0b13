package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDestinations(t *testing.T) {
	for in, want := range map[string][]string{
		"all":                  {DestinationsAll},
		"none":                 nil,
		"":                     nil,
		"webhook,nats,redis":   {"webhook", "nats", "redis"},
		" nats , nats ,redis ": {"nats", "redis"},
	} {
		got, err := ParseDestinations(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"kafka", "all,nats", "webhook,sqs"} {
		_, err := ParseDestinations(in)
		require.Error(t, err, in)
	}
}

// TestDestinationsFailTheRunOnABrokenPromise: a destination that misses,
// repeats or reorders a delivery fails the run however fast it was, and
// the figures are still printed.
func TestDestinationsFailTheRunOnABrokenPromise(t *testing.T) {
	pass := DestinationCheck{Source: "test", Lanes: 2, Delivered: 10, Stored: 10, OK: true}
	fail := pass
	fail.Stored, fail.Repeated, fail.OK = 11, 1, false
	d := &DestinationsResult{Events: 10, Correlations: 2, Rounds: 1, Types: []DestinationResult{
		{Type: "webhook", Events: 10, Deliveries: 10, DeliveriesPerSec: 20, TotalCPUPer1000: 30, Check: pass},
		{Type: "nats", Events: 10, Deliveries: 10, DeliveriesPerSec: 40, TotalCPUPer1000: 20, Check: fail},
	}}
	rep := &Report{Destinations: d}
	err := rep.Err()
	require.Error(t, err)
	require.Contains(t, err.Error(), "destination nats: FAIL")
	require.NotContains(t, err.Error(), "webhook")

	var out bytes.Buffer
	require.NoError(t, d.writeTable(&out))
	require.Contains(t, out.String(), "nats check: FAIL")
	require.Contains(t, out.String(), "webhook check: PASS")

	d.Types[1].Check = pass
	require.NoError(t, rep.Err())
	require.NoError(t, (&Report{}).Err(), "a run without the comparison has nothing to fail")
}
