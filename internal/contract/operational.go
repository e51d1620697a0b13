package contract

import (
	"strconv"
	"strings"
)

// Operational event types: hookflow's own events about
// its endpoints, published as ordinary hookflow events whose correlation ID
// is OperationalCorrelation of the endpoint's ID (store.OperationalEventInsert).
// Producers cannot send a type with OperationalPrefix nor a correlation
// with OperationalCorrelationPrefix (kit/intake refuses both, in any case),
// so a receiver can trust that one of these came from hookflow.
const (
	// OpCircuitOpened: the endpoint's circuit breaker opened; attempts to
	// it stop but for one probe at a time.
	OpCircuitOpened = "hookflow.endpoint.circuit_opened"
	// OpCircuitClosed: a probe succeeded and the breaker closed again.
	OpCircuitClosed = "hookflow.endpoint.circuit_closed"
	// OpEndpointDisabled: the endpoint was disabled (it failed for longer
	// than its disable_after).
	OpEndpointDisabled = "hookflow.endpoint.disabled"
	// OpDeadLetterCreated: a delivery to the endpoint was dead-lettered
	// (once per dead letter generation).
	OpDeadLetterCreated = "hookflow.dead_letter.created"
	// OpDeadLetterAutoReplayed: hookflow replayed a dead letter of the
	// endpoint by itself when its breaker closed (auto_replay).
	OpDeadLetterAutoReplayed = "hookflow.dead_letter.auto_replayed"
)

// VoidedType is the type of a voided sequence's tombstone: an events row
// that an operator's POST /v1/correlations/{id}/skip stores in the place of
// a sequence the producer lost, finished (skipped) and routed to nobody, so
// that every lane moves past it and a later post of that sequence is
// refused as taken. It is no event: it has no workflow and is delivered
// nowhere; receivers learn of it in the skipped_sequences of the next
// envelope of each lane.
const VoidedType = "hookflow.voided"

// VoidedID is the ID of the tombstone of sequence seq of correlation corr:
// "hookflow-voided-<corr>-<seq>". The integer after the last "-" is the
// sequence, so no two correlations' tombstones share one, and a producer's
// ID cannot start with "hookflow-".
func VoidedID(corr string, seq int64) string {
	return "hookflow-voided-" + corr + "-" + strconv.FormatInt(seq, 10)
}

// OperationalPrefix starts every operational event type, and no producer's.
const OperationalPrefix = "hookflow."

// OperationalCorrelationPrefix starts the correlation of every operational
// event, and no producer's (kit/intake's ReservedCorrelationPrefix).
const OperationalCorrelationPrefix = "hookflow:"

// OperationalCorrelation is the correlation of the operational events
// about endpoint endpointID: "hookflow:<endpoint id>". It is a form no
// producer may send whatever the endpoint's ID, so a producer can never
// take a sequence of it.
func OperationalCorrelation(endpointID string) string {
	return OperationalCorrelationPrefix + endpointID
}

// Operational reports whether eventType is one of hookflow's own.
func Operational(eventType string) bool { return strings.HasPrefix(eventType, OperationalPrefix) }
