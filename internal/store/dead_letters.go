package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// Dead letter statuses.
const (
	DeadLetterOpen     = "open"
	DeadLetterReplayed = "replayed"
	DeadLetterSkipped  = "skipped"
)

// DeadLetter is a delivery (event, endpoint) that gave up, with everything
// an operator needs to decide: the signed envelope, the attempts of its
// generation (each generation holds its own, not those of the ones
// before: GET /v1/events/{id} lists them all), why it stopped. Two endpoints of one event have a dead letter each, with their
// own generations, and are replayed or skipped independently.
type DeadLetter struct {
	// TenantID is the tenant of the event and endpoint.
	TenantID      string `json:"-"`
	EventID       string `json:"event_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	EndpointID    string `json:"endpoint_id"`
	// Envelope and Attempts are nil in a listing that did not ask for them
	// (DeadLetterFilter.WithEnvelope, WithAttempts), and left out of its
	// JSON; AttemptCount is always there.
	Envelope       json.RawMessage `json:"envelope,omitzero"`
	Attempts       []Attempt       `json:"attempts,omitzero"`
	AttemptCount   int32           `json:"attempt_count"`
	Reason         string          `json:"reason"`
	FirstFailureAt *time.Time      `json:"first_failure_at,omitempty"`
	DeadLetteredAt time.Time       `json:"dead_lettered_at"`
	// Generation counts the times the delivery was dead-lettered; a replay
	// or skip names the one it is for.
	Generation  int32      `json:"generation"`
	Status      string     `json:"status"`
	ReplayedAt  *time.Time `json:"replayed_at,omitempty"`
	ReplayedBy  *string    `json:"replayed_by,omitempty"`
	ReplayCount int32      `json:"replay_count"`
	SkippedBy   *string    `json:"skipped_by,omitempty"`
	SkippedAt   *time.Time `json:"skipped_at,omitempty"`
	SkipNote    *string    `json:"skip_note,omitempty"`
	// WindowStart, written with a dead letter and not stored, is when the
	// delivery window it ends began, on Temporal's clock and moved on by
	// throttled waits: the ledger compares none of it with its own times
	// (CircuitLateOutageDeadLetter decides on the database's clock).
	WindowStart time.Time `json:"-"`
	// LastAttemptID, written with a dead letter, is the delivery_attempts
	// row of the last of its Attempts (AttemptsSinceDeadLetter; 0 for
	// none): the next generation holds the attempts after it.
	LastAttemptID int64 `json:"-"`
}

// deadLetterOf is a dead letter as DeadLetterGet and DeadLettersOfEvent
// return it.
func deadLetterOf(r dbsqlc.DeadLetterGetRow) (DeadLetter, error) {
	d := DeadLetter{EventID: r.EventID, CorrelationID: r.CorrelationID, Sequence: r.Sequence, EndpointID: r.EndpointID,
		Envelope: r.Envelope, AttemptCount: r.JsonbArrayLength, Reason: r.Reason, FirstFailureAt: r.FirstFailureAt,
		DeadLetteredAt: r.DeadLetteredAt, Generation: r.Generation, Status: r.Status, ReplayedAt: r.ReplayedAt,
		ReplayedBy: r.ReplayedBy, ReplayCount: r.ReplayCount, SkippedBy: r.SkippedBy, SkippedAt: r.SkippedAt, SkipNote: r.SkipNote,
		TenantID: r.TenantID}
	if r.Attempts == nil { // not asked for
		return d, nil
	}
	if err := json.Unmarshal(r.Attempts, &d.Attempts); err != nil {
		return d, fmt.Errorf("decode attempts: %w", err)
	}
	return d, nil
}

// DeadLetterUpsert writes (or reopens) the dead letter of the delivery
// (d.EventID, d.EndpointID) that ends delivery window window, and marks the
// delivery dead-lettered, the event's aggregate and the event as one with a
// dead letter (has_dead_letter), in one transaction, and returns the dead
// letter's generation: 1 the first time, one more at each reopening. A
// second write for the same window changes nothing and returns the
// generation the first wrote, whatever an operator did to it since. It
// writes nothing and returns ErrEventFinished, wrapped, for a delivery the
// ledger has as delivered or skipped (a delivering attempt's result was lost
// on its way back to the workflow, which saw the window run out), and
// ErrNotFound, wrapped, for one that does not exist. Each generation it
// writes publishes one hookflow.dead_letter.created operational event about
// the endpoint, in the same transaction (deadLetterPublish). Its
// dead_lettered_at is the database's clock (d.DeadLetteredAt is not
// read), which the auto-replay compares with the circuit's times.
func (s *Store) DeadLetterUpsert(ctx context.Context, d DeadLetter, window string) (int32, error) {
	if window == "" {
		return 0, errors.New("write dead letter: the window it ends is required")
	}
	attempts, err := json.Marshal(d.Attempts)
	if err != nil {
		return 0, fmt.Errorf("encode attempts: %w", err)
	}
	var gen int32
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.EventLock(ctx, dbsqlc.EventLockParams{TenantID: s.tenant, ID: d.EventID}); err != nil {
			return err
		}
		st, err := q.DeliveryStateForUpdate(ctx, dbsqlc.DeliveryStateForUpdateParams{TenantID: s.tenant, EventID: d.EventID, EndpointID: d.EndpointID})
		if err != nil {
			return translate(err)
		}
		state := contract.State(st)
		if state.Final() {
			return fmt.Errorf("%w: %s", ErrEventFinished, state)
		}
		var last *int64
		if d.LastAttemptID > 0 {
			last = &d.LastAttemptID
		}
		up, err := q.DeadLetterUpsert(ctx, dbsqlc.DeadLetterUpsertParams{TenantID: s.tenant, EventID: d.EventID, CorrelationID: d.CorrelationID,
			Sequence: d.Sequence, EndpointID: d.EndpointID, Envelope: d.Envelope, Attempts: attempts, Reason: d.Reason,
			FirstFailureAt: d.FirstFailureAt, LastAttemptID: last, WindowKey: &window})
		if errors.Is(err, pgx.ErrNoRows) {
			// Written for this window already: a retry.
			gen, err = q.DeadLetterGeneration(ctx, dbsqlc.DeadLetterGenerationParams{TenantID: s.tenant, EventID: d.EventID, EndpointID: d.EndpointID})
			return err
		}
		if err != nil {
			return err
		}
		gen, d.DeadLetteredAt = up.Generation, up.DeadLetteredAt
		b := &pgx.Batch{}
		b.Queue(dbsqlc.DeliveryMarkDeadLettered, d.EventID, d.EndpointID, s.tenant)
		b.Queue(dbsqlc.EventAggregate, d.EventID, s.tenant)
		if contract.OutageCaused(d.Reason) {
			// Written after its outage's circuit closed, maybe past that
			// close's auto-replay pass: the pass runs again for it.
			b.Queue(dbsqlc.CircuitLateOutageDeadLetter, d.EndpointID, s.tenant, d.EventID)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if contract.DisablingCaused(d.Reason) {
			if err := s.resumeIfEnabled(ctx, tx, d, gen); err != nil {
				return err
			}
		}
		return s.deadLetterPublish(ctx, tx, d, gen)
	})
	if err != nil {
		return 0, fmt.Errorf("write dead letter: %w", err)
	}
	return gen, nil
}

// resumeIfEnabled claims the replay of generation gen of d, a dead letter
// its endpoint's being disabled wrote, as contract.EndpointEnabledBy when
// the endpoint is enabled by the time it is written: its attempt read the
// endpoint disabled, and an operator's PATCH enabled it since. That PATCH
// replays the disabling's dead letters once it has committed, and may have
// read them before this one was written. The endpoint's row is locked for
// the rest of the transaction, so a PATCH either committed before the read
// here (the endpoint is seen enabled, and the replay claimed) or waits for
// this dead letter to commit (and then replays it). The claim is carried
// out as any whose signal never reached its workflow: the heads sweep sends
// it (starter.resendLostClaim).
func (s *Store) resumeIfEnabled(ctx context.Context, tx pgx.Tx, d DeadLetter, gen int32) error {
	q := s.q.WithTx(tx)
	disabled, err := q.EndpointDisabledForShare(ctx, d.EndpointID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && disabled) {
		return nil // gone, or still disabled: enabling it replays this one
	}
	if err != nil {
		return err
	}
	by := contract.EndpointEnabledBy
	_, err = q.DeadLetterMarkReplayed(ctx, dbsqlc.DeadLetterMarkReplayedParams{TenantID: s.tenant, EventID: d.EventID, Generation: gen, ReplayedBy: &by, EndpointID: d.EndpointID})
	return err
}

// deadLetterPublish stores the hookflow.dead_letter.created event of
// generation gen of d in the transaction that wrote it, so the two commit
// or roll back together and a retried write (which writes nothing, above)
// publishes nothing. A dead letter of an operational event publishes none:
// two failing operators' endpoints would otherwise tell each other of each
// other's dead letters for ever. The payload names what an operator looks
// up and why it stopped; d.Reason is the delivery's, already scrubbed of
// the endpoint's custom header values, and nothing else of the endpoint's
// settings or secrets is in it.
func (s *Store) deadLetterPublish(ctx context.Context, tx pgx.Tx, d DeadLetter, gen int32) error {
	typ, err := s.q.WithTx(tx).EventTypeGet(ctx, dbsqlc.EventTypeGetParams{TenantID: s.tenant, ID: d.EventID})
	if err != nil {
		return fmt.Errorf("read event type: %w", err)
	}
	if contract.Operational(typ) {
		return nil
	}
	_, err = s.OperationalEventInsert(ctx, tx, d.EndpointID, contract.OpDeadLetterCreated, map[string]any{
		"endpoint_id":      d.EndpointID,
		"event_id":         d.EventID,
		"event_type":       typ,
		"correlation_id":   d.CorrelationID,
		"sequence":         d.Sequence,
		"generation":       gen,
		"reason":           d.Reason,
		"attempt_count":    len(d.Attempts),
		"dead_lettered_at": d.DeadLetteredAt.UTC(),
	})
	return err
}

// DeadLetterGet returns the dead letter of the delivery (eventID,
// endpointID), or ErrNotFound.
func (s *Store) DeadLetterGet(ctx context.Context, eventID, endpointID string) (DeadLetter, error) {
	if !s.reaches(endpointID) {
		return DeadLetter{}, fmt.Errorf("get dead letter: %w", ErrNotFound)
	}
	r, err := s.q.DeadLetterGet(ctx, dbsqlc.DeadLetterGetParams{TenantID: s.tenant, EventID: eventID, EndpointID: endpointID})
	if err != nil {
		return DeadLetter{}, fmt.Errorf("get dead letter: %w", translate(err))
	}
	d, err := deadLetterOf(r)
	if err != nil {
		return d, fmt.Errorf("get dead letter: %w", err)
	}
	return d, nil
}

// DeadLettersOfEvent returns every dead letter of the event, whatever its
// status, with its envelope and attempts, by endpoint; none when it has
// none.
func (s *Store) DeadLettersOfEvent(ctx context.Context, eventID string) ([]DeadLetter, error) {
	rows, err := s.q.DeadLettersOfEvent(ctx, dbsqlc.DeadLettersOfEventParams{TenantID: s.tenant, EventID: eventID})
	if err != nil {
		return nil, fmt.Errorf("list the event's dead letters: %w", err)
	}
	out, err := rowsOf(rows, func(r dbsqlc.DeadLettersOfEventRow) (DeadLetter, error) {
		return deadLetterOf(dbsqlc.DeadLetterGetRow(r))
	})
	if err != nil {
		return nil, fmt.Errorf("list the event's dead letters: %w", err)
	}
	return slices.DeleteFunc(out, func(d DeadLetter) bool { return !s.reaches(d.EndpointID) }), nil
}

// DeadLetterFilter narrows a listing; zero fields match everything.
type DeadLetterFilter struct {
	CorrelationID string
	EndpointID    string
	EventID       string
	Since, Until  *time.Time
	Status        string
	// After is the keyset cursor: the last row of the previous page
	// (DeadLetterList only: its dead_lettered_at, event and endpoint).
	AfterTime       *time.Time
	AfterID         string
	AfterEndpointID string
	Limit           int
	// WithEnvelope and WithAttempts read each row's envelope (up to the
	// API's body limit) and attempts too; a listing leaves them out
	// otherwise. DeadLetterList only.
	WithEnvelope, WithAttempts bool
}

// DeadLetterList returns one page of dead letters, oldest first (ties by
// event, then endpoint).
func (s *Store) DeadLetterList(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	rows, err := s.q.DeadLetterList(ctx, dbsqlc.DeadLetterListParams{TenantID: s.tenant, WithEnvelope: f.WithEnvelope, WithAttempts: f.WithAttempts,
		CorrelationID: nullIfZero(f.CorrelationID), EndpointID: nullIfZero(f.EndpointID), Since: f.Since, Until: f.Until,
		Status: nullIfZero(f.Status), EventID: nullIfZero(f.EventID),
		AfterTime: f.AfterTime, AfterEventID: f.AfterID, AfterEndpointID: f.AfterEndpointID, MaxRows: int32(f.Limit), OnlyEndpoints: s.onlyEndpoints()})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := rowsOf(rows, func(r dbsqlc.DeadLetterListRow) (DeadLetter, error) { return deadLetterOf(dbsqlc.DeadLetterGetRow(r)) })
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// ReplayCursor is a place in a batch replay's order: after this lane's
// (correlation, endpoint) sequence, and this event (the last of the page
// before).
type ReplayCursor struct {
	CorrelationID string
	EndpointID    string
	Sequence      int64
	EventID       string
}

// DeadLetterReplayPage returns up to f.Limit open dead letters matching f's
// correlation, endpoint, event, since and until, each lane (correlation,
// endpoint) in sequence order (lanes by correlation, then endpoint), from
// after on (nil: the first page); without envelopes or attempts. A batch
// replay reads one page at a time.
func (s *Store) DeadLetterReplayPage(ctx context.Context, f DeadLetterFilter, after *ReplayCursor) ([]DeadLetter, error) {
	var corr *string
	var seq int64
	var id, endpoint string
	if after != nil {
		corr, endpoint, seq, id = &after.CorrelationID, after.EndpointID, after.Sequence, after.EventID
	}
	rows, err := s.q.DeadLetterReplayPage(ctx, dbsqlc.DeadLetterReplayPageParams{TenantID: s.tenant,
		CorrelationID: nullIfZero(f.CorrelationID), EndpointID: nullIfZero(f.EndpointID), Since: f.Since, Until: f.Until,
		EventID: nullIfZero(f.EventID), AfterCorrelationID: corr, AfterEndpointID: endpoint, AfterSequence: seq, AfterEventID: id,
		MaxRows: int32(f.Limit), OnlyEndpoints: s.onlyEndpoints()})
	if err != nil {
		return nil, fmt.Errorf("page dead letters to replay: %w", err)
	}
	out, err := rowsOf(rows, func(r dbsqlc.DeadLetterReplayPageRow) (DeadLetter, error) {
		return deadLetterOf(dbsqlc.DeadLetterGetRow(r))
	})
	if err != nil {
		return nil, fmt.Errorf("page dead letters to replay: %w", err)
	}
	return out, nil
}

// DeadLetterMarkReplayed claims the replay of generation gen of the
// delivery's (eventID, endpointID) dead letter; it reports false when that
// generation is not open (someone replayed or skipped it already, or it was
// reopened as a later one).
func (s *Store) DeadLetterMarkReplayed(ctx context.Context, eventID, endpointID string, gen int32, by string) (bool, error) {
	if !s.reaches(endpointID) {
		return false, nil
	}
	n, err := s.q.DeadLetterMarkReplayed(ctx, dbsqlc.DeadLetterMarkReplayedParams{TenantID: s.tenant, EventID: eventID, Generation: gen, ReplayedBy: &by, EndpointID: endpointID})
	if err != nil {
		return false, fmt.Errorf("mark dead letter replayed: %w", err)
	}
	return n == 1, nil
}

// DeadLetterMarkSkipped claims the skip of generation gen, recording who and
// why; false as DeadLetterMarkReplayed.
func (s *Store) DeadLetterMarkSkipped(ctx context.Context, eventID, endpointID string, gen int32, by, note string) (bool, error) {
	if !s.reaches(endpointID) {
		return false, nil
	}
	n, err := s.q.DeadLetterMarkSkipped(ctx, dbsqlc.DeadLetterMarkSkippedParams{TenantID: s.tenant, EventID: eventID, Generation: gen, SkippedBy: &by,
		SkipNote: nullIfZero(note), EndpointID: endpointID})
	if err != nil {
		return false, fmt.Errorf("mark dead letter skipped: %w", err)
	}
	return n == 1, nil
}

// DeadLetterEndDeleted records, on the dead letter of a delivery that its
// endpoint's delete ended skipped after a replay, that it was skipped, by
// who deleted the endpoint: the replay never delivered it. A row open or
// skipped already, or none, is left as it is.
func (s *Store) DeadLetterEndDeleted(ctx context.Context, eventID, endpointID, by string) error {
	note := contract.EndpointDeletedNote
	if err := s.q.DeadLetterEndDeleted(ctx, dbsqlc.DeadLetterEndDeletedParams{TenantID: s.tenant, EventID: eventID, EndpointID: endpointID, SkippedBy: &by, SkipNote: &note}); err != nil {
		return fmt.Errorf("end a deleted endpoint's replayed dead letter: %w", err)
	}
	return nil
}

// DeadLetterReopen undoes a replay or skip claimed for generation gen whose
// signal never reached the workflow, so an operator can act again.
func (s *Store) DeadLetterReopen(ctx context.Context, eventID, endpointID string, gen int32) error {
	if err := s.q.DeadLetterReopen(ctx, dbsqlc.DeadLetterReopenParams{TenantID: s.tenant, EventID: eventID, Generation: gen, EndpointID: endpointID}); err != nil {
		return fmt.Errorf("reopen dead letter: %w", err)
	}
	return nil
}
