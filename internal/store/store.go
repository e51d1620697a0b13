// Package store is hookflow's access to its own Postgres tables: endpoints,
// the event ledger, delivery attempts, the correlations' cursors (as their
// sequencers moved them) and dead letters.
// Every query it runs is a named query from package schema.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/schema"
)

// ErrNotFound is returned when the row asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrEventFinished is returned when a dead letter is to be written for an
// event the ledger has as delivered or skipped.
var ErrEventFinished = errors.New("event is finished")

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
	EndpointsList            string
	EndpointsSubscribed      string
	EventInsert              string
	EventGet                 string
	EventMarkStarted         string
	EventsQueuedClaim        string
	EventsStuckHeadsClaim    string
	EventSweepDeferred       string
	CorrelationSweepDeferred string
	EventRestarted           string
	EventStartAttempt        string
	EventMarkFinal           string
	EventMarkDeadLettered    string
	EventStateForUpdate      string
	CorrelationAdvance       string
	CorrelationNext          string
	CorrelationSkippedTail   string
	CorrelationPending       string
	CorrelationHighWater     string
	AttemptInsert            string
	AttemptsList             string
	DeadLetterUpsert         string
	DeadLetterGeneration     string
	DeadLetterGet            string
	DeadLetterList           string
	DeadLetterReplayPage     string
	DeadLetterMarkReplayed   string
	DeadLetterMarkSkipped    string
	DeadLetterReopen         string
	StatsSummary             string
	StatsBlockedCorrelations string
	APIKeyInsert             string
	APIKeyByHash             string
	APIKeyList               string
	APIKeyRevoke             string
	CleanerLock              string
	CleanerUnlock            string
	EventsPrunePayloads      string
	AttemptsPrune            string
	EventsPruneKeys          string
	CleanerRunRecord         string
	CleanerRunLast           string
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
	ID     string
	URL    string
	Secret string
	// Previous are the secrets a rotation replaced, oldest first: each
	// keeps signing until it expires.
	Previous       []PreviousSecret
	Disabled       bool
	DisabledReason *string
	// EventTypes are the patterns of the event types it is subscribed to
	// (package eventtypes); nil is every type. EventStartAttempt does not
	// read them: a delivery has no use for them.
	EventTypes []string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// PreviousSecret is a secret a rotation replaced, and when it stops signing.
type PreviousSecret struct {
	Secret    string    `json:"secret"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SigningSecrets returns the secrets that sign a delivery now: the current
// one, and every previous one whose grace period lasts.
func (e Endpoint) SigningSecrets(now time.Time) []string {
	out := []string{e.Secret}
	for _, p := range e.Previous {
		if now.Before(p.ExpiresAt) {
			out = append(out, p.Secret)
		}
	}
	return out
}

// PreviousExpiresAt is when the last previous secret stops signing; nil
// when none signs any more.
func (e Endpoint) PreviousExpiresAt(now time.Time) *time.Time {
	var last *time.Time
	for _, p := range e.Previous {
		if now.Before(p.ExpiresAt) && (last == nil || p.ExpiresAt.After(*last)) {
			t := p.ExpiresAt
			last = &t
		}
	}
	return last
}

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.ID, &e.URL, &e.Secret, &e.Previous, &e.Disabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt, &e.EventTypes)
	return e, translate(err)
}

func collectEndpoints(rows pgx.Rows, err error) ([]Endpoint, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
}

func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// EndpointInsert stores a new endpoint, subscribed to eventTypes (nil for
// every type; the caller has checked them with eventtypes.Normalize).
func (s *Store) EndpointInsert(ctx context.Context, id, url, secret string, eventTypes []string) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointInsert, id, url, secret, eventTypes))
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

// EndpointChange is what EndpointUpdate changes: each field that is not
// nil.
type EndpointChange struct {
	URL      *string
	Disabled *bool
	// DisabledReason says why, when Disabled is true (default "disabled by
	// operator"); re-enabling clears it.
	DisabledReason *string
	// EventTypes replaces the endpoint's patterns: a pointer to nil
	// subscribes it to every type.
	EventTypes *[]string
}

// EndpointUpdate makes the change; ErrNotFound when the endpoint does not
// exist.
func (s *Store) EndpointUpdate(ctx context.Context, id string, ch EndpointChange) (Endpoint, error) {
	var eventTypes []string
	if ch.EventTypes != nil {
		eventTypes = *ch.EventTypes
	}
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointUpdate, id, ch.URL, ch.Disabled, ch.DisabledReason, ch.EventTypes != nil, eventTypes))
	if err != nil {
		return e, fmt.Errorf("update endpoint: %w", err)
	}
	return e, nil
}

// EndpointRotateSecret makes secret the current one; the one it replaces
// keeps signing for grace, beside any earlier one still in its grace.
func (s *Store) EndpointRotateSecret(ctx context.Context, id, secret string, grace time.Duration) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointRotateSecret, id, secret, grace.Seconds()))
	if err != nil {
		return e, fmt.Errorf("rotate endpoint secret: %w", err)
	}
	return e, nil
}

// EndpointsList returns up to limit endpoints in id order, from the first
// whose id sorts after after ("" for the first page).
func (s *Store) EndpointsList(ctx context.Context, after string, limit int) ([]Endpoint, error) {
	out, err := collectEndpoints(s.pool.Query(ctx, s.q.EndpointsList, after, limit))
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return out, nil
}

// EndpointsSubscribed returns every enabled endpoint whose event types match
// eventType (as eventtypes.Matches has it), in id order; none is no error.
func (s *Store) EndpointsSubscribed(ctx context.Context, eventType string) ([]Endpoint, error) {
	out, err := collectEndpoints(s.pool.Query(ctx, s.q.EndpointsSubscribed, eventType))
	if err != nil {
		return nil, fmt.Errorf("list subscribed endpoints: %w", err)
	}
	return out, nil
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
	intake.Event
	State       contract.State
	AcceptedAt  time.Time
	ReleasedAt  *time.Time
	DeliveredAt *time.Time
	UpdatedAt   time.Time
	// RunID is the run of its workflow that the API or a sweep started
	// last; nil until one did.
	RunID *string
	// Restarts counts the times a sweep or a replay had to start the
	// event's workflow again; RestartedAt and RestartReason say when last
	// and why.
	Restarts      int32
	RestartedAt   *time.Time
	RestartReason *string
}

func scanEvent(row pgx.Row) (Event, error) {
	var e Event
	err := row.Scan(&e.ID, &e.CorrelationID, &e.Sequence, &e.EndpointID, &e.Type, &e.Data, &e.PayloadHash, &e.State, &e.AcceptedAt,
		&e.ReleasedAt, &e.DeliveredAt, &e.UpdatedAt, &e.RunID, &e.Restarts, &e.RestartedAt, &e.RestartReason)
	return e, translate(err)
}

func collectEvents(rows pgx.Rows, err error) ([]Event, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) { return scanEvent(r) })
}

// EventInsert stores e as queued. It reports inserted=false, and no error,
// when the id or the (correlation, sequence) pair is already taken.
func (s *Store) EventInsert(ctx context.Context, e intake.Event) (Event, bool, error) {
	got, err := scanEvent(s.pool.QueryRow(ctx, s.q.EventInsert, e.ID, e.CorrelationID, e.Sequence, e.EndpointID, e.Type, e.Data, e.PayloadHash))
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

// EventMarkStarted records that the event's workflow exists (queued →
// waiting), and its run when this call started it (runID "" otherwise).
func (s *Store) EventMarkStarted(ctx context.Context, id, runID string) error {
	if _, err := s.pool.Exec(ctx, s.q.EventMarkStarted, id, runID); err != nil {
		return fmt.Errorf("mark event started: %w", err)
	}
	return nil
}

// EventsQueuedClaim takes up to limit events queued for longer than lease
// that no other sweep took within lease, and returns them. The claim is
// committed when it returns: the caller starts their workflows with no
// transaction open.
func (s *Store) EventsQueuedClaim(ctx context.Context, limit int, lease time.Duration) ([]Event, error) {
	out, err := collectEvents(s.pool.Query(ctx, s.q.EventsQueuedClaim, limit, lease.Seconds()))
	if err != nil {
		return nil, fmt.Errorf("claim queued events: %w", err)
	}
	return out, nil
}

// EventsStuckHeadsClaim takes up to limit correlations whose cursor has not
// moved, nor been claimed, for longer than lease, stamps their lease, and
// returns those of their heads (the event the cursor is on) that are not
// finished nor queued and have not changed for as long. It reads only the
// correlations it takes, whatever the backlog.
func (s *Store) EventsStuckHeadsClaim(ctx context.Context, limit int, lease time.Duration) ([]Event, error) {
	out, err := collectEvents(s.pool.Query(ctx, s.q.EventsStuckHeadsClaim, lease.Seconds(), limit))
	if err != nil {
		return nil, fmt.Errorf("claim stuck heads: %w", err)
	}
	return out, nil
}

// EventSweepDeferred puts a queued event that the sweep could not start at
// the back of EventsQueuedClaim's line.
func (s *Store) EventSweepDeferred(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, s.q.EventSweepDeferred, id); err != nil {
		return fmt.Errorf("defer queued event: %w", err)
	}
	return nil
}

// CorrelationSweepDeferred puts a correlation whose head the sweep could not
// look at at the back of EventsStuckHeadsClaim's line.
func (s *Store) CorrelationSweepDeferred(ctx context.Context, correlationID string) error {
	if _, err := s.pool.Exec(ctx, s.q.CorrelationSweepDeferred, correlationID); err != nil {
		return fmt.Errorf("defer correlation: %w", err)
	}
	return nil
}

// EventRestarted records that the event's workflow had to be started again
// (as run runID), and why.
func (s *Store) EventRestarted(ctx context.Context, id, reason, runID string) error {
	if _, err := s.pool.Exec(ctx, s.q.EventRestarted, id, reason, runID); err != nil {
		return fmt.Errorf("record restart: %w", err)
	}
	return nil
}

// EventFinish marks the event delivered or skipped and advances its
// correlation's cursor past it, in one transaction. Repeating it is harmless.
func (s *Store) EventFinish(ctx context.Context, id, correlationID string, sequence int64, state contract.State, at time.Time) error {
	var deliveredAt *time.Time
	if state == contract.StateDelivered {
		deliveredAt = &at
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(s.q.EventMarkFinal, id, state, deliveredAt)
		b.Queue(s.q.CorrelationAdvance, correlationID, sequence, state == contract.StateSkipped)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("mark event %s: %w", state, err)
	}
	return nil
}

// AttemptStart is what an attempt reads as it starts: the event's endpoint,
// the event's state before the attempt, and its dead letter's status and
// generation (empty and 0 when it has none).
type AttemptStart struct {
	Endpoint         Endpoint
	State            contract.State
	DeadLetterStatus string
	Generation       int32
}

// EventStartAttempt marks the event delivering and returns what the attempt
// needs (AttemptStart), unless the endpoint is disabled, or the event is
// final, or it is dead-lettered and no replay of its dead letter is claimed:
// then it changes nothing. ErrNotFound when the endpoint does not exist.
func (s *Store) EventStartAttempt(ctx context.Context, id, endpointID string) (AttemptStart, error) {
	var a AttemptStart
	e := &a.Endpoint
	err := translate(s.pool.QueryRow(ctx, s.q.EventStartAttempt, id, endpointID).Scan(
		&e.ID, &e.URL, &e.Secret, &e.Previous, &e.Disabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt, &a.State, &a.DeadLetterStatus, &a.Generation))
	if err != nil {
		return a, fmt.Errorf("start attempt: %w", err)
	}
	return a, nil
}

// EventDelivered records the delivering attempt, marks the event delivered
// and moves its correlation's cursor past it, in one transaction sent as one
// batch. Repeating it records the attempt again and changes nothing else.
func (s *Store) EventDelivered(ctx context.Context, id, correlationID string, sequence int64, a Attempt, at time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(s.q.AttemptInsert, id, a.Attempt, a.StartedAt, a.LatencyMS, a.StatusCode, a.Error, a.Outcome)
		b.Queue(s.q.EventMarkFinal, id, contract.StateDelivered, at)
		b.Queue(s.q.CorrelationAdvance, correlationID, sequence, false)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("mark event delivered: %w", err)
	}
	return nil
}

// EventMarkDeadLettered records the dead-lettered state.
func (s *Store) EventMarkDeadLettered(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, s.q.EventMarkDeadLettered, id); err != nil {
		return fmt.Errorf("mark event dead-lettered: %w", err)
	}
	return nil
}

// CorrelationNext is the sequence the correlation needs next (1 when new),
// as its sequencer last moved it.
func (s *Store) CorrelationNext(ctx context.Context, correlationID string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.CorrelationNext, correlationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("get correlation cursor: %w", err)
	}
	return n, nil
}

// CorrelationSkippedTail lists the sequences skipped since the
// correlation's last delivered event, in order (none for a correlation
// nothing has finished in).
func (s *Store) CorrelationSkippedTail(ctx context.Context, correlationID string) ([]int64, error) {
	var out []int64
	err := translate(s.pool.QueryRow(ctx, s.q.CorrelationSkippedTail, correlationID).Scan(&out))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("list skipped sequences: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
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
	State    contract.State
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
