package api

import (
	"testing"

	"github.com/hookflow/hookflow/kit/intake"
)

// TestEndpointIDsHaveTheReservedForm: every endpoint ID the API makes has
// the form intake refuses as a producer's correlation_id, so no producer's
// correlation can take the place of an endpoint's operational events.
func TestEndpointIDsHaveTheReservedForm(t *testing.T) {
	t.Parallel()
	for range 100 {
		if id := newID(intake.EndpointIDPrefix); !intake.EndpointIDForm(id) {
			t.Fatalf("endpoint ID %q has not the reserved form", id)
		}
	}
}
