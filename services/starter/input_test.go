package starter

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/workflows"
)

// TestInputCarriesEachLanesRoutedSettings: each lane of a workflow's input
// gets the window and timeout its delivery was routed with; a delivery
// routed with the server's gets none, so the event's (the server's, from
// the config) applies.
func TestInputCarriesEachLanesRoutedSettings(t *testing.T) {
	t.Parallel()
	s := &Starter{cfg: Config{RecoveryWindow: 5 * time.Minute, DeliveryTimeout: 15 * time.Second}}
	window, timeout := int64(90_000), int64(2_500)
	ev := store.Event{Endpoints: []string{"a", "b"}, Deliveries: []store.Delivery{
		{EndpointID: "a"},
		{EndpointID: "b", RecoveryWindowMS: &window, TimeoutMS: &timeout},
	}}
	in := s.Input(ev)
	require.Equal(t, 5*time.Minute, in.RecoveryWindow)
	require.Equal(t, 15*time.Second, in.Event.Timeout)
	require.Equal(t, []workflows.LaneInput{
		{Endpoint: "a"},
		{Endpoint: "b", RecoveryWindow: 90 * time.Second, Timeout: 2500 * time.Millisecond},
	}, in.Lanes)
}

// TestInputStaysSmall (the fan-out caps): what an accepted event brings to
// Temporal grows with its lanes alone, never with its payload: at the
// most subscribers HOOKFLOW_MAX_SUBSCRIBERS allows, each lane with the
// longest endpoint ID and its own settings, and a 1 MiB payload, the
// workflow's start input and the sequencer's arrival stay under
// contract.MaxStartInputBytes (256 KiB; Temporal's limit is 2 MB).
func TestInputStaysSmall(t *testing.T) {
	t.Parallel()
	s := &Starter{cfg: Config{RecoveryWindow: 5 * time.Minute, DeliveryTimeout: 15 * time.Second}}
	long := strings.Repeat("k", 255)
	window, timeout := int64(24*time.Hour/time.Millisecond), int64(time.Minute/time.Millisecond)
	ev := store.Event{TenantID: strings.Repeat("t", 200), Event: intake.Event{ID: long, CorrelationID: long, Sequence: math.MaxInt64, Type: long,
		Data: json.RawMessage(`{"blob":"` + strings.Repeat("x", 1<<20) + `"}`)}}
	for i := range contract.MaxSubscribersCeiling {
		ep := fmt.Sprintf("%0255d", i)
		ev.Endpoints = append(ev.Endpoints, ep)
		ev.Deliveries = append(ev.Deliveries, store.Delivery{EndpointID: ep, RecoveryWindowMS: &window, TimeoutMS: &timeout})
	}
	in := s.Input(ev)
	require.Len(t, in.Lanes, contract.MaxSubscribersCeiling)
	require.Empty(t, in.Event.Data, "the payload stays in the ledger")
	for name, v := range map[string]any{
		"start input": in,
		"arrival":     contract.Arrival{Sequence: ev.Sequence, EventID: ev.ID, Endpoints: ev.Endpoints},
	} {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		size := len(p.GetData())
		t.Logf("FIGURE %s at %d lanes and a 1 MiB payload: %d bytes", name, contract.MaxSubscribersCeiling, size)
		require.Less(t, size, contract.MaxStartInputBytes, name)
	}
}
