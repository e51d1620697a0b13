package api

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// Pages of GET /v1/events.
const (
	eventPageDefault = 50
	eventPageMax     = 200
)

// EventList answers GET /v1/events, the event log (the portal's
// Events view searches it): the tenant's events newest first, by
// correlation, type or endpoint, each with its deliveries' endpoints and
// states but neither its payload nor its attempts, which GET
// /v1/events/{id} has. Its cursor is opaque: the last row's accepted_at
// and id.
func (s *Server) EventList(c echo.Context, q wire.EventListParams) error {
	limit, p := queryLimit(q.Limit, eventPageDefault, eventPageMax)
	if p != nil {
		return p
	}
	f := store.EventFilter{CorrelationID: deref(q.CorrelationID), Type: deref(q.Type), EndpointID: deref(q.EndpointID), Limit: limit}
	if v := deref(q.Cursor); v != "" {
		at, id, ok := decodeEventCursor(v)
		if !ok {
			return fieldProblem("cursor", "cursor is not one this API returned")
		}
		f.Before, f.BeforeID = &at, id
	}
	events, err := s.ledger(c).EventList(c.Request().Context(), f)
	if err != nil {
		return err
	}
	page := wire.EventPage{Items: make([]wire.EventSummary, 0, len(events))}
	for _, ev := range events {
		item := wire.EventSummary{ID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, Type: ev.Type,
			State: wire.State(ev.State), AcceptedAt: ev.AcceptedAt, Deliveries: make([]wire.DeliverySummary, 0, len(ev.Deliveries))}
		for _, d := range ev.Deliveries {
			item.Deliveries = append(item.Deliveries, wire.DeliverySummary{EndpointID: d.EndpointID, State: deliveryView(ev, d)})
		}
		page.Items = append(page.Items, item)
	}
	if len(events) == limit {
		last := events[len(events)-1]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(last.AcceptedAt.UTC().Format(time.RFC3339Nano) + "|" + last.ID))
	}
	return c.JSON(http.StatusOK, page)
}

// decodeEventCursor reads an event page's cursor: accepted_at|id.
func decodeEventCursor(v string) (time.Time, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return time.Time{}, "", false
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok || id == "" {
		return time.Time{}, "", false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	return t, id, err == nil
}
