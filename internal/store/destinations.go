package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/transport"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// EndpointTenant returns the tenant of endpoint id (not deleted), or
// ErrNotFound: an operator's command names an endpoint by its id alone.
func (s *Store) EndpointTenant(ctx context.Context, id string) (string, error) {
	t, err := s.q.EndpointTenant(ctx, id)
	if err != nil {
		return "", fmt.Errorf("find endpoint's tenant: %w", translate(err))
	}
	return t, nil
}

// LaneDelivery is one delivery of an endpoint as EndpointDeliveries
// returns it.
type LaneDelivery struct {
	EventID       string
	CorrelationID string
	Sequence      int64
	State         contract.State
}

// EndpointDeliveries returns every delivery of the endpoint, lane by lane
// in sequence order: what the conformance check of a broker destination
// compares the broker's content with. A store limited to some endpoints
// (OnlyEndpoints) reads none of another's.
func (s *Store) EndpointDeliveries(ctx context.Context, endpointID string) ([]LaneDelivery, error) {
	if !s.reaches(endpointID) {
		return nil, nil // as every read of an endpoint a limited store does not reach
	}
	rows, err := s.q.EndpointDeliveries(ctx, dbsqlc.EndpointDeliveriesParams{TenantID: s.tenant, EndpointID: endpointID})
	if err != nil {
		return nil, fmt.Errorf("list endpoint deliveries: %w", err)
	}
	out := make([]LaneDelivery, len(rows))
	for i, r := range rows {
		out[i] = LaneDelivery{EventID: r.EventID, CorrelationID: r.CorrelationID, Sequence: r.Sequence, State: contract.State(r.State)}
	}
	return out, nil
}

// Destination is what the endpoint's transport needs of it for an attempt
// that starts at at: privateTargets says its tenant is granted the
// private-target allowlist.
func (e Endpoint) Destination(privateTargets bool, at time.Time) transport.Destination {
	return transport.Destination{EndpointID: e.ID, URL: e.URL, URLPathPublic: e.Settings.URLPathPublic, Headers: e.Settings.Headers,
		Secrets: e.SigningSecrets(at), PrivateTargets: privateTargets, Config: e.Config, Credentials: e.Credentials}
}
