package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/catalog"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/intake"
)

// The bounds of GET /v1/event-types: its pages, and the largest payload it
// shows as a sample (a page of the portal, not an export).
const (
	eventTypesDefault = 200
	eventTypesMax     = 500
	eventSampleMax    = 8 << 10
)

// catalogOperations change the catalog: a portal session limited to some
// endpoints reads it but changes nothing in it, since the catalog judges
// every event of the tenant, for every endpoint (auth.go, permits).
var catalogOperations = []string{"eventTypePut", "eventTypeDelete", "eventTypeImport"}

// EventTypeList answers GET /v1/event-types (the portal's "event
// types"): each type of the tenant's events, with its latest event and
// that event's payload as a sample, so a customer writing a receiver sees
// what each type carries, and each type of its catalog, with the schema
// its events are validated against; one item per name, in name order,
// a page at a time. Its cursor is the last name of the page, encoded.
func (s *Server) EventTypeList(c echo.Context, q wire.EventTypeListParams) error {
	limit, p := queryLimit(q.Limit, eventTypesDefault, eventTypesMax)
	if p != nil {
		return p
	}
	after, p := typeCursor(q.Cursor)
	if p != nil {
		return p
	}
	ctx := c.Request().Context()
	ledger := s.ledger(c)
	seen, err := ledger.EventTypeList(ctx, after, eventSampleMax, limit+1)
	if err != nil {
		return err
	}
	entries, err := ledger.EventTypesList(ctx, after, limit+1)
	if err != nil {
		return err
	}
	// Both are in name order: merged, each name once. Each read one more
	// than the page, so whether another page follows is known.
	var items []wire.EventTypeSeen
	for len(seen) > 0 || len(entries) > 0 {
		var item wire.EventTypeSeen
		switch {
		case len(entries) == 0 || len(seen) > 0 && seen[0].Type < entries[0].Name:
			item = seenView(seen[0])
			seen = seen[1:]
		case len(seen) == 0 || entries[0].Name < seen[0].Type:
			item = wire.EventTypeSeen{Type: entries[0].Name, Catalog: entryView(entries[0])}
			entries = entries[1:]
		default:
			item = seenView(seen[0])
			item.Catalog = entryView(entries[0])
			seen, entries = seen[1:], entries[1:]
		}
		items = append(items, item)
	}
	page := wire.EventTypePage{Items: items, More: len(items) > limit}
	if page.More {
		page.Items = items[:limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(items[limit-1].Type))
	}
	if page.Items == nil {
		page.Items = []wire.EventTypeSeen{}
	}
	return c.JSON(http.StatusOK, page)
}

func seenView(t store.EventType) wire.EventTypeSeen {
	item := wire.EventTypeSeen{Type: t.Type, LastEventID: t.LastEventID, LastSeenAt: t.LastSeenAt, SampleBytes: int64(t.SampleBytes)}
	if t.Sample != nil {
		item.Sample = json.RawMessage(t.Sample)
	}
	return item
}

// typeCursor reads a page's cursor: a type's name, encoded.
func typeCursor(cursor *string) (string, *Problem) {
	return nameCursor(cursor, intake.ValidType)
}

// nameCursor reads a cursor that is a name the page ended on, base64url
// encoded, and that valid accepts.
func nameCursor(cursor *string, valid func(field, v string) *intake.FieldError) (string, *Problem) {
	v := deref(cursor)
	if v == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || valid("cursor", string(b)) != nil {
		return "", fieldProblem("cursor", "cursor is not one this API returned")
	}
	return string(b), nil
}

func entryView(e store.CatalogEntry) wire.EventTypeEntry {
	v := wire.EventTypeEntry{Name: e.Name, Description: e.Description, Schema: e.Schema, Version: int64(e.Version), CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if e.Example != nil {
		v.Example = e.Example
	}
	return v
}

// EventTypeGet answers GET /v1/event-types/{name}: the type's catalog
// entry. The name is checked as PUT checks it (400 naming it): one no type
// can have is a bad request, not a query.
func (s *Server) EventTypeGet(c echo.Context, name string, _ wire.EventTypeGetParams) error {
	if fe := intake.ValidType("name", name); fe != nil {
		return fieldProblem(fe.Field, fe.Detail)
	}
	e, err := s.ledger(c).EventTypeGet(c.Request().Context(), name)
	return answerEntry(c, name, e, err)
}

// putRequest is the PUT's body with its schema and example kept as sent:
// the document's type reads them as any JSON, which would lose what
// Compile is to judge (the order of keys, numbers as written).
type putRequest struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
}

// EventTypePut answers PUT /v1/event-types/{name}: the entry created
// (201), or replaced (200, its version raised), or the same content again
// (200, unchanged). Its events are validated against the schema from the
// next acceptance on.
func (s *Server) EventTypePut(c echo.Context, name string, _ wire.EventTypePutParams) error {
	var req putRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	e := catalog.Entry{Name: name, Description: req.Description, Schema: req.Schema}
	if len(req.Example) > 0 && string(req.Example) != "null" {
		e.Example = req.Example
	}
	e, fe := catalog.Check("name", "description", "", e)
	if fe != nil {
		return catalogProblem(fe)
	}
	stored, results, err := s.ledger(c).EventTypesPut(c.Request().Context(), []catalog.Entry{e}, catalog.MaxTypes)
	if err != nil {
		return catalogPutError(err)
	}
	status := http.StatusOK
	if results[0] == store.Created {
		status = http.StatusCreated
	}
	return c.JSON(status, entryView(stored[0]))
}

// EventTypeDelete answers DELETE /v1/event-types/{name} with the entry as
// it was: the type's events are accepted unvalidated from the next
// acceptance on.
func (s *Server) EventTypeDelete(c echo.Context, name string, _ wire.EventTypeDeleteParams) error {
	if fe := intake.ValidType("name", name); fe != nil {
		return fieldProblem(fe.Field, fe.Detail)
	}
	e, err := s.ledger(c).EventTypeDelete(c.Request().Context(), name)
	return answerEntry(c, name, e, err)
}

// answerEntry answers 200 with the entry, or 404 when the type has none.
func answerEntry(c echo.Context, name string, e store.CatalogEntry, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "event type "+name+" has no catalog entry")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, entryView(e))
}

// EventTypeImport answers POST /v1/event-types/import: an OpenAPI 3.1
// document's webhooks, one entry each, all stored or none.
func (s *Server) EventTypeImport(c echo.Context, _ wire.EventTypeImportParams) error {
	var doc json.RawMessage
	if err := s.decode(c, &doc); err != nil {
		return err
	}
	entries, fe := catalog.Import(doc)
	if fe != nil {
		p := catalogProblem(fe)
		if p.Type == problemTypeBase+"invalid-schema" || p.Type == problemTypeBase+"invalid-field" {
			p.Type, p.Title = problemTypeBase+"invalid-openapi", "Document cannot be imported"
		}
		return p
	}
	stored, results, err := s.ledger(c).EventTypesPut(c.Request().Context(), entries, catalog.MaxTypes)
	if err != nil {
		return catalogPutError(err)
	}
	out := wire.EventTypeImportResult{Items: make([]wire.EventTypeImportResult_Items, len(stored))}
	for i, e := range stored {
		out.Items[i] = wire.EventTypeImportResult_Items{Name: e.Name, Version: int64(e.Version), Result: importResult(results[i])}
	}
	return c.JSON(http.StatusOK, out)
}

// importResult names what a put did, as the import's answer says it.
func importResult(r store.PutResult) wire.EventTypeImportResultItemsResult {
	switch r {
	case store.Created:
		return "created"
	case store.Updated:
		return "updated"
	}
	return "unchanged"
}

// catalogProblem is the 422 of an entry the catalog refuses, naming the
// field at fault (the path in the schema, for one that does not compile).
func catalogProblem(fe *intake.FieldError) *Problem {
	var p *Problem
	switch {
	case fe.Reserved:
		p = problem(http.StatusUnprocessableEntity, "reserved-field", "Reserved by hookflow", fe.Detail)
	case fieldUnder(fe.Field, "schema") || fieldUnder(fe.Field, "example"):
		p = problem(http.StatusUnprocessableEntity, "invalid-schema", "Invalid schema", fe.Detail)
	default:
		p = problem(http.StatusUnprocessableEntity, "invalid-field", "Invalid request field", fe.Detail)
	}
	p.Field = fe.Field
	return p
}

// fieldUnder reports whether field is name or a path under it.
func fieldUnder(field, name string) bool {
	return field == name || len(field) > len(name) && field[:len(name)] == name && (field[len(name)] == '.' || field[len(name)] == '[')
}

func catalogPutError(err error) error {
	if errors.Is(err, store.ErrCatalogFull) {
		p := problem(http.StatusUnprocessableEntity, "event-type-limit", "Event type limit reached",
			fmt.Sprintf("the tenant's catalog would hold more than %d event types: delete some first; nothing was stored", catalog.MaxTypes))
		p.Extensions = map[string]any{"limit": catalog.MaxTypes}
		return p
	}
	return err
}

// schemaViolation is the 422 of an event whose data breaks its type's
// schema: the failing path in field, and the entry it was judged by.
func schemaViolation(v *accept.Violation) *Problem {
	p := problem(http.StatusUnprocessableEntity, "schema-violation", "Data does not match the event type's schema", v.Field.Detail)
	p.Field = v.Field.Field
	p.Extensions = map[string]any{"event_type": v.Type, "schema_version": v.Version}
	return p
}
