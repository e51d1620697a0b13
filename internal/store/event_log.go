package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// EventFilter selects a page of the event log (EventList): empty fields
// match all; Before and BeforeID are the last row of the previous page.
type EventFilter struct {
	CorrelationID string
	Type          string
	EndpointID    string
	Before        *time.Time
	BeforeID      string
	Limit         int
}

// EventList returns a page of the tenant's events, newest first (ties by
// id, descending), without their payloads (Data is nil). Limited to some
// endpoints (OnlyEndpoints), it returns only the events routed to one of
// them, each with its deliveries to them only, as EventGet does.
func (s *Store) EventList(ctx context.Context, f EventFilter) ([]Event, error) {
	rows, err := s.q.EventList(ctx, dbsqlc.EventListParams{TenantID: s.tenant, CorrelationID: nullIfZero(f.CorrelationID),
		Type: nullIfZero(f.Type), EndpointID: nullIfZero(f.EndpointID), OnlyEndpoints: s.onlyEndpoints(),
		BeforeTime: f.Before, BeforeID: f.BeforeID, MaxRows: int32(f.Limit)})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out, err := rowsOf(rows, func(r dbsqlc.EventListRow) (Event, error) { return eventOf(dbsqlc.EventsRouted(r)) })
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if s.limited {
		for i := range out {
			out[i].Deliveries = slices.DeleteFunc(out[i].Deliveries, func(d Delivery) bool { return !s.reaches(d.EndpointID) })
			out[i].Endpoints = slices.DeleteFunc(out[i].Endpoints, func(id string) bool { return !s.reaches(id) })
		}
	}
	return out, nil
}
