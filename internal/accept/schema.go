package accept

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// Violation says where an event's data breaks its type's schema.
type Violation struct {
	// Type and Version name the catalog entry it was judged by.
	Type    string
	Version int
	// Field is the failing value's path ("data.items[2].sku") and why.
	Field *intake.FieldError
}

// validate judges o.Event's data by its type's schema in the tenant's
// catalog, before the event is routed or stored: in an ordered lane a
// payload its receiver refuses holds back every event behind it, so it
// is kept out of every lane. A type without an entry passes. It reports
// whether the event is refused (o is then SchemaInvalid). The same event
// accepted before (same id, same content) is let through to be answered
// as the repost it is, though its type's schema changed since: a producer
// retrying, or the relay after a crash, must hear what became of it.
func (a *Acceptor) validate(ctx context.Context, ledger Ledger, o *Outcome) (bool, error) {
	ev := o.Event
	entry, err := ledger.EventTypeSchema(ctx, ev.Type)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	s, fe := a.schemas.Schema("schema", entry.Schema)
	if fe != nil {
		// The API compiled it before storing it: only another version of
		// the compiler could refuse it now, and passing its events
		// unjudged would break the catalog's promise.
		return false, fmt.Errorf("compile schema of event type %q version %d: %s", ev.Type, entry.Version, fe.Detail)
	}
	fe = s.Validate("data", ev.Data)
	if fe == nil {
		return false, nil
	}
	existing, err := ledger.EventGet(ctx, ev.ID)
	switch {
	case err == nil && bytes.Equal(existing.PayloadHash, ev.PayloadHash):
		return false, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	o.Kind = SchemaInvalid
	o.Violation = &Violation{Type: ev.Type, Version: entry.Version, Field: fe}
	return true, nil
}
