// Package accept is the one way an event enters hookflow, whoever offers
// it: POST /v1/events (and the endpoint's test event) in the API, and an
// outbox row in `hookflow relay`. It judges the event (package intake),
// routes it (the endpoint it names, or every subscriber of its type),
// stores it in the tenant's ledger with its routing, tells a repost of the
// same event from a conflict, and starts its workflow within a bound,
// leaving it queued for the starter's sweep when Temporal does not answer
// in time.
//
// It decides; it does not answer. Each caller maps the Outcome to its own
// world: the API to an HTTP status and a problem, the relay to the state of
// its outbox row. What the two may do differently is a Config setting, not
// a second copy of the pipeline.
package accept

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookflow/hookflow/internal/catalog"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// Ledger is the part of the store acceptance reads and writes, bound to
// the event's tenant (store.Store.Tenant, or a portal session's narrower
// view).
type Ledger interface {
	Route(ctx context.Context, e intake.Event, maxSubscribers int) (*store.Endpoint, []store.Subscriber, error)
	EventInsertRouted(ctx context.Context, e intake.Event, endpoints, filteredOut []string) (store.Event, bool, error)
	EventGet(ctx context.Context, id string) (store.Event, error)
	CorrelationHighWater(ctx context.Context, correlationID string) (int64, error)
	CorrelationLoadOf(ctx context.Context, correlationID string, perLane int) (store.CorrelationLoad, error)
	// EventTypeSchema is the type's catalog entry (schema.go), or
	// store.ErrNotFound.
	EventTypeSchema(ctx context.Context, name string) (store.CatalogSchema, error)
}

// Starter starts a stored event's workflow and marks the event waiting
// (*starter.Starter); it binds the event's own tenant itself.
type Starter interface {
	Start(ctx context.Context, ev store.Event) error
}

// Config says how one caller accepts.
type Config struct {
	// MaxSubscribers caps the endpoints one event is routed to
	// (HOOKFLOW_MAX_SUBSCRIBERS). Default contract.DefaultMaxSubscribers.
	MaxSubscribers int
	// StartTimeout bounds the workflow start, with the ledger's mark after
	// it; past it the event stays queued and the sweep starts it later.
	StartTimeout time.Duration
	// RefuseDisabledEndpoint refuses a new event naming a disabled
	// endpoint, storing nothing (EndpointDisabled): the API's choice, so
	// that a key cannot mint dead letters. Without it the event is accepted
	// and waits in the paused lane, as the relay does: an outbox row
	// refused would leave its sequence missing and its correlation stuck.
	RefuseDisabledEndpoint bool
	// SchemaCache is how many compiled schemas of the catalog are kept
	// (catalog.NewCache); 0 is catalog.CacheSize.
	SchemaCache int
}

// Kind is what became of an offered event.
type Kind int

// The kinds of Outcome. Accepted and Repost mean the event is in the
// ledger; every other kind means nothing was stored.
const (
	// Accepted: stored now, routed to Outcome.Stored.Endpoints; the
	// subscribers whose filter left it out are Outcome.Stored.FilteredOut.
	Accepted Kind = iota
	// Repost: the same event (id and content) was accepted before;
	// Outcome.Stored is it as the ledger has it.
	Repost
	// Invalid: intake refused a field (Outcome.Invalid).
	Invalid
	// PayloadMismatch: the content does not hash to the hash the producer
	// recorded with it (Request.PayloadHash).
	PayloadMismatch
	// UnknownEndpoint: the endpoint_id names no endpoint of the tenant.
	UnknownEndpoint
	// TooManySubscribers: more than MaxSubscribers endpoints subscribe to
	// its type; it may pass once fewer do.
	TooManySubscribers
	// EndpointDisabled: it names a disabled endpoint, and Config says to
	// refuse that.
	EndpointDisabled
	// KeyReused: its id names another event (other content).
	KeyReused
	// SequenceTaken: another event holds its sequence (Outcome.Taken).
	SequenceTaken
	// SchemaInvalid: its data breaks its type's schema in the tenant's
	// catalog (Outcome.Violation).
	SchemaInvalid
)

// Request is an event offered for acceptance.
type Request struct {
	Event intake.Request
	// PayloadHash, when set, is the hash the producer recorded with the
	// event (an outbox row's); content that does not hash to it is refused.
	PayloadHash []byte
}

// Outcome is the decision on one event. Kind says which fields are set.
type Outcome struct {
	Kind Kind
	// Event is the event as intake judged it: set for every kind but
	// Invalid.
	Event intake.Event
	// Invalid is intake's refusal (Invalid).
	Invalid *intake.FieldError
	// Stored is the ledger's event (Accepted, Repost); its State is
	// waiting once this acceptance started its workflow.
	Stored store.Event
	// Started says its workflow exists (Accepted, Repost): started now, by
	// the sweep meanwhile, or before.
	Started bool
	// StartErr is why the start failed when it did not (Started false):
	// the event stays queued and the starter's sweep starts it later.
	StartErr error
	// Taken says how the sequence is taken (SequenceTaken).
	Taken *Taken
	// Violation is where and why its data breaks its type's schema
	// (SchemaInvalid).
	Violation *Violation
}

// Taken describes a sequence another event holds.
type Taken struct {
	// HighWater is the correlation's highest accepted sequence; Next the
	// one its cursor delivers next.
	HighWater, Next int64
	// Detail says why in words: voided by an operator, delivered, or held
	// by another event.
	Detail string
}

// Acceptor accepts events for one caller.
type Acceptor struct {
	cfg     Config
	starter Starter
	filters *filters
	schemas *catalog.Cache
}

// New returns an Acceptor that starts workflows through starter.
func New(cfg Config, starter Starter) (*Acceptor, error) {
	if cfg.MaxSubscribers == 0 {
		cfg.MaxSubscribers = contract.DefaultMaxSubscribers
	}
	if starter == nil {
		return nil, errors.New("accept: starter is required")
	}
	if cfg.MaxSubscribers < 1 || cfg.StartTimeout <= 0 {
		return nil, errors.New("accept: max subscribers and start timeout must be positive")
	}
	return &Acceptor{cfg: cfg, starter: starter, filters: newFilters(filterCacheSize), schemas: catalog.NewCache(cfg.SchemaCache)}, nil
}

// Accept judges, routes, stores and starts the event in ledger. A refusal
// is an Outcome, not an error; an error means the ledger could not be read
// or written, and nothing is decided (the event may be stored, queued:
// offering it again is safe). A failed start is no error either: the event
// is stored and queued, and Outcome.StartErr says why.
func (a *Acceptor) Accept(ctx context.Context, ledger Ledger, req Request) (Outcome, error) {
	ev, fe := intake.Validate(req.Event)
	if fe != nil {
		return Outcome{Kind: Invalid, Invalid: fe}, nil
	}
	o := Outcome{Event: ev}
	if req.PayloadHash != nil && !bytes.Equal(ev.PayloadHash, req.PayloadHash) {
		o.Kind = PayloadMismatch
		return o, nil
	}
	if refused, err := a.validate(ctx, ledger, &o); refused || err != nil {
		return o, err
	}
	addressed, subscribers, err := ledger.Route(ctx, ev, a.cfg.MaxSubscribers)
	switch {
	case errors.Is(err, store.ErrNotFound):
		o.Kind = UnknownEndpoint
		return o, nil
	case errors.Is(err, store.ErrTooManySubscribers):
		o.Kind = TooManySubscribers
		return o, nil
	case err != nil:
		return o, err
	}
	if a.cfg.RefuseDisabledEndpoint && addressed != nil && addressed.Disabled {
		// A new event is refused; the same event again, accepted before
		// the endpoint was disabled, is answered as any repost is.
		return a.conflict(ctx, ledger, o, EndpointDisabled)
	}
	endpoints, filteredOut, err := a.filters.route(ev, subscribers)
	if err != nil {
		return o, err
	}
	stored, inserted, err := ledger.EventInsertRouted(ctx, ev, endpoints, filteredOut)
	if err != nil {
		return o, err
	}
	if !inserted {
		return a.conflict(ctx, ledger, o, SequenceTaken)
	}
	o.Kind, o.Stored = Accepted, stored
	a.start(ctx, ledger, &o)
	return o, nil
}

// Start starts an event stored by another way in (the endpoint's test
// event), as Accept starts a new one.
func (a *Acceptor) Start(ctx context.Context, ledger Ledger, stored store.Event) Outcome {
	o := Outcome{Kind: Accepted, Stored: stored}
	a.start(ctx, ledger, &o)
	return o
}

// conflict decides an event whose id or sequence is taken, or that names
// a disabled endpoint: the same event again is a Repost (started again if
// it is still queued, since its first start may have failed), the id with
// other content KeyReused, and an id the ledger does not have is refused
// as absent says.
func (a *Acceptor) conflict(ctx context.Context, ledger Ledger, o Outcome, absent Kind) (Outcome, error) {
	existing, err := ledger.EventGet(ctx, o.Event.ID)
	switch {
	case errors.Is(err, store.ErrNotFound) && absent == SequenceTaken:
		return a.taken(ctx, ledger, o)
	case errors.Is(err, store.ErrNotFound):
		o.Kind = absent
		return o, nil
	case err != nil:
		return o, err
	case !bytes.Equal(existing.PayloadHash, o.Event.PayloadHash):
		o.Kind = KeyReused
		return o, nil
	}
	o.Kind, o.Stored = Repost, existing
	if existing.State != contract.StateQueued {
		o.Started = true
		return o, nil
	}
	a.start(ctx, ledger, &o)
	return o, nil
}

// taken describes the sequence another event holds: voided, delivered, or
// simply taken.
func (a *Acceptor) taken(ctx context.Context, ledger Ledger, o Outcome) (Outcome, error) {
	ev := o.Event
	hw, err := ledger.CorrelationHighWater(ctx, ev.CorrelationID)
	if err != nil {
		return o, err
	}
	load, err := ledger.CorrelationLoadOf(ctx, ev.CorrelationID, 0)
	if err != nil {
		return o, err
	}
	detail := fmt.Sprintf("sequence %d of correlation %s is already taken by another event", ev.Sequence, ev.CorrelationID)
	switch {
	case slices.Contains(load.Voided, ev.Sequence):
		detail = fmt.Sprintf("sequence %d of correlation %s was voided by an operator (POST /v1/correlations/{id}/skip): it is delivered nowhere", ev.Sequence, ev.CorrelationID)
	case ev.Sequence < load.Next:
		detail = fmt.Sprintf("sequence %d of correlation %s is already delivered", ev.Sequence, ev.CorrelationID)
	}
	o.Kind = SequenceTaken
	o.Taken = &Taken{HighWater: hw, Next: load.Next, Detail: detail}
	return o, nil
}

// start starts o.Stored's workflow within the bound. On failure it asks
// the ledger once more: the starter's sweep may have started the same event
// meanwhile (and held its row, so that this start's mark timed out); once
// the ledger says it left queued, its workflow exists.
func (a *Acceptor) start(ctx context.Context, ledger Ledger, o *Outcome) {
	sctx, cancel := context.WithTimeout(ctx, a.cfg.StartTimeout)
	defer cancel()
	err := a.starter.Start(sctx, o.Stored)
	if err == nil {
		o.Started, o.Stored.State = true, contract.StateWaiting
		return
	}
	if now, gerr := ledger.EventGet(ctx, o.Stored.ID); gerr == nil && now.State != contract.StateQueued {
		o.Started, o.Stored = true, now
		return
	}
	o.StartErr = err
}

// Detail says in words why a refused event was refused, for the kinds
// whose words the callers share.
func (o Outcome) Detail() string {
	switch o.Kind {
	case KeyReused:
		return "event " + o.Event.ID + " was accepted with different content; a key names one event forever"
	case SequenceTaken:
		return o.Taken.Detail
	}
	return ""
}
