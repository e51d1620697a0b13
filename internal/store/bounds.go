package store

import (
	"context"
	"fmt"

	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// CorrelationReaches reports whether the store reaches correlation id: a
// store not limited to endpoints reaches every one; one limited to some
// (OnlyEndpoints) only a correlation with a lane at one of them (a lane's
// row, or a delivery not finished there), and of hookflow's own only those
// about one of them. What it does not reach is to be answered as a
// correlation that does not exist.
func (s *Store) CorrelationReaches(ctx context.Context, id string) (bool, error) {
	if !s.limited {
		return true, nil
	}
	if !s.seesCorrelation(id) {
		return false, nil
	}
	at, err := s.q.CorrelationLaneAtAny(ctx, dbsqlc.CorrelationLaneAtAnyParams{TenantID: s.tenant, CorrelationID: id, Endpoints: s.only})
	if err != nil {
		return false, fmt.Errorf("find a lane of the correlation: %w", err)
	}
	return orZero(at), nil
}
