package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// The fan-out ledger. An event is routed, at acceptance, to
// every endpoint subscribed to it: each (event, endpoint) is a delivery,
// waiting → delivering → delivered | dead_lettered | skipped (and
// dead_lettered → delivering on a claimed replay), and the event's state is
// their aggregate. Order is kept per (correlation, endpoint), a lane, whose
// row holds what the envelope needs (previous sequence, skipped tail). The
// correlation's cursor (next_sequence) is the first sequence not stored or
// not finished on every delivery.
//
// Locks: every transaction that changes a delivery takes the event's row
// first (EventLock), so the aggregate it recomputes sees the other lanes'
// committed changes; one that finishes a delivery takes the correlation's
// row before that (CorrelationLock), so the cursor it recomputes sees the
// other lanes' committed finishes. Always in that order, so they never
// deadlock.

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
	// RecoveryWindowMS and TimeoutMS are its endpoint's settings when the
	// event was routed, in milliseconds (nil: the server's).
	RecoveryWindowMS *int64 `json:"recovery_window_ms,omitempty"`
	TimeoutMS        *int64 `json:"timeout_ms,omitempty"`
}

// RecoveryWindow is the delivery's window as routed; 0 for the server's.
func (d Delivery) RecoveryWindow() time.Duration { return msDuration(d.RecoveryWindowMS) }

// Timeout is the delivery's per-attempt HTTP timeout as routed; 0 for the
// server's.
func (d Delivery) Timeout() time.Duration { return msDuration(d.TimeoutMS) }

func msDuration(ms *int64) time.Duration {
	if ms == nil {
		return 0
	}
	return time.Duration(*ms) * time.Millisecond
}

// Lane is a (correlation, endpoint)'s position in the ledger: LastFinished
// is the last sequence delivered or skipped in it (0 none), Previous the
// last delivered (0 none: the envelope's previous_sequence), and Skipped the
// sequences skipped in it since Previous, in order. It moves only forward,
// in the transaction that finishes the delivery.
type Lane struct {
	EndpointID   string  `json:"endpoint_id"`
	LastFinished int64   `json:"last_finished"`
	Previous     int64   `json:"previous"`
	Skipped      []int64 `json:"skipped,omitempty"`
}

// CorrelationLoad is what the ledger knows of a correlation for its
// sequencer (a fresh run's load, a resync) and for GET /v1/correlations:
// bounded by its lanes, whatever the backlog.
type CorrelationLoad struct {
	Next int64
	// Frontier is the first sequence from Next on that has not arrived;
	// Arrived the runs past it that have (at most
	// contract.MaxArrivedRanges), in order.
	Frontier int64
	Arrived  []contract.SequenceRange
	// Lanes are the correlation's lanes (those with an open delivery, and,
	// from CorrelationLoadOf, those with a row), sorted by endpoint.
	Lanes []LaneLoad
	// Voided are the sequences an operator voided (CorrelationVoid), in
	// order: the newest 10,000.
	Voided []int64
}

// LaneLoad is a lane's position and its first open deliveries in order
// (with their states), at most the load's limit; More when the ledger has
// more past them. Voided, from LanesLoad, are the newest
// contract.MaxSkippedListed voided sequences after Previous.
type LaneLoad struct {
	Lane
	Open   []contract.QueuedEvent `json:"open"`
	More   bool                   `json:"-"`
	Voided []int64                `json:"-"`
}

// cut keeps the first limit open deliveries, and says whether there were
// more (the queries read one more than asked).
func (l *LaneLoad) cut(limit int) {
	if len(l.Open) > limit {
		l.Open, l.More = l.Open[:limit], true
	}
	l.Open = nilIfEmpty(l.Open)
	l.Skipped = nilIfEmpty(l.Skipped)
}

// StuckHead is the head of one lane (the lowest sequence not finished in it)
// of a correlation the heads sweep took in hand.
type StuckHead struct {
	Event      Event
	EndpointID string
	State      contract.State // the delivery's
}

// LanesStuckHeadsClaim takes up to limit correlations whose cursor has not
// moved, nor been claimed, for longer than lease (the same lease, order and
// index as before fan-out), stamps their lease, and returns the head of
// each of their lanes that is not queued, not finished, unchanged (the
// delivery's updated_at) for as long, and not behind a sequence that has
// not arrived. It reads only the correlations it takes, and one index probe
// per lane, whatever the backlog.
func (s *Store) LanesStuckHeadsClaim(ctx context.Context, limit int, lease time.Duration) ([]StuckHead, error) {
	var out []StuckHead
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// The claim's plan costs past jit_above_cost (the planner's guess at
		// the lanes walk) though it runs in under a millisecond; compiling it
		// would take ~80 ms at every call of every API process.
		b.Queue(dbsqlc.JITOff)
		b.Queue(dbsqlc.LanesStuckHeadsClaim, lease.Seconds(), limit).Query(func(rows pgx.Rows) error {
			var err error
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (StuckHead, error) {
				var h StuckHead
				var raw []byte
				if err := r.Scan(append(eventColumns(&h.Event, &raw), &h.EndpointID, &h.State)...); err != nil {
					return h, err
				}
				return h, h.Event.decodeDeliveries(raw)
			})
			return err
		})
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("claim stuck heads: %w", err)
	}
	return out, nil
}

// AttemptStart is what an attempt reads as it starts: the delivery's
// endpoint, the delivery's state before the attempt ("" when the event has
// no delivery to it), and its dead letter's status and generation (empty
// and 0 when it has none).
type AttemptStart struct {
	Endpoint         Endpoint
	State            contract.State
	DeadLetterStatus string
	Generation       int32
	// CircuitOpen (open or half-open) and CircuitFailures are the
	// endpoint's circuit breaker (closed and 0 when it has no row): an
	// attempt that finds it closed
	// with nothing counted writes nothing for it on success.
	CircuitOpen     bool
	CircuitFailures int
	// DeletedBy names who deleted the endpoint (DELETE /v1/endpoints/{id});
	// nil while it is not deleted. The attempt ends the delivery skipped.
	DeletedBy *string
	// Data is the event's payload (nil once the cleaner pruned it, which
	// it does only to an event whose every delivery is finished).
	Data json.RawMessage
	// Tenant is what the attempt answers to of the event's tenant.
	Tenant TenantHold
	// HeldBy is the earlier delivery of the lane (tenant, correlation,
	// endpoint) still open, not delivered or skipped, when there is one:
	// the attempt marked nothing, and must send nothing.
	HeldBy *LaneHead
}

// LaneHead is the first open delivery of a lane: its sequence, its event
// and its state (waiting, delivering or dead_lettered).
type LaneHead struct {
	Sequence int64
	EventID  string
	State    contract.State
}

// TenantHold is what of its tenant holds an attempt back: the tenant is
// disabled (its heads wait), its deliveries_per_second (nil: none), and
// whether the private-target allowlist applies to its endpoints.
type TenantHold struct {
	Disabled            bool
	DeliveriesPerSecond *float64
	AllowPrivateTargets bool
}

// DeliveryStartAttempt marks the delivery delivering (released_at set once)
// and the event's aggregate, and returns what the attempt needs
// (AttemptStart), unless the endpoint is disabled (or deleted), or the delivery is final,
// or it is dead-lettered and no replay of its dead letter is claimed, or an
// earlier delivery of its lane is still open (AttemptStart.HeldBy): then
// it changes nothing. ErrNotFound when the endpoint does not exist.
func (s *Store) DeliveryStartAttempt(ctx context.Context, eventID, endpointID string) (AttemptStart, error) {
	var a AttemptStart
	e := &a.Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(dbsqlc.EventLock, eventID, s.tenant)
		b.Queue(dbsqlc.DeliveryStartAttempt, eventID, endpointID, s.tenant).QueryRow(func(row pgx.Row) error {
			var sc settingsColumns
			var circuit string
			var failures int32
			var held LaneHead
			var config, credentials []byte
			err := row.Scan(append(append([]any{&e.ID, &e.URL, &e.Secret, &e.Previous, &e.Disabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt},
				sc.dest()...), &e.Type, &config, &credentials, &a.State, &a.DeadLetterStatus, &a.Generation, &circuit, &failures, &a.DeletedBy, &a.Data,
				&a.Tenant.Disabled, &a.Tenant.DeliveriesPerSecond, &a.Tenant.AllowPrivateTargets,
				&held.Sequence, &held.EventID, &held.State)...)
			e.Settings = sc.settings()
			if err == nil {
				err = e.decodeDestination(config, credentials)
			}
			a.CircuitOpen, a.CircuitFailures = circuit != CircuitClosed, int(failures)
			if held.Sequence > 0 {
				a.HeldBy = &held
			}
			return translate(err)
		})
		// A no-op when the delivery did not move: the aggregate is a function
		// of the deliveries' states.
		b.Queue(dbsqlc.EventAggregate, eventID, s.tenant)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return a, fmt.Errorf("start attempt: %w", err)
	}
	return a, nil
}

// TenantRateReserve reserves the tenant's next send slot under its
// deliveries_per_second (perSecond > 0), shared by every worker through
// the tenant_rate_slots row, as EndpointRateReserve does an endpoint's.
func (s *Store) TenantRateReserve(ctx context.Context, perSecond float64) (RateSlot, error) {
	r, err := s.q.TenantRateReserve(ctx, dbsqlc.TenantRateReserveParams{TenantID: s.tenant, Secs: 1 / perSecond})
	if err != nil {
		return RateSlot{}, fmt.Errorf("reserve tenant rate slot: %w", err)
	}
	return RateSlot{At: r.Slot, Wait: max(r.Slot.Sub(r.Now), 0)}, nil
}

// RateSlot is a send slot reserved under an endpoint's rate limit: when it
// is, and how long from the reservation that is (0: now), both by the
// database's clock, which every worker shares. A Wait above 0 is a throttle,
// and the reservation counted it in the endpoint's throttled total.
type RateSlot struct {
	At   time.Time
	Wait time.Duration
}

// Lease is what EndpointLeaseAcquire answers: whether the attempt took a
// place among its endpoint's attempts in flight, and how many others hold
// one.
type Lease struct {
	Taken bool
	Held  int
}

// EndpointLeaseAcquire takes one of the endpoint's capMax places for
// attempts in flight, as owner, for ttl (after which a lease never given
// back, a crashed worker's, frees itself). The attempts of every worker
// count one after another: the endpoint's row of endpoint_in_flight is
// locked first, and the count runs in a statement of its own, which sees
// the lease of the attempt before. Both go in one batch, one round trip,
// which pgx runs in one implicit transaction: the lock is held until the
// lease is taken. Taken is false when the cap is full; nothing is held
// then.
func (s *Store) EndpointLeaseAcquire(ctx context.Context, endpointID, owner string, capMax int, ttl time.Duration) (Lease, error) {
	var l Lease
	b := &pgx.Batch{}
	b.Queue(dbsqlc.EndpointLeaseLock, endpointID)
	b.Queue(dbsqlc.EndpointLeaseTake, endpointID, owner, capMax, ttl.Seconds()).QueryRow(func(row pgx.Row) error {
		return row.Scan(&l.Taken, &l.Held)
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Lease{}, fmt.Errorf("acquire endpoint lease: %w", err)
	}
	return l, nil
}

// EndpointLeaseRelease gives the attempt's place back; releasing one not
// held is harmless.
func (s *Store) EndpointLeaseRelease(ctx context.Context, endpointID, owner string) error {
	if err := s.q.EndpointLeaseRelease(ctx, dbsqlc.EndpointLeaseReleaseParams{EndpointID: endpointID, Owner: owner}); err != nil {
		return fmt.Errorf("release endpoint lease: %w", err)
	}
	return nil
}

// EndpointRateReserve reserves the endpoint's next send slot under a rate
// limit of perSecond deliveries a second (> 0), shared by every worker
// through the endpoint_rate_slots row.
func (s *Store) EndpointRateReserve(ctx context.Context, endpointID string, perSecond float64) (RateSlot, error) {
	r, err := s.q.EndpointRateReserve(ctx, dbsqlc.EndpointRateReserveParams{EndpointID: endpointID, Secs: 1 / perSecond})
	if err != nil {
		return RateSlot{}, fmt.Errorf("reserve rate slot: %w", err)
	}
	return RateSlot{At: r.Slot, Wait: max(r.Slot.Sub(r.Now), 0)}, nil
}

// DeliveryDelivered records the delivering attempt, marks the delivery
// delivered, moves the lane (previous = sequence, skipped tail emptied), the
// event's aggregate and the correlation's cursor, in one transaction sent as
// one batch. A repeat records the attempt again and changes nothing else.
func (s *Store) DeliveryDelivered(ctx context.Context, eventID, endpointID, correlationID string, sequence int64, a Attempt, at time.Time) error {
	if err := s.finish(ctx, eventID, endpointID, correlationID, sequence, contract.StateDelivered, &at, &a); err != nil {
		return fmt.Errorf("mark delivery delivered: %w", err)
	}
	return nil
}

// DeliverySkipped marks the delivery skipped, moves the lane (skipped tail
// += sequence), the event's aggregate and the correlation's cursor, in one
// transaction. Repeating it is harmless, and it does not turn a delivered
// delivery into a skipped one. at is when the operator skipped it; the
// ledger stamps the row with its own clock, as it always has.
func (s *Store) DeliverySkipped(ctx context.Context, eventID, endpointID, correlationID string, sequence int64, at time.Time) error {
	if err := s.finish(ctx, eventID, endpointID, correlationID, sequence, contract.StateSkipped, nil, nil); err != nil {
		return fmt.Errorf("mark delivery skipped: %w", err)
	}
	return nil
}

// finish is DeliveryDelivered and DeliverySkipped: every statement after the
// locks is a no-op on a repeat (the delivery is final already, the lane is
// past the sequence, the aggregate and the cursor are where they were), so
// the batch needs no branch.
func (s *Store) finish(ctx context.Context, eventID, endpointID, correlationID string, sequence int64, state contract.State, deliveredAt *time.Time, a *Attempt) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(dbsqlc.CorrelationLock, correlationID, s.tenant)
		b.Queue(dbsqlc.EventLock, eventID, s.tenant)
		if a != nil {
			b.Queue(dbsqlc.AttemptInsert, eventID, endpointID, a.Attempt, a.StartedAt, a.LatencyMS, a.StatusCode, a.Error, a.Outcome, s.tenant)
		}
		b.Queue(dbsqlc.DeliveryMarkFinal, eventID, endpointID, state, deliveredAt, s.tenant)
		b.Queue(dbsqlc.LaneAdvance, correlationID, endpointID, sequence, eventID, state, s.tenant)
		b.Queue(dbsqlc.EventAggregate, eventID, s.tenant)
		b.Queue(dbsqlc.CorrelationAdvance, correlationID, s.tenant)
		return tx.SendBatch(ctx, b).Close()
	})
}

// LaneGet returns the lane's row: a zero Lane with the endpoint set when it
// has none (nothing finished in it yet).
func (s *Store) LaneGet(ctx context.Context, correlationID, endpointID string) (Lane, error) {
	l := Lane{EndpointID: endpointID}
	r, err := s.q.LaneGet(ctx, dbsqlc.LaneGetParams{TenantID: s.tenant, CorrelationID: correlationID, EndpointID: endpointID})
	switch err = translate(err); {
	case err == nil:
		l = Lane{EndpointID: r.EndpointID, LastFinished: r.LastFinished, Previous: r.Previous, Skipped: r.SkippedTail}
	case !errors.Is(err, ErrNotFound):
		return l, fmt.Errorf("get lane: %w", err)
	}
	if len(l.Skipped) == 0 {
		l.Skipped = nil
	}
	return l, nil
}

// LaneRelease is the release of sequence before in the lane (correlation,
// endpoint) as the ledger has its position: what a workflow rebuilt from
// the ledger carries for a delivery the sequencer released, with the
// skipped list the sequencer's release names (contract.ReleaseSkipped),
// voided sequences included.
func (s *Store) LaneRelease(ctx context.Context, correlationID, endpointID string, before int64) (contract.LaneRelease, error) {
	r, err := s.q.LaneReleaseGet(ctx, dbsqlc.LaneReleaseGetParams{TenantID: s.tenant, CorrelationID: correlationID, EndpointID: endpointID, Before: before})
	if err != nil {
		return contract.LaneRelease{}, fmt.Errorf("get lane release: %w", err)
	}
	return contract.LaneRelease{Endpoint: endpointID, Previous: r.Previous,
		Skipped: contract.ReleaseSkipped(contract.CapSkipped(r.SkippedTail), r.Voided, r.Previous, before)}, nil
}

// CorrelationLoadOf returns the correlation's cursor, which sequences
// have arrived from it on, and its lanes, each with at most perLane of its
// open deliveries, read in one statement so they agree with each other. A
// correlation never seen has its cursor and frontier on 1 and nothing else.
func (s *Store) CorrelationLoadOf(ctx context.Context, correlationID string, perLane int) (CorrelationLoad, error) {
	return s.correlationLoad(ctx, correlationID, perLane, true)
}

// SequencerLoadOf is what a sequencer loads of its correlation (a fresh
// run, a resync): as CorrelationLoadOf, but only the lanes with open
// deliveries, each lane's skipped list cut to its newest
// contract.MaxSkippedListed, and the open deliveries kept by their bytes
// too (boundLanes), so that the load stays under its budget whatever
// the lanes ever routed, the IDs' length and the skips.
func (s *Store) SequencerLoadOf(ctx context.Context, correlationID string) (CorrelationLoad, error) {
	l, err := s.correlationLoad(ctx, correlationID, contract.MaxQueuedPerLane, false)
	if err != nil {
		return l, err
	}
	boundLanes(l.Lanes)
	l.Voided = contract.CapVoided(l.Voided)
	return l, nil
}

// boundLanes keeps each lane's open deliveries under
// contract.MaxQueuedBytesPerLane, all of them under contract.MaxQueuedBytes
// (past it, a lane keeps none, and its sequencer loads it when it may), and
// each lane's skipped list to its newest contract.MaxSkippedListed: what a
// sequencer would keep of them.
func boundLanes(lanes []LaneLoad) {
	total := 0
	for i := range lanes {
		l := &lanes[i]
		l.Skipped = contract.CapSkipped(l.Skipped)
		var cut bool
		l.Open, cut = contract.BoundQueued(l.Open, &total)
		l.More = l.More || cut
	}
}

func (s *Store) correlationLoad(ctx context.Context, correlationID string, perLane int, everyLane bool) (CorrelationLoad, error) {
	var (
		l           CorrelationLoad
		runs, lanes []byte
	)
	if err := s.pool.QueryRow(ctx, dbsqlc.CorrelationLoad, correlationID, perLane, s.tenant, everyLane).Scan(&l.Next, &runs, &lanes, &l.Voided); err != nil {
		return l, fmt.Errorf("load correlation: %w", err)
	}
	var rs [][2]int64
	if err := json.Unmarshal(runs, &rs); err != nil {
		return l, fmt.Errorf("load correlation: decode runs: %w", err)
	}
	if err := json.Unmarshal(lanes, &l.Lanes); err != nil {
		return l, fmt.Errorf("load correlation: decode lanes: %w", err)
	}
	l.Frontier = l.Next
	for i, r := range rs {
		if i == 0 && r[0] == l.Next {
			l.Frontier = r[1] + 1
			continue
		}
		if len(l.Arrived) < contract.MaxArrivedRanges {
			l.Arrived = append(l.Arrived, contract.SequenceRange{From: r[0], To: r[1]})
		}
	}
	for i := range l.Lanes {
		l.Lanes[i].cut(perLane)
	}
	l.Lanes = nilIfEmpty(l.Lanes)
	l.Voided = nilIfEmpty(l.Voided)
	return l, nil
}

// LanesLoad returns lanes of the correlation, each with its position, at
// most perLane of its open deliveries after the sequence given for it, and
// the newest voided sequences after its previous one; each within its
// budget as a sequencer keeps it (boundLanes).
func (s *Store) LanesLoad(ctx context.Context, correlationID string, endpoints []string, after []int64, perLane int) ([]LaneLoad, error) {
	rows, err := s.pool.Query(ctx, dbsqlc.LanesLoad, correlationID, endpoints, after, perLane, s.tenant)
	if err != nil {
		return nil, fmt.Errorf("load lanes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LaneLoad, error) {
		var (
			l    LaneLoad
			open []byte
		)
		if err := r.Scan(&l.EndpointID, &l.LastFinished, &l.Previous, &l.Skipped, &l.Voided, &open); err != nil {
			return l, err
		}
		if err := json.Unmarshal(open, &l.Open); err != nil {
			return l, fmt.Errorf("decode open deliveries: %w", err)
		}
		l.cut(perLane)
		l.Voided = nilIfEmpty(l.Voided)
		return l, nil
	})
	if err != nil {
		return nil, fmt.Errorf("load lanes: %w", err)
	}
	boundLanes(out)
	return out, nil
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Attempt is one delivery attempt.
type Attempt struct {
	Attempt    int32     `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	LatencyMS  int32     `json:"latency_ms"`
	StatusCode *int32    `json:"status_code,omitempty"`
	Error      *string   `json:"error,omitempty"`
	Outcome    string    `json:"outcome"`
}

// AttemptsSinceDeadLetter returns the attempts of the delivery (eventID,
// endpointID) made after those its dead letter's last generation holds
// (every attempt, before its first), oldest first, and the ID of the last
// (0 when there is none): what the next generation holds
// (DeadLetter.LastAttemptID).
func (s *Store) AttemptsSinceDeadLetter(ctx context.Context, eventID, endpointID string) ([]Attempt, int64, error) {
	rows, err := s.q.AttemptsSinceDeadLetter(ctx, dbsqlc.AttemptsSinceDeadLetterParams{TenantID: s.tenant, EventID: eventID, EndpointID: endpointID})
	if err != nil {
		return nil, 0, fmt.Errorf("list delivery attempts since the dead letter: %w", err)
	}
	var last int64
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		last = r.ID
		out[i] = attemptOf(dbsqlc.AttemptsListRow{Attempt: r.Attempt, StartedAt: r.StartedAt, LatencyMs: r.LatencyMs,
			StatusCode: r.StatusCode, Error: r.Error, Outcome: r.Outcome})
	}
	return out, last, nil
}

// AttemptInsert records an attempt of the delivery (eventID, endpointID).
func (s *Store) AttemptInsert(ctx context.Context, eventID, endpointID string, a Attempt) error {
	if err := s.q.AttemptInsert(ctx, s.attemptInsertParams(eventID, endpointID, a)); err != nil {
		return fmt.Errorf("insert delivery attempt: %w", err)
	}
	return nil
}

// attemptRow is an attempt as its nullable columns scan from a LEFT JOIN.
type attemptRow struct {
	id         *int64
	attempt    *int32
	startedAt  *time.Time
	latencyMS  *int32
	statusCode *int32
	errText    *string
	outcome    *string
}

func (r *attemptRow) dest() []any {
	return []any{&r.id, &r.attempt, &r.startedAt, &r.latencyMS, &r.statusCode, &r.errText, &r.outcome}
}

// take returns the row's attempt, false when the join found none, and
// clears the row for the next scan.
func (r *attemptRow) take() (Attempt, int64, bool) {
	defer func() { *r = attemptRow{} }()
	if r.id == nil {
		return Attempt{}, 0, false
	}
	return Attempt{Attempt: *r.attempt, StartedAt: *r.startedAt, LatencyMS: *r.latencyMS, StatusCode: r.statusCode, Error: r.errText, Outcome: *r.outcome}, *r.id, true
}

// AttemptsLastByEvent returns the last n attempts of each of the event's
// deliveries, oldest first, by endpoint (a delivery with none is absent);
// the event's Delivery.Attempts counts them all.
func (s *Store) AttemptsLastByEvent(ctx context.Context, eventID string, n int) (map[string][]Attempt, error) {
	rows, err := s.pool.Query(ctx, dbsqlc.AttemptsLastByEvent, eventID, n, s.tenant)
	if err != nil {
		return nil, fmt.Errorf("list last delivery attempts: %w", err)
	}
	out := map[string][]Attempt{}
	var (
		endpoint string
		row      attemptRow
	)
	_, err = pgx.ForEachRow(rows, append([]any{&endpoint}, row.dest()...), func() error {
		if a, _, ok := row.take(); ok {
			out[endpoint] = append(out[endpoint], a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list last delivery attempts: %w", err)
	}
	return out, nil
}

// AttemptsPage returns up to limit of the delivery's attempts after the
// one with row ID after (0: from its first), oldest first, with their row
// IDs (a cursor for the next page). ErrNotFound when the event has no
// delivery to the endpoint.
func (s *Store) AttemptsPage(ctx context.Context, eventID, endpointID string, after int64, limit int) ([]Attempt, []int64, error) {
	if !s.reaches(endpointID) {
		return nil, nil, nil
	}
	rows, err := s.pool.Query(ctx, dbsqlc.AttemptsPage, eventID, endpointID, after, limit, s.tenant)
	if err != nil {
		return nil, nil, fmt.Errorf("page delivery attempts: %w", err)
	}
	var (
		out   []Attempt
		ids   []int64
		found bool
		row   attemptRow
	)
	_, err = pgx.ForEachRow(rows, row.dest(), func() error {
		found = true
		if a, id, ok := row.take(); ok {
			out = append(out, a)
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("page delivery attempts: %w", err)
	}
	if !found {
		return nil, nil, ErrNotFound
	}
	return out, ids, nil
}

// AttemptsList returns the delivery's attempts in order.
func (s *Store) AttemptsList(ctx context.Context, eventID, endpointID string) ([]Attempt, error) {
	rows, err := s.q.AttemptsList(ctx, dbsqlc.AttemptsListParams{TenantID: s.tenant, EventID: eventID, EndpointID: endpointID})
	if err != nil {
		return nil, fmt.Errorf("list delivery attempts: %w", err)
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = attemptOf(r)
	}
	return out, nil
}

// attemptOf is an attempt as the attempt queries return it.
func attemptOf(r dbsqlc.AttemptsListRow) Attempt {
	return Attempt{Attempt: r.Attempt, StartedAt: r.StartedAt, LatencyMS: r.LatencyMs, StatusCode: r.StatusCode, Error: r.Error, Outcome: r.Outcome}
}

// attemptInsertParams record a of the delivery (eventID, endpointID).
func (s *Store) attemptInsertParams(eventID, endpointID string, a Attempt) dbsqlc.AttemptInsertParams {
	return dbsqlc.AttemptInsertParams{TenantID: s.tenant, EventID: eventID, EndpointID: endpointID, Attempt: a.Attempt, StartedAt: a.StartedAt,
		LatencyMs: a.LatencyMS, StatusCode: a.StatusCode, Error: a.Error, Outcome: a.Outcome}
}
