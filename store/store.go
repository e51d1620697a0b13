// Package store is hookflow's access to its own Postgres tables: endpoints,
// the event ledger, delivery attempts, correlation cursors and dead letters.
// Every query it runs is a named query from package schema.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/schema"
)

// ErrNotFound is returned when the row asked for does not exist.
var ErrNotFound = errors.New("not found")

// Event states, as stored and as the API reports them.
const (
	StateQueued       = "queued"
	StateWaiting      = "waiting"
	StateDelivering   = "delivering"
	StateDelivered    = "delivered"
	StateDeadLettered = "dead_lettered"
	StateSkipped      = "skipped"
)

// Store runs hookflow's queries on a pool.
type Store struct {
	pool *pgxpool.Pool
	q    queries
}

type queries struct {
	EndpointInsert           string
	EndpointGet              string
	EndpointUpdate           string
	EndpointRotateSecret     string
	EndpointDisable          string
	EventLockCorrelation     string
	EventInsert              string
	EventSuccessor           string
	CorrelationClaim         string
	EventGet                 string
	EventMarkStarted         string
	EventsQueuedClaim        string
	EventStartAttempt        string
	EventsMissedRelease      string
	EventMarkFinal           string
	EventMarkDeadLettered    string
	CorrelationAdvance       string
	CorrelationNext          string
	CorrelationSkippedTail   string
	CorrelationPending       string
	CorrelationHighWater     string
	AttemptInsert            string
	AttemptsList             string
	DeadLetterUpsert         string
	DeadLetterGet            string
	DeadLetterList           string
	DeadLetterMarkReplayed   string
	DeadLetterMarkSkipped    string
	StatsSummary             string
	StatsBlockedCorrelations string
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) (*Store, error) {
	s := &Store{pool: pool}
	if err := schema.Load(&s.q); err != nil {
		return nil, err
	}
	return s, nil
}

// Pool is the pool the store runs on.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Endpoint is a registered receiver URL.
type Endpoint struct {
	ID                string
	URL               string
	Secret            string
	PreviousSecret    *string
	PreviousExpiresAt *time.Time
	Disabled          bool
	DisabledReason    *string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// SigningSecrets returns the secrets that sign a delivery now: the current
// one, and the previous one while its grace period lasts.
func (e Endpoint) SigningSecrets(now time.Time) []string {
	out := []string{e.Secret}
	if e.PreviousSecret != nil && e.PreviousExpiresAt != nil && now.Before(*e.PreviousExpiresAt) {
		out = append(out, *e.PreviousSecret)
	}
	return out
}

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.ID, &e.URL, &e.Secret, &e.PreviousSecret, &e.PreviousExpiresAt, &e.Disabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt)
	return e, translate(err)
}

func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// EndpointInsert stores a new endpoint.
func (s *Store) EndpointInsert(ctx context.Context, id, url, secret string) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointInsert, id, url, secret))
	if err != nil {
		return e, fmt.Errorf("insert endpoint: %w", err)
	}
	return e, nil
}

// EndpointGet returns the endpoint, or ErrNotFound.
func (s *Store) EndpointGet(ctx context.Context, id string) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointGet, id))
	if err != nil {
		return e, fmt.Errorf("get endpoint: %w", err)
	}
	return e, nil
}

// EndpointUpdate changes the fields that are not nil; ErrNotFound when the
// endpoint does not exist.
func (s *Store) EndpointUpdate(ctx context.Context, id string, url *string, disabled *bool, reason *string) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointUpdate, id, url, disabled, reason))
	if err != nil {
		return e, fmt.Errorf("update endpoint: %w", err)
	}
	return e, nil
}

// EndpointRotateSecret makes secret the current one; the old one keeps
// signing for grace.
func (s *Store) EndpointRotateSecret(ctx context.Context, id, secret string, grace time.Duration) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointRotateSecret, id, secret, grace.Seconds()))
	if err != nil {
		return e, fmt.Errorf("rotate endpoint secret: %w", err)
	}
	return e, nil
}

// EndpointDisable disables the endpoint, recording why.
func (s *Store) EndpointDisable(ctx context.Context, id, reason string) error {
	if _, err := s.pool.Exec(ctx, s.q.EndpointDisable, id, reason); err != nil {
		return fmt.Errorf("disable endpoint: %w", err)
	}
	return nil
}

// Event is one accepted event in the ledger.
type Event struct {
	ID            string
	CorrelationID string
	Sequence      int64
	EndpointID    string
	Type          string
	Data          json.RawMessage
	PayloadHash   []byte
	State         string
	AcceptedAt    time.Time
	ReleasedAt    *time.Time
	DeliveredAt   *time.Time
	UpdatedAt     time.Time
	// Protocol is how the event is ordered: ProtocolSequencer or
	// ProtocolLedger, chosen when it is stored.
	Protocol int
}

// Ordering protocols of stored events (events.protocol).
const (
	// ProtocolSequencer: the correlation's sequencer workflow releases the
	// event. Every event stored before migration 003.
	ProtocolSequencer = 1
	// ProtocolLedger: the correlation's next_sequence in this ledger
	// releases the event, and its predecessor signals it when it finishes.
	ProtocolLedger = 2
)

func scanEvent(row pgx.Row) (Event, error) {
	var e Event
	err := row.Scan(&e.ID, &e.CorrelationID, &e.Sequence, &e.EndpointID, &e.Type, &e.Data, &e.PayloadHash, &e.State, &e.AcceptedAt, &e.ReleasedAt, &e.DeliveredAt, &e.UpdatedAt, &e.Protocol)
	return e, translate(err)
}

// EventInsert stores e as queued. It reports inserted=false, and no error,
// when the id or the (correlation, sequence) pair is already taken.
// The stored event's Protocol is ProtocolLedger unless its correlation
// still has an unfinished ProtocolSequencer event.
func (s *Store) EventInsert(ctx context.Context, e Event) (Event, bool, error) {
	var got Event
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.EventLockCorrelation, e.CorrelationID); err != nil {
			return err
		}
		var err error
		got, err = scanEvent(tx.QueryRow(ctx, s.q.EventInsert, e.ID, e.CorrelationID, e.Sequence, e.EndpointID, e.Type, e.Data, e.PayloadHash))
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("insert event: %w", err)
	}
	return got, true, nil
}

// EventGet returns the event, or ErrNotFound.
func (s *Store) EventGet(ctx context.Context, id string) (Event, error) {
	e, err := scanEvent(s.pool.QueryRow(ctx, s.q.EventGet, id))
	if err != nil {
		return e, fmt.Errorf("get event: %w", err)
	}
	return e, nil
}

// EventMarkStarted records that the event's workflow exists (queued → waiting).
func (s *Store) EventMarkStarted(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, s.q.EventMarkStarted, id); err != nil {
		return fmt.Errorf("mark event started: %w", err)
	}
	return nil
}

// EventsQueuedClaim locks up to limit events queued for longer than minAge
// (SKIP LOCKED, so concurrent starters share the work), calls start for each
// and marks it waiting in the same transaction. It stops at the first error
// and returns how many it marked.
func (s *Store) EventsQueuedClaim(ctx context.Context, limit int, minAge time.Duration, start func(ctx context.Context, ev Event) error) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.q.EventsQueuedClaim, limit, minAge.Seconds())
		if err != nil {
			return fmt.Errorf("claim queued events: %w", err)
		}
		events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) { return scanEvent(r) })
		if err != nil {
			return fmt.Errorf("claim queued events: %w", err)
		}
		for _, ev := range events {
			if err := start(ctx, ev); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.q.EventMarkStarted, ev.ID); err != nil {
				return fmt.Errorf("mark event started: %w", err)
			}
			n++
		}
		return nil
	})
	if err != nil && n > 0 {
		// The transaction rolled back: those starts happened but are not
		// marked; the next sweep starts them again, which is a no-op.
		n = 0
	}
	return n, err
}

// EventFinish marks the event delivered or skipped and advances its
// correlation past it, in one transaction. Repeating it is harmless.
func (s *Store) EventFinish(ctx context.Context, id, correlationID string, sequence int64, state string, at time.Time) error {
	var deliveredAt *time.Time
	if state == StateDelivered {
		deliveredAt = &at
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.EventMarkFinal, id, state, deliveredAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.CorrelationAdvance, correlationID, sequence)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark event %s: %w", state, err)
	}
	return nil
}

// EventStartAttempt marks the event delivering and returns its endpoint
// (ErrNotFound when it does not exist) and the event's state before this
// attempt, in one round trip.
func (s *Store) EventStartAttempt(ctx context.Context, id, endpointID string) (Endpoint, string, error) {
	var e Endpoint
	var state string
	err := translate(s.pool.QueryRow(ctx, s.q.EventStartAttempt, id, endpointID).Scan(
		&e.ID, &e.URL, &e.Secret, &e.PreviousSecret, &e.PreviousExpiresAt, &e.Disabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt, &state))
	if err != nil {
		return e, "", fmt.Errorf("start attempt: %w", err)
	}
	return e, state, nil
}

// EventDelivered records the delivering attempt, marks the event delivered
// and moves its correlation past it, in one transaction sent as one batch.
// With successor it also returns the event after it when that one waits for
// its release (EventSuccessor), or nil. Repeating it records the attempt again and
// changes nothing else.
func (s *Store) EventDelivered(ctx context.Context, id, correlationID string, sequence int64, a Attempt, at time.Time, successor bool) (*Event, error) {
	var next *Event
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// The correlation's lock, which EventInsert holds until it commits:
		// a successor stored concurrently is either committed before the
		// lookup below reads (found here) or stored after this commits (its
		// own start then sees the moved cursor). Without it both could miss.
		b.Queue(s.q.EventLockCorrelation, correlationID)
		b.Queue(s.q.AttemptInsert, id, a.Attempt, a.StartedAt, a.LatencyMS, a.StatusCode, a.Error, a.Outcome)
		b.Queue(s.q.EventMarkFinal, id, StateDelivered, at)
		b.Queue(s.q.CorrelationAdvance, correlationID, sequence)
		if successor {
			b.Queue(s.q.EventSuccessor, correlationID, sequence).QueryRow(func(row pgx.Row) error {
				e, err := scanEvent(row)
				if errors.Is(err, ErrNotFound) {
					return nil
				}
				next = &e
				return err
			})
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("mark event delivered: %w", err)
	}
	return next, nil
}

// EventsMissedRelease lists up to limit events of protocol 2 still waiting
// although their correlation's cursor reached them more than age ago.
func (s *Store) EventsMissedRelease(ctx context.Context, age time.Duration, limit int) ([]Event, error) {
	rows, err := s.pool.Query(ctx, s.q.EventsMissedRelease, age.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("find missed releases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, fmt.Errorf("find missed releases: %w", err)
	}
	return out, nil
}

// EventMarkDeadLettered records the dead-lettered state.
func (s *Store) EventMarkDeadLettered(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, s.q.EventMarkDeadLettered, id); err != nil {
		return fmt.Errorf("mark event dead-lettered: %w", err)
	}
	return nil
}

// Claim is the ledger's answer to a ProtocolLedger event asking to deliver.
type Claim struct {
	// Next is the correlation's next sequence: the event is released when
	// it is the event's, finished already when it is past it, and waits
	// otherwise.
	Next int64
	// State is the event's own state.
	State string
	// Skipped are the sequences skipped since the last delivered one, when
	// the event is released.
	Skipped []int64
}

// CorrelationClaim answers whether the event (id, sequence) of the
// correlation may deliver now. It reads; the release is the cursor reaching
// the event, which only the event before it moves (EventFinish).
func (s *Store) CorrelationClaim(ctx context.Context, correlationID string, sequence int64, id string) (Claim, error) {
	var c Claim
	var state *string
	if err := s.pool.QueryRow(ctx, s.q.CorrelationClaim, correlationID, sequence, id).Scan(&c.Next, &state, &c.Skipped); err != nil {
		return Claim{}, fmt.Errorf("claim event %s: %w", id, err)
	}
	if state == nil {
		return Claim{}, fmt.Errorf("claim event %s: %w", id, ErrNotFound)
	}
	c.State = *state
	return c, nil
}

// EventSuccessor returns the event after sequence in the correlation when
// it is stored and not released yet; nil otherwise.
func (s *Store) EventSuccessor(ctx context.Context, correlationID string, sequence int64) (*Event, error) {
	e, err := scanEvent(s.pool.QueryRow(ctx, s.q.EventSuccessor, correlationID, sequence))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find successor of %s/%d: %w", correlationID, sequence, err)
	}
	return &e, nil
}

// CorrelationNext is the sequence the correlation needs next (1 when new).
func (s *Store) CorrelationNext(ctx context.Context, correlationID string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.CorrelationNext, correlationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("get correlation cursor: %w", err)
	}
	return n, nil
}

// CorrelationSkippedTail lists the sequences skipped since the
// correlation's last delivered event, in order.
func (s *Store) CorrelationSkippedTail(ctx context.Context, correlationID string) ([]int64, error) {
	rows, err := s.pool.Query(ctx, s.q.CorrelationSkippedTail, correlationID)
	if err != nil {
		return nil, fmt.Errorf("list skipped sequences: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list skipped sequences: %w", err)
	}
	return out, nil
}

// CorrelationHighWater is the highest sequence accepted for the correlation.
func (s *Store) CorrelationHighWater(ctx context.Context, correlationID string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.CorrelationHighWater, correlationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("get correlation high-water mark: %w", err)
	}
	return n, nil
}

// PendingEvent is an event of a correlation that is not final yet.
type PendingEvent struct {
	ID       string
	Sequence int64
	State    string
}

// CorrelationPending lists up to limit unfinished events of the correlation
// in sequence order.
func (s *Store) CorrelationPending(ctx context.Context, correlationID string, limit int) ([]PendingEvent, error) {
	rows, err := s.pool.Query(ctx, s.q.CorrelationPending, correlationID, limit)
	if err != nil {
		return nil, fmt.Errorf("list pending events: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PendingEvent])
	if err != nil {
		return nil, fmt.Errorf("list pending events: %w", err)
	}
	return out, nil
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

// AttemptInsert records an attempt of event id.
func (s *Store) AttemptInsert(ctx context.Context, eventID string, a Attempt) error {
	if _, err := s.pool.Exec(ctx, s.q.AttemptInsert, eventID, a.Attempt, a.StartedAt, a.LatencyMS, a.StatusCode, a.Error, a.Outcome); err != nil {
		return fmt.Errorf("insert delivery attempt: %w", err)
	}
	return nil
}

// AttemptsList returns the event's attempts in order.
func (s *Store) AttemptsList(ctx context.Context, eventID string) ([]Attempt, error) {
	rows, err := s.pool.Query(ctx, s.q.AttemptsList, eventID)
	if err != nil {
		return nil, fmt.Errorf("list delivery attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Attempt])
	if err != nil {
		return nil, fmt.Errorf("list delivery attempts: %w", err)
	}
	return out, nil
}
