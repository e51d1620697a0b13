package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookflow/hookflow/kit/intake"
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
	// The events routed to some endpoints (the filter's, or all a limited
	// session sees) are read along those endpoints' deliveries.
	endpoints, byEndpoint := []string{f.EndpointID}, f.EndpointID != ""
	if !byEndpoint && s.limited {
		endpoints, byEndpoint = s.only, true
	}
	var out []Event
	var err error
	if byEndpoint {
		var rows []dbsqlc.EventListByEndpointsRow
		rows, err = s.q.EventListByEndpoints(ctx, dbsqlc.EventListByEndpointsParams{TenantID: s.tenant, Endpoints: endpoints,
			CorrelationID: nullIfZero(f.CorrelationID), Type: nullIfZero(f.Type), OnlyEndpoints: s.onlyEndpoints(),
			BeforeTime: f.Before, BeforeID: f.BeforeID, MaxRows: int32(f.Limit)})
		if err == nil {
			out, err = rowsOf(rows, func(r dbsqlc.EventListByEndpointsRow) (Event, error) { return eventOf(dbsqlc.EventsRouted(r)) })
		}
	} else {
		var rows []dbsqlc.EventListRow
		rows, err = s.q.EventList(ctx, dbsqlc.EventListParams{TenantID: s.tenant, CorrelationID: nullIfZero(f.CorrelationID),
			Type: nullIfZero(f.Type), BeforeTime: f.Before, BeforeID: f.BeforeID, MaxRows: int32(f.Limit)})
		if err == nil {
			out, err = rowsOf(rows, func(r dbsqlc.EventListRow) (Event, error) { return eventOf(dbsqlc.EventsRouted(r)) })
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if s.limited {
		for i := range out {
			out[i] = s.narrow(out[i])
		}
	}
	return out, nil
}

// seesCorrelation reports whether a store limited to some endpoints may
// see events of correlation id: any producer's, but of hookflow's own
// (operational events, test events) only those about one of its endpoints:
// a notice about another endpoint tells of that endpoint's events.
func (s *Store) seesCorrelation(id string) bool {
	rest, ok := strings.CutPrefix(id, intake.ReservedCorrelationPrefix)
	if !s.limited || !ok {
		return true
	}
	rest = strings.TrimPrefix(rest, "test:")
	return slices.Contains(s.only, rest)
}

// narrow is e as a store limited to some endpoints (OnlyEndpoints) shows
// it: its deliveries to them, and its routing to them, only; none at all
// when it is hookflow's own about another endpoint (seesCorrelation).
func (s *Store) narrow(e Event) Event {
	if !s.seesCorrelation(e.CorrelationID) {
		e.Deliveries, e.Endpoints, e.FilteredOut = nil, nil, nil
		return e
	}
	e.Deliveries = slices.DeleteFunc(e.Deliveries, func(d Delivery) bool { return !s.reaches(d.EndpointID) })
	e.Endpoints = slices.DeleteFunc(e.Endpoints, func(id string) bool { return !s.reaches(id) })
	e.FilteredOut = slices.DeleteFunc(e.FilteredOut, func(id string) bool { return !s.reaches(id) })
	return e
}

// EventType is a type of the tenant's events as the log has seen it: its
// latest event, and that event's payload as a sample (nil when larger than
// asked, or pruned by retention; SampleBytes is its size either way, 0
// once pruned).
type EventType struct {
	Type        string
	LastEventID string
	LastSeenAt  time.Time
	Sample      []byte
	SampleBytes int
}

// EventTypeList returns up to limit of the tenant's event types whose
// names sort after after ("" for the first page), in name order, each
// with its latest event and, when its payload is at most sampleMax bytes,
// that payload. Limited to some endpoints
// (OnlyEndpoints), only the events routed to one of them count.
func (s *Store) EventTypeList(ctx context.Context, after string, sampleMax, limit int) ([]EventType, error) {
	var rows []dbsqlc.EventTypeListRow
	var err error
	if s.limited {
		var limited []dbsqlc.EventTypeListByEndpointsRow
		limited, err = s.q.EventTypeListByEndpoints(ctx, dbsqlc.EventTypeListByEndpointsParams{TenantID: s.tenant, Endpoints: s.only, After: after,
			SampleMax: int32(sampleMax), MaxRows: int32(limit)})
		for _, r := range limited {
			rows = append(rows, dbsqlc.EventTypeListRow(r))
		}
	} else {
		rows, err = s.q.EventTypeList(ctx, dbsqlc.EventTypeListParams{TenantID: s.tenant, After: after, SampleMax: int32(sampleMax), MaxRows: int32(limit)})
	}
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	out := make([]EventType, len(rows))
	for i, r := range rows {
		out[i] = EventType{Type: r.Type, LastEventID: r.LastEventID, LastSeenAt: r.LastSeenAt, Sample: r.Sample, SampleBytes: int(r.SampleBytes)}
	}
	return out, nil
}
