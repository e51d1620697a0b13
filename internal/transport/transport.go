// Package transport is the seam between a delivery and the way its
// destination is reached. The delivery activity (package activities) keeps
// what every destination shares: the ledger gate, the circuit breaker, the
// in-flight lease, the rate limit, recording and the hand-over to the
// sequencer. A Transport, one per endpoint type, checks a destination's
// settings and sends one envelope, answering delivered, retry (after),
// permanent or gone. Nothing here names a kind of destination, and nothing
// here speaks HTTP: each transport lives in a package of its own beneath
// this one (webhook is the first), and the worker's wiring registers them.
package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultType is the type of an endpoint that names none: every endpoint
// made before endpoints had types is a webhook.
const DefaultType = "webhook"

// Transport reaches the destinations of one endpoint type. It is safe for
// concurrent use: every worker slot sends through the same one.
type Transport interface {
	// Validate checks a destination's settings as they would be stored,
	// without reaching it. Its error says what is wrong in words fit for
	// the one who sent them.
	Validate(ctx context.Context, d Destination) error
	// Send sends m to d once, within ctx's deadline (the attempt's
	// timeout), and says how the destination took it. An error means
	// nothing was sent and nothing can be with these settings (a stored
	// URL that no longer parses): the delivery fails for good, with no
	// attempt recorded. Its text, like Result.Detail, holds nothing of
	// the destination's credentials.
	Send(ctx context.Context, d Destination, m Message) (Result, error)
}

// Destination is what a transport knows of the endpoint it sends to.
type Destination struct {
	// EndpointID names the endpoint (on spans; never a secret).
	EndpointID string
	// URL is where the destination is. A webhook's may carry credentials;
	// a destination set by Config has the canonical address its
	// Configurer made (Address), which holds none.
	URL string
	// URLPathPublic says the URL's path holds no secret, so that what is
	// recorded may show it (package redact).
	URLPathPublic bool
	// Headers go with every message. Their values are secrets: a
	// transport never logs them and takes them out of what it answers.
	Headers map[string]string
	// Secrets sign the message: every live one while a rotation's grace
	// runs, newest first.
	Secrets []string
	// PrivateTargets says the endpoint's tenant is granted the
	// deployment's private-target allowlist (egress.Policy.ForTenant).
	PrivateTargets bool
	// Config holds the settings of a destination that is not reached by
	// URL (a broker's address, subject or stream), a JSON object as
	// stored; nil for a webhook. Nothing in it is secret.
	Config json.RawMessage
	// Credentials are such a destination's secrets (a password, a token).
	// A transport never logs them and takes every form of them out of
	// what it answers (redact.Values).
	Credentials map[string]string
}

// Message is one attempt of one event for one destination.
type Message struct {
	// EventID is the idempotency key, the same on every attempt.
	EventID string
	// Body is the envelope, JSON; every transport carries it as is.
	Body []byte
	// At is when the attempt started: the signature's timestamp.
	At time.Time
	// CorrelationID, Sequence and Attempt name the attempt where a
	// transport records its own work (a span).
	CorrelationID string
	Sequence      int64
	Attempt       int32
	// Previous and Skipped are the envelope's previous_sequence and
	// skipped_sequences, and Type its event type: a transport that keeps
	// a lane's order itself (a broker) reads them to tell its lane's tail
	// apart (Decide), and carries them as headers.
	Previous int64
	Skipped  []int64
	Type     string
}

// Outcome is how a destination took a message.
type Outcome int

const (
	// Delivered: the destination has it, now or from an earlier attempt.
	Delivered Outcome = iota + 1
	// Retry: it does not have it yet; another attempt may succeed (after
	// Result.RetryAfter when the destination asked for a wait).
	Retry
	// Permanent: it refused the message; no attempt will do better.
	Permanent
	// Gone: the destination no longer exists; its endpoint is disabled.
	Gone
)

// String names the outcome for messages.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Permanent:
		return "permanent"
	case Gone:
		return "gone"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Result is a destination's answer to one message.
type Result struct {
	Outcome Outcome
	// RetryAfter is the wait the destination asked for (Retry only); zero
	// leaves the next attempt to the retry policy.
	RetryAfter time.Duration
	// Status is the destination's answer code (an HTTP status), recorded
	// with the attempt; zero when none came (a connection error).
	Status int
	// Detail says what happened, as stored with the attempt, logged and
	// sent to Temporal (where it becomes a dead letter's reason): nothing
	// of the destination's credentials or header values, no control
	// characters, an answer cut to a bounded length. Empty when
	// Delivered.
	Detail string
	// Summary is Detail without the destination's own words (its answer's
	// body): the reason an endpoint is disabled for Gone.
	Summary string
	// Outage says the answer counts as a failure of the destination for
	// its circuit breaker (a timeout, a connection error, an overload).
	// Any other answer, a refusal included, shows the destination is up.
	Outage bool
}

// Configurer is a transport whose destinations are set by Config and
// Credentials rather than a URL (a broker). The API asks it for the
// address it stores as the endpoint's URL.
type Configurer interface {
	// Address checks d's Config and Credentials as they would be stored,
	// the egress rules on every address in them included, without
	// reaching the destination, and returns the canonical address of
	// what d names (a URL with no credentials, the same for the same
	// destination): it is shown, redacted, audited when it changes, and
	// two live endpoints may not share it. Its error says what is wrong
	// in words fit for the one who sent them.
	Address(ctx context.Context, d Destination) (string, error)
}

// FieldError is what a Configurer or a Checker says of one field of a
// destination's config or credentials: the API answers it as a problem
// naming the field ("config.subject", "credentials.password"). Reason
// holds no credential.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Checker is a transport that can prove a destination's settings work
// before they are stored: the API calls Check when an endpoint is created
// or its address or credentials change, with a deadline of a few
// seconds, and refuses the change when it fails. Its error says what is
// wrong (unreachable, refused, missing) and holds no credential.
type Checker interface {
	Check(ctx context.Context, d Destination) error
}

// Stored is one message as a destination holds it (Reader).
type Stored struct {
	// Lane is the correlation the message was sent in.
	Lane string
	// EventID is its webhook-id; EndpointID the endpoint that wrote it.
	EventID    string
	EndpointID string
	Sequence   int64
	Previous   int64
	Skipped    []int64
	// Timestamp and Signature are the Standard Webhooks signature's
	// inputs and value, and Body the envelope, as written.
	Timestamp int64
	Signature string
	Body      []byte
}

// Reader is a transport that can read back every message a destination
// holds for one endpoint, in the destination's order per lane: the
// conformance check of a destination and the tests read through it.
type Reader interface {
	Read(ctx context.Context, d Destination, each func(Stored) error) error
}

// AtLeastOnce reports whether t promises only at least once per lane (a
// consumer deduplicates by webhook-id), where the others promise that a
// destination holds each message once: a transport says so with a method
// AtLeastOnce() bool.
func AtLeastOnce(t Transport) bool {
	a, ok := t.(interface{ AtLeastOnce() bool })
	return ok && a.AtLeastOnce()
}

// ErrUnknownType is returned for an endpoint type no transport serves.
var ErrUnknownType = errors.New("no transport for endpoint type")

// Registry holds the transports by endpoint type. It is built once, at
// wiring, and only read after.
type Registry struct {
	byType map[string]Transport
}

// NewRegistry returns the registry of transports, keyed by endpoint type.
func NewRegistry(byType map[string]Transport) (*Registry, error) {
	r := &Registry{byType: make(map[string]Transport, len(byType))}
	for typ, t := range byType {
		if typ == "" || t == nil {
			return nil, fmt.Errorf("register transport %q: a type and a transport are required", typ)
		}
		r.byType[typ] = t
	}
	return r, nil
}

// Close closes every transport that holds connections (io.Closer): the
// worker calls it once it has stopped.
func (r *Registry) Close() error {
	var errs []error
	for _, t := range r.byType {
		if c, ok := t.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Lookup returns the transport of endpoint type typ ("" is DefaultType),
// or an error wrapping ErrUnknownType.
func (r *Registry) Lookup(typ string) (Transport, error) {
	if typ == "" {
		typ = DefaultType
	}
	if t, ok := r.byType[typ]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownType, typ)
}
