// Package contract is what hookflow's processes say to each other through
// Temporal: the workflow types, the signal, update and query names with
// their payloads, the search attributes and the event states. The API, the
// workflows, the activities and the CLI all speak it, and it imports nothing
// of theirs, so none of them has to import another for a name.
package contract

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Workflow types.
const (
	// EventWorkflow is one accepted event; its workflow ID is the event's
	// idempotency key within its tenant, EventWorkflowID(tenant, key).
	EventWorkflow = "EventWorkflow"
	// SequencerWorkflow is one correlation's sequencer; its workflow ID is
	// SequencerID(tenant, correlation).
	SequencerWorkflow = "SequencerWorkflow"
)

// Signal, update and query names.
const (
	// UpdateArrive (Arrival → Announcement) tells a sequencer an event of its
	// correlation exists, and answers whether it is released now.
	UpdateArrive = "arrive"
	// UpdateFinished (Done → Handoffs) tells a sequencer deliveries of its
	// event are finished, and answers what it releases next in their lanes.
	UpdateFinished = "finished"
	// UpdateResync (no argument → Handoffs) makes a sequencer merge what the
	// ledger knows (finished sequences, stored events) into its state, and
	// answers the event it releases, if any: the repair after an operator
	// reset or terminated it.
	UpdateResync = "resync"
	// SignalRelease (Release) lets lanes of a held event deliver.
	SignalRelease = "release"
	// SignalReplay (Replay) gives a dead-lettered event a fresh window.
	SignalReplay = "replay"
	// SignalSkip (Skip) gives a dead-lettered event up so its successors go.
	SignalSkip = "skip"
	// SignalCircuitClosed (CircuitClosed) tells the lanes of an endpoint
	// whose circuit closed (a probe answered, or an operator enabled it)
	// that their next attempt may send now, rather than when they were told
	// the circuit might let one through. It is the lanes' wake: the starter
	// sends it too when an operator changes the endpoint's rate_limit, and
	// a lane waiting its turn under the old rate then reserves a fresh slot
	// under the new one. The name stays for the histories that carry it.
	SignalCircuitClosed = "circuit-closed"
	// QueryState answers an event's EventStatus or a sequencer's
	// SequencerState.
	QueryState = "state"
)

// Workflow IDs are per tenant: an event's is "<tenant>/<event id>", its
// correlation's sequencer's "<tenant>/sequencer/<correlation id>". A
// tenant's ID and an event's key can never contain "/", so an event's ID
// has one and a sequencer's two, and no two tenants' IDs collide. The
// tenant leads, so the Web UI lists a tenant's workflows by the prefix
// (WorkflowId STARTS_WITH "acme/") as well as by TenantId. One that would
// pass MaxWorkflowIDLength is abbreviated (workflowID).
const sequencerInfix = "/sequencer/"

// MaxWorkflowIDLength is the longest workflow ID hookflow gives Temporal.
// Temporal's frontend takes IDs of up to 1,000 characters, but its SQL
// persistence (PostgreSQL and MySQL: the compose stack's, hookflow dev's,
// the tests') keeps them in VARCHAR(255) columns: a start or an
// update-with-start with a longer one fails in the history service's write
// ("value too long for type character varying(255)"), an error the client
// retries until its deadline, so the event never becomes a workflow. A
// tenant of 200 characters and a key of 255 make 456.
const MaxWorkflowIDLength = 255

// abbreviationMark joins an abbreviated workflow ID's head to its digest.
// Keys and tenant IDs are of [A-Za-z0-9_:-], so no ID written in full
// holds it, and no abbreviated one equals an ID written in full.
const abbreviationMark = "~"

// workflowID is prefix+key, or, when that passes MaxWorkflowIDLength,
// prefix, as much of key as fits and the mark followed by a digest of the
// whole (128 bits of SHA-256, base32): the same event or correlation
// always gets the same ID, so a start repeated after a crash still finds
// its workflow, and two keys that share a long head get two IDs. The
// prefix (the tenant, and for a sequencer the infix) stays whole: at most
// 211 characters, which leaves room for the digest.
func workflowID(prefix, key string) string {
	id := prefix + key
	if len(id) <= MaxWorkflowIDLength {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	digest := abbreviationMark + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
	head := MaxWorkflowIDLength - len(prefix) - len(digest)
	return prefix + key[:max(head, 0)] + digest
}

// DefaultTenant owns every row that was there before tenants (migration
// 025), and is the tenant an operator key acts on when it names none.
const DefaultTenant = "default"

// EventWorkflowID is the workflow ID of tenant's event eventID.
func EventWorkflowID(tenant, eventID string) string { return workflowID(tenant+"/", eventID) }

// SequencerID is the workflow ID of the sequencer of tenant's correlation.
func SequencerID(tenant, correlationID string) string {
	return workflowID(tenant+sequencerInfix, correlationID)
}

// TenantOf returns the tenant of an event's or a sequencer's workflow ID
// (what an activity learns its tenant from: its workflow's ID).
func TenantOf(workflowID string) (string, bool) {
	t, _, ok := strings.Cut(workflowID, "/")
	return t, ok && t != ""
}

// EventOf returns the tenant and event of an event's workflow ID; not ok
// for an abbreviated one, which does not hold the whole key.
func EventOf(workflowID string) (tenant, eventID string, ok bool) {
	tenant, eventID, ok = strings.Cut(workflowID, "/")
	return tenant, eventID, ok && tenant != "" && eventID != "" && !strings.Contains(eventID, "/") &&
		!strings.Contains(eventID, abbreviationMark)
}

// CorrelationOf returns the tenant and correlation of a sequencer's
// workflow ID; not ok for an abbreviated one, which does not hold the
// whole correlation ID.
func CorrelationOf(sequencerID string) (tenant, correlationID string, ok bool) {
	tenant, correlationID, ok = strings.Cut(sequencerID, sequencerInfix)
	return tenant, correlationID, ok && tenant != "" && !strings.Contains(tenant, "/") &&
		!strings.Contains(correlationID, abbreviationMark)
}

// SequencerTaskQueue is the task queue of the sequencers of events on
// taskQueue. Every worker polls both: a sequencer's task never waits behind
// the event tasks that wait for its answers.
func SequencerTaskQueue(taskQueue string) string { return taskQueue + "-sequencers" }

// State is an event's state, as the ledger stores it, the API reports it and
// the DeliveryState search attribute shows it.
type State string

// Event states.
const (
	// StateQueued: stored; its workflow is not started yet (Temporal was
	// unavailable). The sweep starts it.
	StateQueued State = "queued"
	// StateWaiting: its workflow runs and waits for the sequencer's release.
	StateWaiting State = "waiting"
	// StateDelivering: released; attempts are being made.
	StateDelivering State = "delivering"
	// StateDelivered: the receiver answered 2xx.
	StateDelivered State = "delivered"
	// StateDeadLettered: the window was spent or the receiver refused it for
	// good; it waits for an operator's replay or skip.
	StateDeadLettered State = "dead_lettered"
	// StateSkipped: an operator gave it up.
	StateSkipped State = "skipped"
)

// Final reports whether s is an end state: its correlation has moved past it.
func (s State) Final() bool { return s == StateDelivered || s == StateSkipped }

// Arrival tells a sequencer that an event of its correlation exists, and
// the endpoints it was routed to at acceptance (its lanes; none for an event
// nobody subscribes to, which still takes its place in the order).
type Arrival struct {
	Sequence  int64    `json:"sequence"`
	EventID   string   `json:"event_id"`
	Endpoints []string `json:"endpoints,omitempty"`
}

// Announcement is a sequencer's answer to an Arrival.
type Announcement struct {
	// Released are the event's lanes that may deliver now (each next in its
	// lane, nothing in flight there). The others wait for SignalRelease.
	Released []LaneRelease `json:"released,omitempty"`
	// Handoffs are releases of other events that this arrival made
	// possible (it filled a gap that held their lanes): the caller signals
	// them.
	Handoffs []Handoff `json:"handoffs,omitempty"`
	// Finished: the sequencer is past this sequence already.
	Finished bool `json:"finished,omitempty"`
}

// LaneRelease lets one delivery of an event go: the lane's endpoint, the
// sequence last delivered in the lane (the envelope's previous_sequence, 0
// for none) and the lane's sequences an operator skipped since, which the
// envelope names so the receiver knows they will never come.
type LaneRelease struct {
	Endpoint string  `json:"endpoint_id"`
	Previous int64   `json:"previous"`
	Skipped  []int64 `json:"skipped,omitempty"`
}

// Release is a sequencer's go-ahead to lanes of one event
// (SignalRelease's payload).
type Release struct {
	Sequence int64         `json:"sequence"`
	Lanes    []LaneRelease `json:"lanes"`
}

// Done tells a sequencer that deliveries of its event are finished.
type Done struct {
	Sequence int64      `json:"sequence"`
	EventID  string     `json:"event_id"`
	Lanes    []LaneDone `json:"lanes"`
}

// LaneDone is one finished delivery.
type LaneDone struct {
	Endpoint string `json:"endpoint_id"`
	// Skipped: an operator skipped it rather than it being delivered.
	Skipped bool `json:"skipped,omitempty"`
}

// Handoff is a release a sequencer decided, which the caller then signals
// to the event it names.
type Handoff struct {
	EventID string  `json:"event_id"`
	Release Release `json:"release"`
}

// Handoffs is a sequencer's answer to Done or a resync: the releases it
// decided, one per event.
type Handoffs struct {
	Handoffs []Handoff `json:"handoffs,omitempty"`
}

// Replay asks a dead-lettered delivery to try again with a fresh window.
// EndpointID names the delivery; empty means the one dead letter the event
// has open (a signal sent by hand from the Web UI as {}). Generation names
// the dead letter it is for: a replay of an earlier one (a double click, a
// retried request) is ignored. Zero means "the dead letter it waits on
// now", for a signal sent by hand.
type Replay struct {
	EndpointID string `json:"endpoint_id,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	By         string `json:"by,omitempty"`
}

// CircuitClosed says that the circuit of EndpointID closed, or that its
// rate_limit changed: a lane delivering to it that waits on its open
// circuit or for its turn under the rate limit makes its attempt again at
// once (a throttled one in a fresh slot). It changes nothing else; a lane
// not waiting keeps it for its next wait, which then looks once more before
// it sleeps.
type CircuitClosed struct {
	EndpointID string `json:"endpoint_id"`
}

// Skip asks a dead-lettered delivery to give up so its lane's successors
// can go; EndpointID and Generation as in Replay.
type Skip struct {
	EndpointID string `json:"endpoint_id,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	By         string `json:"by,omitempty"`
	Note       string `json:"note,omitempty"`
}

// EventStatus is what QueryState answers for an event: its overall state
// (as the ledger aggregates it) and each delivery's.
type EventStatus struct {
	State State        `json:"state"`
	Lanes []LaneStatus `json:"lanes,omitempty"`
}

// LaneStatus is one delivery's state in its event's workflow.
type LaneStatus struct {
	Endpoint string `json:"endpoint_id"`
	State    State  `json:"state"`
	// Generation is the dead letter it waits on, when dead-lettered.
	Generation int32  `json:"generation,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Lane finds the status of the delivery to endpoint.
func (s EventStatus) Lane(endpoint string) (LaneStatus, bool) {
	for _, l := range s.Lanes {
		if l.Endpoint == endpoint {
			return l, true
		}
	}
	return LaneStatus{}, false
}

// Aggregate is the overall state of an event whose deliveries are in
// states: dead-lettered if one is, else delivering if one is, else waiting
// if one is, else delivered if one is or there are none (nothing is left to
// deliver), else skipped. The ledger computes the same.
func Aggregate(states []State) State {
	has := map[State]bool{}
	for _, s := range states {
		has[s] = true
	}
	for _, s := range []State{StateDeadLettered, StateDelivering, StateWaiting, StateQueued} {
		if has[s] {
			return s
		}
	}
	if len(states) == 0 || has[StateDelivered] {
		return StateDelivered
	}
	return StateSkipped
}

// SequencerState is a sequencer's whole memory, and what QueryState answers
// for it. It is bounded by the correlation's lanes, not by the events it
// holds: Frontier and Arrived say which sequences have arrived, and each
// lane keeps its position and at most MaxQueuedPerLane of its next events;
// the ledger holds the rest, and a lane loads them from there when it
// needs them. Next is the correlation's cursor as the sequencer sees it:
// every sequence below it is finished in every lane.
type SequencerState struct {
	Next int64 `json:"next"`
	// Frontier is the first sequence that has not arrived: every one below
	// it has (or was voided).
	Frontier int64 `json:"frontier"`
	// Arrived are the runs of sequences past Frontier that have arrived
	// (after a gap), in order.
	Arrived []SequenceRange `json:"arrived,omitempty"`
	Lanes   []LaneState     `json:"lanes,omitempty"`
	// Voided are the sequences an operator voided (the producer lost them:
	// POST /v1/correlations/{id}/skip) that a lane may still name in a
	// release's skipped sequences, in order (at most MaxVoidedKept).
	Voided []int64 `json:"voided,omitempty"`
}

// MaxQueuedPerLane bounds the events a sequencer keeps queued in one lane
// (and a lane's load reads): past it, the lane's events wait in the ledger
// alone, and the lane loads the next ones when its queue runs dry. A lane
// that keeps up never holds more than a few; one held behind a dead letter
// holds this many, whatever waits behind it, or fewer when their IDs are
// long (MaxQueuedBytesPerLane, MaxQueuedBytes).
const MaxQueuedPerLane = 32

// MaxArrivedRanges bounds SequencerState.Arrived: a producer that leaves
// more gaps than this open at once has the later runs forgotten until the
// frontier reaches them, when a resync reads them from the ledger again.
// Forgetting only ever holds a lane longer, never releases one early.
const MaxArrivedRanges = 1000

// SequenceRange is the run of sequences From..To, both included.
type SequenceRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// QueuedEvent is an event a lane has open and not released.
type QueuedEvent struct {
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id"`
	// State is the delivery's state in the ledger, in a ledger's load (for
	// GET /v1/correlations); a sequencer does not keep it.
	State State `json:"state,omitempty"`
}

// LaneState is one lane of a correlation: the sequence last delivered in
// it (Previous) and the ones skipped since, the sequence last finished in
// it, the one in flight (0 for none) and its event, and the next events
// it has open, in order. Queued lists every open delivery of the lane from
// its position on, unless Partial: then only those up to KnownThrough, and
// the ledger may hold more past it.
type LaneState struct {
	Endpoint      string        `json:"endpoint_id"`
	Previous      int64         `json:"previous"`
	Skipped       []int64       `json:"skipped,omitempty"`
	LastFinished  int64         `json:"last_finished"`
	InFlight      int64         `json:"in_flight,omitempty"`
	InFlightEvent string        `json:"in_flight_event,omitempty"`
	Queued        []QueuedEvent `json:"queued,omitempty"`
	Partial       bool          `json:"partial,omitempty"`
	KnownThrough  int64         `json:"known_through,omitempty"`
	// Voided, in a ledger's load of the lane (LoadLanes), are the
	// correlation's voided sequences after Previous (the newest
	// MaxSkippedListed): a lane loaded again after it was dropped names
	// them in its next release, as one that stayed would. A sequencer's
	// state keeps them once, in SequencerState.Voided.
	Voided []int64 `json:"voided,omitempty"`
}

// Caps on fan-out: the defaults of HOOKFLOW_MAX_ENDPOINTS
// and HOOKFLOW_MAX_SUBSCRIBERS, and the most HOOKFLOW_MAX_SUBSCRIBERS may
// be set to. An event's workflow inputs and its arrival carry a lane per
// subscriber and never the payload (the ledger has it; Deliver and
// WriteDeadLetter read it there), so what an event brings to Temporal
// grows with its lanes alone, and a lane's part is bounded: the longest
// endpoint ID (255 characters) and, after a start, reasons cut to
// MaxReasonBytes. At MaxSubscribersCeiling lanes the start input stays
// under MaxStartInputBytes whatever the payload (starter's
// TestInputStaysSmall), and the largest input after a start (a
// continue-as-new, a restart with every lane dead-lettered) under 1 MiB,
// half of Temporal's 2 MB payload limit (workflows'
// TestLaneInputsStayUnderThePayloadLimit: about 3.6 KB a lane).
const (
	DefaultMaxEndpoints   = 1000
	DefaultMaxSubscribers = 100
	MaxSubscribersCeiling = 250
	MaxStartInputBytes    = 256 << 10
)

// MaxKeywordListBytes bounds the JSON of a keyword-list search attribute:
// Temporal refuses a value over 2 KiB by default
// (limit.searchAttributeSizeLimit), and a workflow task whose upsert it
// refuses fails for ever. About 90 endpoint IDs fit.
const MaxKeywordListBytes = 2000

// FitKeywordList returns the longest prefix of ids whose JSON fits in
// MaxKeywordListBytes, and how many it left out. An event routed to more
// endpoints than fit is still delivered to all of them; only the Web UI's
// filter on EndpointIds does not find it by the ones left out (its
// deliveries are in GET /v1/events/{id} and the dead-letter list).
func FitKeywordList(ids []string) (kept []string, dropped int) {
	size := 2 // []
	for i, id := range ids {
		size += len(id) + 3 // "id",
		if size > MaxKeywordListBytes {
			return ids[:i], len(ids) - i
		}
	}
	return ids, 0
}

// Search attributes hookflow's workflows carry; the dev server and the test
// server register them. An event's workflow has all six, a sequencer
// TenantId and CorrelationId, so the Web UI lists a correlation's sequencer
// beside its events, and an operator filters by tenant (TenantId =
// 'acme'). EndpointIds lists the endpoints the event was routed to, and
// DeadLetteredEndpointIds those whose delivery waits on a dead letter, so
// an operator finds every dead-lettered delivery of one endpoint with
// DeadLetteredEndpointIds = 'ep_…'.
var (
	TenantIDKey                = temporal.NewSearchAttributeKeyKeyword("TenantId")
	CorrelationIDKey           = temporal.NewSearchAttributeKeyKeyword("CorrelationId")
	SequenceKey                = temporal.NewSearchAttributeKeyInt64("Sequence")
	DeliveryStateKey           = temporal.NewSearchAttributeKeyKeyword("DeliveryState")
	EndpointIDsKey             = temporal.NewSearchAttributeKeyKeywordList("EndpointIds")
	DeadLetteredEndpointIDsKey = temporal.NewSearchAttributeKeyKeywordList("DeadLetteredEndpointIds")
)
