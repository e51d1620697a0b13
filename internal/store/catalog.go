package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/catalog"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// ErrCatalogFull is returned by EventTypesPut when the tenant's catalog
// would hold more entries than its cap.
var ErrCatalogFull = errors.New("event type catalog is full")

// CatalogEntry is an event type as the tenant's catalog holds it.
type CatalogEntry struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the event's data, as stored: the
	// canonical text catalog.Check judged; Example nil when none.
	Schema    json.RawMessage
	Example   json.RawMessage
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PutResult says what EventTypesPut did to an entry.
type PutResult int

// The results of a put.
const (
	// Created: the type had no entry; it has one at version 1.
	Created PutResult = iota + 1
	// Updated: the entry said something else; it is replaced, its version
	// raised by one.
	Updated
	// Unchanged: the entry said the same already; nothing was written.
	Unchanged
)

// EventTypesPut stores entries in the tenant's catalog, each created,
// updated or left unchanged (same description, schema and example, as
// text: catalog.Check writes them canonically, so key order and
// whitespace do not count), all in one
// transaction: if any fails, none is stored. More than maxTypes entries
// in the catalog afterwards (0: no cap) is ErrCatalogFull, wrapped, and
// nothing is stored. The entries are to be judged first (catalog.Check).
func (s *Store) EventTypesPut(ctx context.Context, entries []catalog.Entry, maxTypes int) ([]CatalogEntry, []PutResult, error) {
	out := make([]CatalogEntry, len(entries))
	results := make([]PutResult, len(entries))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.CatalogLock(ctx, s.tenant); err != nil {
			return err
		}
		for i, e := range entries {
			var example []byte
			if e.Example != nil {
				example = e.Example
			}
			r, err := q.CatalogUpsert(ctx, dbsqlc.CatalogUpsertParams{TenantID: s.tenant, Name: e.Name, Description: e.Description, Schema: e.Schema, Example: example})
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				got, err := q.CatalogGet(ctx, dbsqlc.CatalogGetParams{TenantID: s.tenant, Name: e.Name})
				if err != nil {
					return translate(err)
				}
				out[i], results[i] = catalogEntryOf(got), Unchanged
			case err != nil:
				return translate(err)
			default:
				out[i] = catalogEntryOf(dbsqlc.CatalogGetRow{Name: r.Name, Description: r.Description, Schema: r.Schema, Example: r.Example,
					Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
				results[i] = Updated
				if r.Created {
					results[i] = Created
				}
			}
		}
		if maxTypes > 0 {
			n, err := q.CatalogCount(ctx, s.tenant)
			if err != nil {
				return err
			}
			if n > int64(maxTypes) {
				return fmt.Errorf("%d entries, past the cap of %d: %w", n, maxTypes, ErrCatalogFull)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("put event types: %w", err)
	}
	return out, results, nil
}

// EventTypePut stores one entry as EventTypesPut does.
func (s *Store) EventTypePut(ctx context.Context, e catalog.Entry, maxTypes int) (CatalogEntry, PutResult, error) {
	out, results, err := s.EventTypesPut(ctx, []catalog.Entry{e}, maxTypes)
	if err != nil {
		return CatalogEntry{}, 0, err
	}
	return out[0], results[0], nil
}

// EventTypeGet returns the type's catalog entry, or ErrNotFound.
func (s *Store) EventTypeGet(ctx context.Context, name string) (CatalogEntry, error) {
	r, err := s.q.CatalogGet(ctx, dbsqlc.CatalogGetParams{TenantID: s.tenant, Name: name})
	if err != nil {
		return CatalogEntry{}, fmt.Errorf("get event type: %w", translate(err))
	}
	return catalogEntryOf(r), nil
}

// CatalogSchema is what acceptance needs of a type's entry.
type CatalogSchema struct {
	Schema  json.RawMessage
	Version int
}

// EventTypeSchema returns the schema of the type's entry and its version,
// or ErrNotFound when the type has none (its events are not validated).
func (s *Store) EventTypeSchema(ctx context.Context, name string) (CatalogSchema, error) {
	r, err := s.q.CatalogSchema(ctx, dbsqlc.CatalogSchemaParams{TenantID: s.tenant, Name: name})
	if err != nil {
		return CatalogSchema{}, fmt.Errorf("get event type schema: %w", translate(err))
	}
	return CatalogSchema{Schema: r.Schema, Version: int(r.Version)}, nil
}

// EventTypesList returns up to limit entries in name order, from the
// first whose name sorts after after ("" for the first page).
func (s *Store) EventTypesList(ctx context.Context, after string, limit int) ([]CatalogEntry, error) {
	rows, err := s.q.CatalogList(ctx, dbsqlc.CatalogListParams{TenantID: s.tenant, After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	out := make([]CatalogEntry, len(rows))
	for i, r := range rows {
		out[i] = catalogEntryOf(dbsqlc.CatalogGetRow(r))
	}
	return out, nil
}

// EventTypeDelete removes the type's entry (its events are no longer
// validated) and returns it as it was, or returns ErrNotFound.
func (s *Store) EventTypeDelete(ctx context.Context, name string) (CatalogEntry, error) {
	r, err := s.q.CatalogDelete(ctx, dbsqlc.CatalogDeleteParams{TenantID: s.tenant, Name: name})
	if err != nil {
		return CatalogEntry{}, fmt.Errorf("delete event type: %w", translate(err))
	}
	return catalogEntryOf(dbsqlc.CatalogGetRow(r)), nil
}

func catalogEntryOf(r dbsqlc.CatalogGetRow) CatalogEntry {
	e := CatalogEntry{Name: r.Name, Description: r.Description, Schema: r.Schema, Version: int(r.Version), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.Example != nil {
		e.Example = r.Example
	}
	return e
}
