package store

// FAN-OUT LEDGER SPEC (issue 23). The ledger helper implements these in
// place of the single-endpoint functions they replace (named in each
// comment), deletes this file's stubs as it does, and updates every store
// test. Semantics:
//
//   - deliveries: one row per (event, endpoint) the event was routed to at
//     acceptance (PRIMARY KEY (event_id, endpoint_id)), with correlation_id,
//     sequence, state (waiting → delivering → delivered | dead_lettered |
//     skipped; dead_lettered → delivering on a claimed replay), released_at,
//     delivered_at, updated_at. events loses endpoint_id; events.state is
//     the aggregate: queued until its workflow starts (EventMarkStarted),
//     then dead_lettered if any delivery is, else delivering if any is, else
//     waiting if any is, else delivered if any is or there are none, else
//     skipped. It is recomputed in every transaction that changes a
//     delivery, under the event row's lock.
//   - lanes: one row per (correlation_id, endpoint_id): last_finished (the
//     last sequence delivered or skipped in the lane, 0 none), previous (the
//     last sequence delivered in the lane, 0 none: the envelope's
//     previous_sequence), skipped_tail (sequences skipped in the lane since
//     previous, in order). Moved only forward (sequence > last_finished),
//     in the transaction that finishes the delivery.
//   - correlations.next_sequence: every sequence below it is stored and
//     finished on every delivery (an event with no deliveries is finished
//     once started); recomputed after each finish as the first sequence ≥
//     the old cursor that is missing or not finished (stops at the first:
//     generate_series … LIMIT 1, or a loop). high_water as today. Every
//     finishing transaction locks the correlation row first (SELECT … FOR
//     UPDATE), then the event row, so concurrent lanes of one correlation
//     never both miss each other's finish.
//   - dead_letters: PRIMARY KEY (event_id, endpoint_id); generation,
//     status, window_key per delivery, as today per event.
//   - delivery_attempts gain endpoint_id.
//   - Migration 009_fanout (008 is taken by endpoints.event_types, built on
//     another branch): moves existing rows over (events.endpoint_id →
//     deliveries, lanes from delivered/skipped events), then drops
//     events.endpoint_id.

import (
	"context"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/intake"
)

// Delivery is one (event, endpoint) of an event's routing.
type Delivery struct {
	EventID     string         `json:"-"`
	EndpointID  string         `json:"endpoint_id"`
	State       contract.State `json:"state"`
	ReleasedAt  *time.Time     `json:"released_at,omitempty"`
	DeliveredAt *time.Time     `json:"delivered_at,omitempty"`
	UpdatedAt   time.Time      `json:"updated_at"`
	// Attempts counts the attempts recorded for it.
	Attempts int32 `json:"attempts"`
	// DeadLetterGeneration and DeadLetterStatus describe its dead letter
	// (0 and "" when it has none).
	DeadLetterGeneration int32  `json:"dead_letter_generation,omitempty"`
	DeadLetterStatus     string `json:"dead_letter_status,omitempty"`
}

// Lane is a (correlation, endpoint)'s position in the ledger.
type Lane struct {
	EndpointID   string  `json:"endpoint_id"`
	LastFinished int64   `json:"last_finished"`
	Previous     int64   `json:"previous"`
	Skipped      []int64 `json:"skipped,omitempty"`
}

// LoadedEvent is a stored event at or past its correlation's cursor, with
// the endpoints its deliveries are not finished for (Open, sorted) and all
// it was routed to (Endpoints, sorted).
type LoadedEvent struct {
	ID        string
	Sequence  int64
	Endpoints []string
	Open      []string
}

// CorrelationLoad is what the ledger knows of a correlation for its
// sequencer (a fresh run's load, a resync) and for GET /v1/correlations.
type CorrelationLoad struct {
	Next int64
	// Events are every stored event with sequence ≥ Next, in sequence order
	// (finished ones included: they have arrived, which the lanes of later
	// events need to know).
	Events []LoadedEvent
	// Lanes are the correlation's lanes that have a row (sorted by
	// endpoint).
	Lanes []Lane
}

// StuckHead is the head of one lane (the lowest sequence not finished in it)
// of a correlation the heads sweep took in hand.
type StuckHead struct {
	Event      Event
	EndpointID string
	State      contract.State // the delivery's
}

// Replaces EventInsert(ctx, e): stores e as queued with one delivery per
// endpoint (state waiting), all in one statement; endpoints may be empty.
// e.EndpointID is not stored (the routing is the deliveries). Reports
// inserted=false, no error, when the id or (correlation, sequence) is taken,
// as today. The returned Event has Endpoints (sorted) and Deliveries.
func (s *Store) EventInsertRouted(ctx context.Context, e intake.Event, endpoints []string) (Event, bool, error) {
	panic("ledger: not implemented")
}

// EventGet (kept, changed): the Event it returns carries Endpoints and
// Deliveries (sorted by endpoint). Event loses EndpointID.

// EventMarkStarted (kept, changed): queued → waiting; an event with no
// deliveries goes to delivered instead and moves its correlation's cursor
// (same transaction, same locks as a finish).

// EventsQueuedClaim (kept): returned events carry Endpoints.

// Replaces EventsStuckHeadsClaim: takes due correlations as today (same
// lease/order/index) and returns the head of each of their lanes that is
// not queued, not finished and unchanged (delivery's updated_at) for lease.
func (s *Store) LanesStuckHeadsClaim(ctx context.Context, limit int, lease time.Duration) ([]StuckHead, error) {
	panic("ledger: not implemented")
}

// Replaces EventStartAttempt: per delivery. Marks the delivery delivering
// (released_at set once) and the event's aggregate, unless the endpoint is
// disabled, the delivery is final, or it is dead-lettered without a claimed
// replay; returns the endpoint, the delivery's state before, and its dead
// letter's status and generation. ErrNotFound when the endpoint does not
// exist.
func (s *Store) DeliveryStartAttempt(ctx context.Context, eventID, endpointID string) (AttemptStart, error) {
	panic("ledger: not implemented")
}

// Replaces EventDelivered: records the attempt, marks the delivery
// delivered, moves the lane (previous = sequence, skipped tail emptied) and
// the correlation's cursor, and the event's aggregate, in one transaction.
// A repeat records the attempt again and changes nothing else.
func (s *Store) DeliveryDelivered(ctx context.Context, eventID, endpointID, correlationID string, sequence int64, a Attempt, at time.Time) error {
	panic("ledger: not implemented")
}

// Replaces EventFinish (skips only now): marks the delivery skipped, moves
// the lane (skipped tail += sequence) and the cursor, and the aggregate.
// Repeating it is harmless.
func (s *Store) DeliverySkipped(ctx context.Context, eventID, endpointID, correlationID string, sequence int64, at time.Time) error {
	panic("ledger: not implemented")
}

// Replaces CorrelationSkippedTail: the lane's row (zero Lane with the
// endpoint set when it has none).
func (s *Store) LaneGet(ctx context.Context, correlationID, endpointID string) (Lane, error) {
	panic("ledger: not implemented")
}

// Replaces CorrelationNext + CorrelationPending for the sequencer's load
// and GET /v1/correlations: the cursor, the events from it on (bounded by
// limit; the sequencer passes 0 for all), and the lanes.
func (s *Store) CorrelationLoadAll(ctx context.Context, correlationID string, limit int) (CorrelationLoad, error) {
	panic("ledger: not implemented")
}

// Dead letters are per delivery. Kept, with endpointID added after eventID:
//   DeadLetterUpsert(ctx, d, window) (d.EndpointID names the delivery; marks
//     the delivery dead_lettered and the event's aggregate and
//     has_dead_letter; ErrEventFinished when the DELIVERY is final),
//   DeadLetterGet(ctx, eventID, endpointID),
//   DeadLetterMarkReplayed(ctx, eventID, endpointID, gen, by),
//   DeadLetterMarkSkipped(ctx, eventID, endpointID, gen, by, note),
//   DeadLetterReopen(ctx, eventID, endpointID, gen).
// DeadLetterFilter gains EventID; DeadLetterReplayPage orders by
// (correlation_id, endpoint_id, sequence, event_id) — each lane in sequence
// order — and ReplayCursor gains EndpointID.

// Replaces nothing: an event's dead letters, every status, by endpoint.
func (s *Store) DeadLettersOfEvent(ctx context.Context, eventID string) ([]DeadLetter, error) {
	panic("ledger: not implemented")
}

// Attempts are per delivery: AttemptInsert(ctx, eventID, endpointID, a),
// AttemptsList(ctx, eventID, endpointID).

// Stats: StatsSummary counts deliveries (queued events' deliveries as
// queued), and gains ByEndpoint []EndpointSummary{EndpointID, Waiting,
// Delivering, DeliveredRecently, DeadLettersOpen, LagSeconds};
// StatsBlockedCorrelations lists blocked lanes: BlockedCorrelation gains
// EndpointID, its head is the lane's lowest unfinished delivery ("missing"
// when the correlation's cursor is on a sequence not stored, which holds
// every lane).
