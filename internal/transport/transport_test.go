package transport_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/transport"
)

type nop struct{}

func (nop) Validate(context.Context, transport.Destination) error { return nil }
func (nop) Send(context.Context, transport.Destination, transport.Message) (transport.Result, error) {
	return transport.Result{Outcome: transport.Delivered}, nil
}

// TestRegistryLookup: an endpoint that names no type is the default's; a
// type nobody registered is an error naming it.
func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	r, err := transport.NewRegistry(map[string]transport.Transport{transport.DefaultType: nop{}})
	require.NoError(t, err)
	tr, err := r.Lookup("")
	require.NoError(t, err)
	require.Equal(t, nop{}, tr)
	_, err = r.Lookup("carrier-pigeon")
	require.ErrorIs(t, err, transport.ErrUnknownType)
	require.Contains(t, err.Error(), "carrier-pigeon")

	_, err = transport.NewRegistry(map[string]transport.Transport{"": nop{}})
	require.Error(t, err)
}
