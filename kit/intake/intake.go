// Package intake decides what hookflow accepts as an event: the identifier
// rules of the wire contract, the sequence, the payload, and the content
// hash that tells "the same event again" from "another event under the same
// key". The API and the outbox relay both go through it, so an event is
// judged the same way whichever door it comes in by.
package intake

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FieldError names the field at fault and what is wrong with it.
type FieldError struct {
	Field  string
	Detail string
	// Reserved is set when the value is well formed but one of hookflow's
	// own (ReservedTypePrefix, ReservedIDPrefix, ReservedCorrelationPrefix): the API
	// answers 422 rather than 400.
	Reserved bool
}

func (e *FieldError) Error() string { return e.Detail }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

func reservedErr(field, format string, args ...any) *FieldError {
	fe := fieldErr(field, format, args...)
	fe.Reserved = true
	return fe
}

// Request is an event as a producer sends it. Pointer fields tell a missing
// field from an empty one; Sequence and Data stay raw so that "3", 3.0 or a
// non-object are refused rather than guessed at.
type Request struct {
	ID            *string         `json:"id"`
	CorrelationID *string         `json:"correlation_id"`
	Sequence      json.RawMessage `json:"sequence"`
	EndpointID    *string         `json:"endpoint_id"`
	Type          *string         `json:"type"`
	Data          json.RawMessage `json:"data"`
	// Metadata is an optional JSON object of the producer's, about the
	// event rather than in it (region, plan, source): endpoints' filters
	// may match on it beside data. It is kept with the event and shown
	// with it; it is not part of the envelope a receiver gets.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// TenantID is the tenant an operator (an operator key, or the outbox
	// of the SaaS's backend) posts for: left out, the key's own or
	// DefaultTenant. Validate checks its form (ValidTenantID) when present;
	// whether the tenant exists is the ledger's to say.
	TenantID *string `json:"tenant_id,omitempty"`
}

// DefaultTenant owns what existed before tenants, and is the tenant of an
// operator that names none.
const DefaultTenant = "default"

// TenantIDPattern is the form of a tenant ID, the SaaS's own customer ID:
// 1 to 200 of [A-Za-z0-9_:-], so never a "/" (workflow IDs join the tenant
// and the event's key with one). api/openapi.json's TenantId schema and the
// ledger's CHECK on tenants.id say the same, and a test holds them to it.
const TenantIDPattern = "^[A-Za-z0-9_:-]{1,200}$"

// ValidTenantID checks a tenant ID against TenantIDPattern.
func ValidTenantID(field, v string) *FieldError {
	return validChars(field, v, 200)
}

// ValidKey checks an idempotency key, correlation ID or endpoint ID:
// [A-Za-z0-9_:-], 1 to 255 characters. No "." (the signature scheme joins
// with dots) and no "/" (sequencer workflow IDs use it).
func ValidKey(field, v string) *FieldError {
	return validChars(field, v, 255)
}

// validChars checks that v is 1 to maxLen of [A-Za-z0-9_:-].
func validChars(field, v string, maxLen int) *FieldError {
	if v == "" {
		return fieldErr(field, "%s is required and must not be empty", field)
	}
	if len(v) > maxLen {
		return fieldErr(field, "%s must be at most %d characters", field, maxLen)
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == ':' || r == '-') {
			return fieldErr(field, "%s may contain only A-Z a-z 0-9 _ : - (found %q)", field, r)
		}
	}
	return nil
}

// Reserved forms: hookflow publishes its own operational events
// (hookflow.endpoint.circuit_opened, hookflow.dead_letter.created, …) as
// ordinary events with a type starting with ReservedTypePrefix, an id
// starting with ReservedIDPrefix and a correlation ID starting with
// ReservedCorrelationPrefix (then the endpoint's ID). A producer may use
// none of these forms, in any mix of upper and lower case (Reserved), so it
// can neither forge an operational event nor take the id or the
// (correlation, sequence) of one.
const (
	ReservedTypePrefix = "hookflow."
	ReservedIDPrefix   = "hookflow-"
	// ReservedCorrelationPrefix starts the correlation of every
	// operational event: "hookflow:" and the endpoint's ID. It is a
	// prefix, not the endpoint ID's form, so it holds for every endpoint
	// ID (ep_dev_receiver too) without a lookup, and a producer's
	// correlation IDs stay free but for it.
	ReservedCorrelationPrefix = "hookflow:"
)

// Reserved reports whether v starts with prefix, whatever the case of
// either: hookflow's reserved forms are refused case-insensitively, so
// "HOOKFLOW-…" or "Hookflow.endpoint.disabled" is refused as its lower-case
// form is (a receiver, a log search or a dashboard may fold case).
func Reserved(v, prefix string) bool {
	return len(v) >= len(prefix) && strings.EqualFold(v[:len(prefix)], prefix)
}

func required(field string, v *string) (string, *FieldError) {
	if v == nil {
		return "", fieldErr(field, "%s is required", field)
	}
	return *v, nil
}

// Event is an event hookflow accepts: every field checked, Data in canonical
// form and PayloadHash set.
type Event struct {
	ID            string
	CorrelationID string
	Sequence      int64
	// EndpointID is the one endpoint the event is addressed to; "" sends
	// it to every endpoint subscribed to its type.
	EndpointID string
	Type       string
	Data       json.RawMessage
	// Metadata is the producer's metadata in canonical form, nil when it
	// sent none.
	Metadata    json.RawMessage
	PayloadHash []byte
}

// MaxMetadataBytes bounds an event's metadata in canonical form: it is
// read by every subscriber's filter at acceptance and kept with the event,
// and a few labels do not need more.
const MaxMetadataBytes = 4096

// Validate checks a request and returns the event to accept. The tenant
// is not part of the event: it decides whose ledger the event goes to.
func Validate(req Request) (Event, *FieldError) {
	var ev Event
	var fe *FieldError
	if req.TenantID != nil {
		if fe = ValidTenantID("tenant_id", *req.TenantID); fe != nil {
			return ev, fe
		}
	}
	if ev.ID, fe = required("id", req.ID); fe != nil {
		return ev, fe
	}
	if fe = ValidKey("id", ev.ID); fe != nil {
		return ev, fe
	}
	if Reserved(ev.ID, ReservedIDPrefix) {
		return ev, reservedErr("id", "id must not start with %q, in any case: hookflow's own operational events use those ids", ReservedIDPrefix)
	}
	if ev.CorrelationID, fe = required("correlation_id", req.CorrelationID); fe != nil {
		return ev, fe
	}
	if fe = ValidKey("correlation_id", ev.CorrelationID); fe != nil {
		return ev, fe
	}
	if Reserved(ev.CorrelationID, ReservedCorrelationPrefix) {
		return ev, reservedErr("correlation_id", "correlation_id must not start with %q, in any case: hookflow's operational events about an endpoint use that correlation", ReservedCorrelationPrefix)
	}
	if ev.Sequence, fe = parseSequence(req.Sequence); fe != nil {
		return ev, fe
	}
	// endpoint_id is optional: without it the event goes to every endpoint
	// subscribed to its type; with it, to that endpoint only.
	if req.EndpointID != nil {
		if ev.EndpointID, fe = required("endpoint_id", req.EndpointID); fe != nil {
			return ev, fe
		}
		if fe = ValidKey("endpoint_id", ev.EndpointID); fe != nil {
			return ev, fe
		}
	}
	if ev.Type, fe = required("type", req.Type); fe != nil {
		return ev, fe
	}
	if fe = ValidType("type", ev.Type); fe != nil {
		return ev, fe
	}
	if Reserved(ev.Type, ReservedTypePrefix) {
		return ev, reservedErr("type", "type must not start with %q, in any case: those are hookflow's own operational events", ReservedTypePrefix)
	}
	if len(req.Data) == 0 || string(req.Data) == "null" {
		return ev, fieldErr("data", "data is required (a JSON object)")
	}
	if req.Data[0] != '{' {
		return ev, fieldErr("data", "data must be a JSON object")
	}
	data, err := Canonical(req.Data)
	if err != nil {
		return ev, fieldErr("data", "data is not valid JSON")
	}
	if ContainsNUL(data) {
		return ev, fieldErr("data", "data must not contain the NUL character (\\u0000): the ledger cannot store it")
	}
	ev.Data = data
	if ev.Metadata, fe = validMetadata(req.Metadata); fe != nil {
		return ev, fe
	}
	ev.PayloadHash = PayloadHash(ev.CorrelationID, ev.Sequence, ev.EndpointID, ev.Type, data)
	if ev.Metadata != nil {
		ev.PayloadHash = MetadataHash(ev.PayloadHash, ev.Metadata)
	}
	return ev, nil
}

// validMetadata accepts no metadata (absent or null) or a JSON object of at
// most MaxMetadataBytes in canonical form, which it returns.
func validMetadata(raw json.RawMessage) (json.RawMessage, *FieldError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, fieldErr("metadata", "metadata must be a JSON object")
	}
	md, err := Canonical(raw)
	if err != nil {
		return nil, fieldErr("metadata", "metadata is not valid JSON")
	}
	if ContainsNUL(md) {
		return nil, fieldErr("metadata", "metadata must not contain the NUL character (\\u0000): the ledger cannot store it")
	}
	if len(md) > MaxMetadataBytes {
		return nil, fieldErr("metadata", "metadata must be at most %d bytes as compact JSON (found %d)", MaxMetadataBytes, len(md))
	}
	if string(md) == "{}" {
		return nil, nil
	}
	return md, nil
}

// parseSequence accepts a JSON integer literal ≥ 1.
func parseSequence(raw json.RawMessage) (int64, *FieldError) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fieldErr("sequence", "sequence is required")
	}
	if raw[0] == '"' {
		return 0, fieldErr("sequence", "sequence must be an integer, not a string")
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fieldErr("sequence", "sequence must be an integer ≥ 1")
	}
	if n < 1 {
		return 0, fieldErr("sequence", "sequence must be ≥ 1")
	}
	return n, nil
}

// ValidType checks an event type, or anything that names event types (an
// endpoint's event_types): not blank, at most 255 bytes, no control
// characters. Anything else goes: types are the producer's vocabulary.
func ValidType(field, v string) *FieldError {
	if strings.TrimSpace(v) == "" {
		return fieldErr(field, "%s must not be empty or blank", field)
	}
	if len(v) > 255 {
		return fieldErr(field, "%s must be at most 255 characters", field)
	}
	if !utf8.ValidString(v) {
		return fieldErr(field, "%s must be valid UTF-8", field)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return fieldErr(field, "%s must not contain control characters", field)
		}
	}
	return nil
}

// Decode reads one JSON value into any, its numbers as json.Number (as
// written), and refuses anything after it.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// dec.More is not enough: it reports false for a stray "}" or "]".
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// Canonical re-encodes a JSON value with sorted object keys and no
// insignificant whitespace, keeping numbers as written, so equal content
// hashes equally however the producer formatted it.
func Canonical(raw json.RawMessage) (json.RawMessage, error) {
	v, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// ContainsNUL reports whether canonical JSON (Canonical's) holds the NUL
// character in a string or a key, which encoding/json writes \u0000:
// Postgres's text, and so its jsonb, cannot hold it. A backslash appears
// only inside strings, and each escape is skipped whole, so an escaped
// backslash followed by "u0000" is not taken for one.
func ContainsNUL(canonical []byte) bool {
	for i := 0; i < len(canonical); i++ {
		if canonical[i] != '\\' {
			continue
		}
		if i+5 < len(canonical) && canonical[i+1] == 'u' && string(canonical[i+2:i+6]) == "0000" {
			return true
		}
		i++
	}
	return false
}

// MetadataHash extends an event's PayloadHash with its metadata
// (canonical), so that the same key with other metadata is another event:
// its routing may differ. An event without metadata keeps PayloadHash as
// it is.
func MetadataHash(payloadHash []byte, metadata json.RawMessage) []byte {
	h := sha256.New()
	h.Write(payloadHash)
	h.Write([]byte{0})
	h.Write(metadata)
	return h.Sum(nil)
}

// PayloadHash identifies an event's content for the same-key comparison.
func PayloadHash(correlationID string, sequence int64, endpointID, typ string, data json.RawMessage) []byte {
	h := sha256.New()
	for _, part := range []string{correlationID, strconv.FormatInt(sequence, 10), endpointID, typ} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(data)
	return h.Sum(nil)
}
