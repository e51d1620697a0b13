// Package outbox is the producer's side of hookflow's transactional outbox.
// A producer calls Enqueue inside the transaction that changes its own state,
// so the event is recorded exactly when that change commits and never when it
// rolls back; `hookflow relay` (package relay) then moves the rows into
// hookflow, where they are delivered like events posted to the API.
//
// The outbox table lives in the producer's database: apply its schema with
// Migrate, or with the producer's own migration tool from Migrations. Source
// is the relay's access to the same table.
package outbox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/kit/outbox/internal/dbsqlc"
)

var (
	// ErrInvalid is returned (wrapping the *intake.FieldError at fault) for an
	// event hookflow's API would refuse with 400.
	ErrInvalid = errors.New("invalid event")
	// ErrConflict is returned when the id is already in the outbox with
	// other content: an idempotency key names one event forever.
	ErrConflict = errors.New("event id already used with other content")
	// ErrSequenceTaken is returned when another id already holds the
	// correlation's sequence number.
	ErrSequenceTaken = errors.New("sequence already taken by another event")
)

// Event is an event as a producer records it; the fields and rules are those
// of POST /v1/events.
type Event struct {
	// TenantID is the tenant the event is for: the relay puts it into that
	// tenant's ledger, routes it to that tenant's endpoints, and its ID,
	// correlation and sequence are unique within it. "" is
	// intake.DefaultTenant, as for an operator key that names no tenant.
	TenantID      string
	ID            string
	CorrelationID string
	Sequence      int64
	EndpointID    string
	Type          string
	Data          json.RawMessage
	// Metadata is the producer's optional metadata about the event (a
	// JSON object), which endpoints' filters may match beside Data; nil
	// for none.
	Metadata json.RawMessage
}

// Request is the event in the form intake judges, the same as an API body.
func (e Event) Request() intake.Request {
	return intake.Request{
		ID: &e.ID, CorrelationID: &e.CorrelationID, Sequence: json.RawMessage(strconv.FormatInt(e.Sequence, 10)),
		EndpointID: &e.EndpointID, Type: &e.Type, Data: e.Data, Metadata: e.Metadata, TenantID: e.tenant(),
	}
}

// tenant is the TenantID a request carries: none for "", which the API
// reads as the default tenant.
func (e Event) tenant() *string {
	if e.TenantID == "" {
		return nil
	}
	return &e.TenantID
}

// Enqueue records ev in the outbox within tx, the producer's transaction. It
// validates ev exactly as the API does (its tenant ID's form too; whether
// the tenant exists is for hookflow to say when the row is relayed) and
// stores its data in canonical form with the payload hash, under its tenant.
// The same id of the same tenant with the same content again is a no-op.
//
// Errors: ErrInvalid (wrapping *intake.FieldError), ErrConflict (the id holds
// other content), ErrSequenceTaken (another id holds the sequence); none of
// them aborts tx. Any other error is the database's, and Postgres then has
// aborted tx.
func Enqueue(ctx context.Context, tx pgx.Tx, ev Event) error {
	valid, fe := intake.Validate(ev.Request())
	if fe != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, fe)
	}
	// Bound here, never left to a column default: the row names the
	// tenant the producer meant.
	tenant := cmp.Or(ev.TenantID, intake.DefaultTenant)
	q := dbsqlc.New(tx)
	_, err := q.OutboxInsert(ctx, dbsqlc.OutboxInsertParams{TenantID: tenant, ID: valid.ID, CorrelationID: valid.CorrelationID,
		Sequence: valid.Sequence, EndpointID: valid.EndpointID, Type: valid.Type, Data: valid.Data, PayloadHash: valid.PayloadHash, Metadata: valid.Metadata})
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("insert outbox event %s of tenant %s: %w", valid.ID, tenant, err)
	}
	hash, err := q.OutboxHashGet(ctx, dbsqlc.OutboxHashGetParams{TenantID: tenant, ID: valid.ID})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("outbox event %s of tenant %s: %w (correlation %s, sequence %d)", valid.ID, tenant, ErrSequenceTaken, valid.CorrelationID, valid.Sequence)
	case err != nil:
		return fmt.Errorf("read outbox event %s of tenant %s: %w", valid.ID, tenant, err)
	case !bytes.Equal(hash, valid.PayloadHash):
		return fmt.Errorf("outbox event %s of tenant %s: %w", valid.ID, tenant, ErrConflict)
	}
	return nil
}
