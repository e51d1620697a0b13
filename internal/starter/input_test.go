package starter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
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
