// Package store is hookflow's access to its own Postgres tables: endpoints,
// the event ledger, delivery attempts, the correlations' cursors (as their
// sequencers moved them) and dead letters.
// Every query it runs is a named query from package schema.
package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/eventtypes"
	"github.com/hookflow/hookflow/internal/redact"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/schema"
)

// ErrNotFound is returned when the row asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrEndpointLimit is returned by EndpointCreate when the endpoints not
// deleted number the cap already (HOOKFLOW_MAX_ENDPOINTS).
var ErrEndpointLimit = errors.New("endpoint limit reached")

// ErrTooManySubscribers is returned by Route when more endpoints are
// subscribed to the event's type than the cap (HOOKFLOW_MAX_SUBSCRIBERS),
// and by EndpointCreate and EndpointUpdate when the endpoint's event_types
// would make some type's subscribers more than it: a *SubscribersError.
var ErrTooManySubscribers = errors.New("too many subscribers")

// SubscribersError refuses an endpoint's event_types: Others endpoints
// share the busiest type they match already, and the cap is Max.
type SubscribersError struct {
	Others, Max int
}

func (e *SubscribersError) Error() string {
	return fmt.Sprintf("%d other endpoints share a type these event_types match, and the cap is %d", e.Others, e.Max)
}

// Unwrap makes it ErrTooManySubscribers to errors.Is.
func (e *SubscribersError) Unwrap() error { return ErrTooManySubscribers }

// Caps bounds EndpointCreate: Endpoints the endpoints not deleted
// (HOOKFLOW_MAX_ENDPOINTS), Subscribers the endpoints one type may be
// routed to (HOOKFLOW_MAX_SUBSCRIBERS). Zero is no cap.
type Caps struct {
	Endpoints, Subscribers int
}

// ErrEventFinished is returned when a dead letter is to be written for an
// event the ledger has as delivered or skipped.
var ErrEventFinished = errors.New("event is finished")

// Store runs hookflow's queries on a pool.
type Store struct {
	pool *pgxpool.Pool
	q    queries
}

type queries struct {
	EndpointInsert              string
	EndpointCreateLock          string
	EndpointsCount              string
	EndpointsPatterns           string
	EndpointsOperationalCount   string
	EndpointGet                 string
	EndpointUpdate              string
	EndpointRotateSecret        string
	EndpointLockURL             string
	EndpointURLChangeInsert     string
	EndpointURLChangesList      string
	EndpointDisable             string
	EndpointsList               string
	EndpointsSubscribed         string
	EndpointRateReserve         string
	EndpointLeaseLock           string
	EndpointLeaseTake           string
	EndpointLeaseRelease        string
	EndpointRateSlotsReset      string
	EndpointDisableIfEnabled    string
	EndpointDisabledForShare    string
	EndpointDelete              string
	EndpointsDeletedOpen        string
	CircuitProbeClaim           string
	CircuitLateOutageDeadLetter string
	CircuitEnsure               string
	CircuitForUpdate            string
	CircuitSet                  string
	CircuitGet                  string
	CircuitReset                string
	CircuitsAutoReplayPending   string
	CircuitAutoReplayDone       string
	CircuitAutoReplayTurn       string
	CircuitWakeProgress         string
	CircuitsEventCatchUp        string
	CircuitsProbeReplayClaim    string
	CircuitsWakePending         string
	CircuitWakeDone             string
	DeliveringAt                string
	CircuitWindowAttempts       string
	EventInsertRouted           string
	EventGet                    string
	EventMarkStarted            string
	EventMarkStartedUnrouted    string
	EventsQueuedClaim           string
	LanesStuckHeadsClaim        string
	JITOff                      string
	EventSweepDeferred          string
	CorrelationSweepDeferred    string
	EventRestarted              string
	CorrelationLock             string
	EventLock                   string
	DeliveryStartAttempt        string
	DeliveryMarkFinal           string
	DeliveryStateForUpdate      string
	DeliveryMarkDeadLettered    string
	LaneAdvance                 string
	EventAggregate              string
	CorrelationAdvance          string
	CorrelationHighWater        string
	CorrelationLoad             string
	LanesLoad                   string
	CorrelationVoidCheck        string
	CorrelationVoidInsert       string
	LaneGet                     string
	AttemptInsert               string
	AttemptsList                string
	AttemptsLastByEvent         string
	AttemptsPage                string
	AttemptsSinceDeadLetter     string
	DeadLetterUpsert            string
	DeadLetterGeneration        string
	DeadLetterGet               string
	DeadLettersOfEvent          string
	DeadLetterList              string
	DeadLetterReplayPage        string
	DeadLetterMarkReplayed      string
	DeadLetterMarkSkipped       string
	DeadLetterReopen            string
	DeadLetterEndDeleted        string
	StatsSummary                string
	StatsBlockedCorrelations    string
	EndpointHealth              string
	APIKeyInsert                string
	APIKeyByHash                string
	APIKeyList                  string
	APIKeyRevoke                string
	CleanerLock                 string
	CleanerUnlock               string
	EventsPrunePayloads         string
	AttemptsPrune               string
	EventsPruneKeys             string
	CleanerRunRecord            string
	CleanerRunLast              string
	OperationalSequenceNext     string
	OperationalSubscribers      string
	EventTypeGet                string
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
	// Settings are its delivery settings; each zero is the server's.
	Settings  Settings
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Settings are an endpoint's delivery settings (issue 24). The API
// validates them (api/endpoint_settings.go) and the table's constraints
// hold the bounds again. Everything that reads an endpoint for a delivery
// reads them here, in the endpoint's row: DeliveryStartAttempt returns
// them to the attempt, and settings added later (a circuit breaker's
// thresholds) belong beside them.
type Settings struct {
	// Headers are sent with every attempt. Their values are secrets, kept
	// in this row alone: nothing copies them into the ledger's other
	// tables, a log, a span or a workflow's input.
	Headers map[string]string
	// RecoveryWindow and Timeout are copied into each delivery when an
	// event is routed (Delivery.RecoveryWindowMS, TimeoutMS); zero is the
	// server's (HOOKFLOW_RECOVERY_WINDOW, HOOKFLOW_DELIVERY_TIMEOUT).
	RecoveryWindow time.Duration
	Timeout        time.Duration
	// RateLimit is deliveries per second across all the endpoint's lanes;
	// zero is unlimited.
	RateLimit float64
	// CircuitFailureThreshold is how many consecutive retryable failures
	// open the endpoint's circuit; zero is DefaultCircuitFailureThreshold.
	CircuitFailureThreshold int
	// AutoReplay: when the circuit closes, the dead letters its outage
	// caused are replayed (CircuitsAutoReplayPending).
	AutoReplay bool
	// DisableAfter is how long the endpoint may fail without an answer
	// before it is disabled; zero is DefaultDisableAfter.
	DisableAfter time.Duration
	// CircuitFailureRate is the percentage of retryable failures among the
	// endpoint's attempts of the last CircuitWindow that opens its circuit,
	// once that window holds CircuitMinAttempts; each zero is its default.
	CircuitFailureRate int
	CircuitWindow      time.Duration
	CircuitMinAttempts int
	// MaxInFlight caps the endpoint's attempts in flight at once, across
	// every worker; zero is DefaultMaxInFlight.
	MaxInFlight int
	// URLPathPublic says the URL's path holds no secret, so that it is
	// shown where the URL is redacted (redact.URL); false, the default,
	// redacts it, as Slack- and Discord-style URLs need. A change of URL
	// sets it back to false unless the same change sets it.
	URLPathPublic bool
}

// Defaults of the circuit breaker's settings.
const (
	DefaultCircuitFailureThreshold = 5
	DefaultDisableAfter            = 120 * time.Hour
	DefaultCircuitFailureRate      = 50
	DefaultCircuitWindow           = time.Minute
	DefaultCircuitMinAttempts      = 20
	// DefaultMaxInFlight is an endpoint's cap on attempts in flight: far
	// above what a healthy receiver needs (an attempt of 50 ms at 100 at
	// once is 2,000 deliveries/s), low enough that a receiver that holds
	// every request open for a minute cannot take every worker's slots.
	DefaultMaxInFlight = 100
)

// The settings in force: the endpoint's, or (zero) the default. A setting
// is never negative: the API and the table's constraints refuse it.

// FailureThreshold is the consecutive failures that open the circuit.
func (st Settings) FailureThreshold() int {
	return cmp.Or(st.CircuitFailureThreshold, DefaultCircuitFailureThreshold)
}

// DisableAfterOrDefault is the auto-disable delay.
func (st Settings) DisableAfterOrDefault() time.Duration {
	return cmp.Or(st.DisableAfter, DefaultDisableAfter)
}

// FailureRate is the failure rate that opens the circuit, in percent.
func (st Settings) FailureRate() int {
	return cmp.Or(st.CircuitFailureRate, DefaultCircuitFailureRate)
}

// RateWindow is the window the failure rate is counted over.
func (st Settings) RateWindow() time.Duration {
	return cmp.Or(st.CircuitWindow, DefaultCircuitWindow)
}

// MinAttempts is how many attempts the window must hold before its
// failure rate counts.
func (st Settings) MinAttempts() int {
	return cmp.Or(st.CircuitMinAttempts, DefaultCircuitMinAttempts)
}

// InFlightCap is how many attempts may be in flight to the endpoint at
// once.
func (st Settings) InFlightCap() int {
	return cmp.Or(st.MaxInFlight, DefaultMaxInFlight)
}

// settingsColumns are the destinations of the settings columns.
type settingsColumns struct {
	headers         map[string]string
	window, timeout *int64
	rateLimit       *float64
	threshold       *int32
	autoReplay      bool
	disableAfter    *int64
	failureRate     *int32
	circuitWindow   *int64
	minAttempts     *int32
	maxInFlight     *int32
	urlPathPublic   bool
}

func (c *settingsColumns) dest() []any {
	return []any{&c.headers, &c.window, &c.timeout, &c.rateLimit, &c.threshold, &c.autoReplay, &c.disableAfter,
		&c.failureRate, &c.circuitWindow, &c.minAttempts, &c.maxInFlight, &c.urlPathPublic}
}

func (c *settingsColumns) settings() Settings {
	st := Settings{Headers: c.headers,
		RecoveryWindow: millis(c.window), Timeout: millis(c.timeout), RateLimit: orZero(c.rateLimit),
		CircuitFailureThreshold: int(orZero(c.threshold)), AutoReplay: c.autoReplay, DisableAfter: millis(c.disableAfter),
		CircuitFailureRate: int(orZero(c.failureRate)), CircuitWindow: millis(c.circuitWindow), CircuitMinAttempts: int(orZero(c.minAttempts)),
		MaxInFlight: int(orZero(c.maxInFlight)), URLPathPublic: c.urlPathPublic}
	if len(st.Headers) == 0 {
		st.Headers = nil
	}
	return st
}

// settingsArgs are the columns' values of st: NULL for each zero.
func settingsArgs(st Settings) []any {
	var headers any
	if st.Headers != nil {
		headers = st.Headers
	}
	return []any{headers, orNull(st.RecoveryWindow.Milliseconds()), orNull(st.Timeout.Milliseconds()), orNull(st.RateLimit),
		orNull(int32(st.CircuitFailureThreshold)), st.AutoReplay, orNull(st.DisableAfter.Milliseconds()),
		orNull(int32(st.CircuitFailureRate)), orNull(st.CircuitWindow.Milliseconds()), orNull(int32(st.CircuitMinAttempts)),
		orNull(int32(st.MaxInFlight)), st.URLPathPublic}
}

// orZero is a nullable column's value, zero for NULL.
func orZero[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

// millis is a nullable column of milliseconds as a duration, zero for
// NULL.
func millis(v *int64) time.Duration { return time.Duration(orZero(v)) * time.Millisecond }

// orNull is v as a column's value, NULL for zero.
func orNull[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
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
	var sc settingsColumns
	err := row.Scan(append([]any{&e.ID, &e.URL, &e.Secret, &e.Previous, &e.Disabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt, &e.EventTypes}, sc.dest()...)...)
	e.Settings = sc.settings()
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
// every type; the caller has checked them with eventtypes.Normalize), with
// the server's delivery settings, and no cap on the endpoints.
func (s *Store) EndpointInsert(ctx context.Context, id, url, secret string, eventTypes []string) (Endpoint, error) {
	return s.EndpointCreate(ctx, Endpoint{ID: id, URL: url, Secret: secret, EventTypes: eventTypes}, Caps{})
}

// EndpointCreate stores e (its ID, URL, Secret, EventTypes and Settings,
// which the caller has checked) as a new endpoint, unless caps.Endpoints
// endpoints (not deleted) exist already (ErrEndpointLimit, wrapped), or
// its EventTypes would route some type to more than caps.Subscribers
// endpoints (a *SubscribersError, wrapped). Creations, and changes of
// event_types, are serialized (EndpointCreateLock), so concurrent ones
// never pass a cap together.
func (s *Store) EndpointCreate(ctx context.Context, e Endpoint, caps Caps) (Endpoint, error) {
	args := append([]any{e.ID, e.URL, e.Secret, e.EventTypes}, settingsArgs(e.Settings)...)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if caps.Endpoints > 0 || caps.Subscribers > 0 {
			if _, err := tx.Exec(ctx, s.q.EndpointCreateLock); err != nil {
				return err
			}
		}
		if caps.Endpoints > 0 {
			var n int
			if err := tx.QueryRow(ctx, s.q.EndpointsCount).Scan(&n); err != nil {
				return err
			}
			if n >= caps.Endpoints {
				return ErrEndpointLimit
			}
		}
		if err := s.checkSubscribers(ctx, tx, "", e.EventTypes, caps.Subscribers); err != nil {
			return err
		}
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, s.q.EndpointInsert, args...))
		return err
	})
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
	// Headers, RecoveryWindow, Timeout and RateLimit replace the
	// endpoint's setting of that name: a pointer to the zero value (a nil
	// map) puts the server's back.
	Headers        *map[string]string
	RecoveryWindow *time.Duration
	Timeout        *time.Duration
	RateLimit      *float64
	// CircuitFailureThreshold, AutoReplay, DisableAfter, CircuitFailureRate,
	// CircuitWindow and CircuitMinAttempts likewise (zero: the default).
	CircuitFailureThreshold *int
	AutoReplay              *bool
	DisableAfter            *time.Duration
	CircuitFailureRate      *int
	CircuitWindow           *time.Duration
	CircuitMinAttempts      *int
	// MaxInFlight likewise (zero: DefaultMaxInFlight).
	MaxInFlight *int
	// URLPathPublic likewise (false: the path is redacted). A change of
	// URL that leaves it out sets it back to false.
	URLPathPublic *bool
	// By is who makes the change: a change of URL is recorded with it
	// (EndpointURLChanges).
	By Actor
	// MaxSubscribers, when positive, refuses EventTypes that would route
	// some type to more endpoints (HOOKFLOW_MAX_SUBSCRIBERS), as
	// EndpointCreate does.
	MaxSubscribers int
}

// Actor names who changed something: an API key's id and name (the
// bootstrap token's are both "bootstrap").
type Actor struct {
	ID   string
	Name string
}

// ErrHeadersOrigin is EndpointUpdate's refusal of a change of URL to
// another origin (scheme, host or port) that does not send the endpoint's
// custom headers again: their values are secrets meant for the origin they
// were set for, and would otherwise go to the new one.
var ErrHeadersOrigin = errors.New("a change of URL to another origin must send headers again")

// EndpointUpdate makes the change; ErrNotFound when the endpoint does not
// exist. A change of the rate limit gives up the slots reserved under the
// old one and asks the wake sweep to wake the endpoint's lanes, in the
// same transaction (EndpointRateSlotsReset). A change of URL is judged
// against the endpoint's row, locked: to another origin, it is refused
// with ErrHeadersOrigin when the endpoint has custom headers and the
// change does not replace them; it sets URLPathPublic back to false unless
// it sets it; and it is recorded (EndpointURLChanges), in the same
// transaction.
func (s *Store) EndpointUpdate(ctx context.Context, id string, ch EndpointChange) (Endpoint, error) {
	var e Endpoint
	var err error
	capped := ch.EventTypes != nil && ch.MaxSubscribers > 0
	if ch.URL == nil && ch.RateLimit == nil && !capped {
		e, err = scanEndpoint(s.pool.QueryRow(ctx, s.q.EndpointUpdate, endpointUpdateArgs(id, ch)...))
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if capped {
				if _, err := tx.Exec(ctx, s.q.EndpointCreateLock); err != nil {
					return err
				}
				if err := s.checkSubscribers(ctx, tx, id, *ch.EventTypes, ch.MaxSubscribers); err != nil {
					return err
				}
			}
			record := func() error { return nil }
			if ch.URL != nil {
				if record, err = s.endpointURLChange(ctx, tx, id, &ch); err != nil {
					return err
				}
			}
			// A new rate holds at once for the heads already waiting their
			// turn (EndpointRateSlotsReset), committed with the rate itself.
			if ch.RateLimit != nil {
				if _, err := tx.Exec(ctx, s.q.EndpointRateSlotsReset, id, orNull(*ch.RateLimit)); err != nil {
					return err
				}
			}
			if e, err = scanEndpoint(tx.QueryRow(ctx, s.q.EndpointUpdate, endpointUpdateArgs(id, ch)...)); err != nil {
				return err
			}
			return record()
		})
	}
	if err != nil {
		return e, fmt.Errorf("update endpoint: %w", err)
	}
	return e, nil
}

// checkSubscribers refuses patterns (nil: every type) for endpoint id ("" for
// a new one) when some type they match is matched by max endpoints other
// than id already: a *SubscribersError. The count is exact
// (eventtypes.MostShared), of producers' types only (hookflow's operational
// types have their own cap, EndpointsOperationalCount), read in the caller's transaction, which holds
// EndpointCreateLock so that no other create or change of event_types
// counts at the same time. max 0 is no cap.
func (s *Store) checkSubscribers(ctx context.Context, tx pgx.Tx, id string, patterns []string, max int) error {
	if max <= 0 {
		return nil
	}
	rows, err := tx.Query(ctx, s.q.EndpointsPatterns, id)
	if err != nil {
		return err
	}
	others, err := pgx.CollectRows(rows, pgx.RowTo[[]string])
	if err != nil {
		return err
	}
	if n := eventtypes.MostShared(patterns, others, contract.OperationalPrefix); n >= max {
		return &SubscribersError{Others: n, Max: max}
	}
	return nil
}

func endpointUpdateArgs(id string, ch EndpointChange) []any {
	var eventTypes []string
	if ch.EventTypes != nil {
		eventTypes = *ch.EventTypes
	}
	st, set := ch.replaced()
	return append([]any{id, ch.URL, ch.Disabled, ch.DisabledReason, ch.EventTypes != nil, eventTypes, set}, settingsArgs(st)...)
}

// endpointURLChange locks the endpoint's row and judges the change of URL
// ch makes against it (see EndpointUpdate), setting ch.URLPathPublic back
// to false when the URL changes and ch leaves it out. It returns what
// records the change, to run once the update is made.
func (s *Store) endpointURLChange(ctx context.Context, tx pgx.Tx, id string, ch *EndpointChange) (func() error, error) {
	var old string
	var headers map[string]string
	var oldPublic bool
	if err := tx.QueryRow(ctx, s.q.EndpointLockURL, id).Scan(&old, &headers, &oldPublic); err != nil {
		return nil, translate(err)
	}
	if *ch.URL == old {
		return func() error { return nil }, nil
	}
	if len(headers) > 0 && ch.Headers == nil && !SameOrigin(old, *ch.URL) {
		return nil, ErrHeadersOrigin
	}
	if ch.URLPathPublic == nil {
		ch.URLPathPublic = new(false)
	}
	by, to, public := ch.By, *ch.URL, *ch.URLPathPublic
	return func() error {
		_, err := tx.Exec(ctx, s.q.EndpointURLChangeInsert, id, by.ID, by.Name,
			redact.RawURL(old, oldPublic), redact.RawURL(to, public), ch.Headers != nil)
		return err
	}, nil
}

// SameOrigin reports whether two endpoint URLs have one origin: the same
// scheme, host (without case, and without a trailing dot) and port (the
// scheme's default when none is written). One that does not parse has no
// origin in common with anything.
func SameOrigin(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	origin := func(u *url.URL) [3]string {
		scheme := strings.ToLower(u.Scheme)
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[scheme]
		}
		return [3]string{scheme, strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port}
	}
	return origin(ua) == origin(ub)
}

// URLChange is a change of an endpoint's URL, as EndpointURLChanges
// returns it: its URLs redacted as a read-only key is shown them.
type URLChange struct {
	ID              int64
	At              time.Time
	By              Actor
	OldURL, NewURL  string
	HeadersReplaced bool
}

// EndpointURLChanges returns up to limit of the endpoint's URL changes,
// newest first; none is no error.
func (s *Store) EndpointURLChanges(ctx context.Context, endpointID string, limit int) ([]URLChange, error) {
	rows, err := s.pool.Query(ctx, s.q.EndpointURLChangesList, endpointID, limit)
	if err != nil {
		return nil, fmt.Errorf("list endpoint url changes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (URLChange, error) {
		var c URLChange
		err := r.Scan(&c.ID, &c.At, &c.By.ID, &c.By.Name, &c.OldURL, &c.NewURL, &c.HeadersReplaced)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list endpoint url changes: %w", err)
	}
	return out, nil
}

// Settings are the settings the change replaces, each zero (the server's)
// where it replaces none: a new endpoint's.
func (ch EndpointChange) Settings() Settings {
	st, _ := ch.replaced()
	return st
}

// replaced are the settings the change replaces, and the bit of each in
// the set that EndpointUpdate's query reads.
func (ch EndpointChange) replaced() (Settings, int32) {
	var st Settings
	set := replace(&st.Headers, ch.Headers, 1) | replace(&st.RecoveryWindow, ch.RecoveryWindow, 2) |
		replace(&st.Timeout, ch.Timeout, 4) | replace(&st.RateLimit, ch.RateLimit, 8) |
		replace(&st.CircuitFailureThreshold, ch.CircuitFailureThreshold, 16) | replace(&st.AutoReplay, ch.AutoReplay, 32) |
		replace(&st.DisableAfter, ch.DisableAfter, 64) | replace(&st.CircuitFailureRate, ch.CircuitFailureRate, 128) |
		replace(&st.CircuitWindow, ch.CircuitWindow, 256) | replace(&st.CircuitMinAttempts, ch.CircuitMinAttempts, 512) |
		replace(&st.MaxInFlight, ch.MaxInFlight, 1024) | replace(&st.URLPathPublic, ch.URLPathPublic, 2048)
	return st, set
}

// replace sets *dst to *v and answers bit, or leaves it and answers 0 when
// v is nil.
func replace[T any](dst, v *T, bit int32) int32 {
	if v == nil {
		return 0
	}
	*dst = *v
	return bit
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

// EndpointsSubscribed returns the ids of the endpoints whose event types
// match eventType (as eventtypes.Matches has it), disabled ones included (a
// disabled endpoint is paused: its events wait in its lanes), in id order,
// at most limit of them; none is no error.
func (s *Store) EndpointsSubscribed(ctx context.Context, eventType string, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.q.EndpointsSubscribed, eventType, limit)
	if err != nil {
		return nil, fmt.Errorf("list subscribed endpoints: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list subscribed endpoints: %w", err)
	}
	return ids, nil
}

// Route names the endpoints an event goes to when it is accepted: the one
// it addresses (e.EndpointID, returned as addressed; ErrNotFound, wrapped,
// when there is none such), or else every endpoint subscribed to its type,
// disabled ones included (EndpointsSubscribed), in id order; none is no
// error. More than maxSubscribers of them is ErrTooManySubscribers,
// wrapped: the event is to be refused, not accepted with lanes past what
// its workflow's inputs are sized for (contract.MaxSubscribersCeiling).
// Only the ids are read, and at most maxSubscribers+1 of them.
func (s *Store) Route(ctx context.Context, e intake.Event, maxSubscribers int) (addressed *Endpoint, endpoints []string, err error) {
	if e.EndpointID != "" {
		ep, err := s.EndpointGet(ctx, e.EndpointID)
		if err != nil {
			return nil, nil, err
		}
		return &ep, []string{ep.ID}, nil
	}
	endpoints, err = s.EndpointsSubscribed(ctx, e.Type, maxSubscribers+1)
	if err == nil && len(endpoints) > maxSubscribers {
		return nil, nil, fmt.Errorf("route %s: more than %d endpoints subscribed to %q: %w", e.ID, maxSubscribers, e.Type, ErrTooManySubscribers)
	}
	return nil, endpoints, err
}

// EndpointDelete deletes the endpoint for good, as by (the key's name): it
// is stamped and disabled, and no longer found, listed or routed to.
// ErrNotFound when there is no such endpoint, or it is deleted already.
func (s *Store) EndpointDelete(ctx context.Context, id, by string) error {
	var got string
	if err := translate(s.pool.QueryRow(ctx, s.q.EndpointDelete, id, by).Scan(&got)); err != nil {
		return fmt.Errorf("delete endpoint: %w", err)
	}
	return nil
}

// DeletedEndpoint is a deleted endpoint, and who deleted it.
type DeletedEndpoint struct {
	ID        string
	DeletedBy string
}

// EndpointsDeletedOpen returns up to limit deleted endpoints that still
// have open dead letters, in id order.
func (s *Store) EndpointsDeletedOpen(ctx context.Context, limit int) ([]DeletedEndpoint, error) {
	rows, err := s.pool.Query(ctx, s.q.EndpointsDeletedOpen, limit)
	if err != nil {
		return nil, fmt.Errorf("list deleted endpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeletedEndpoint, error) {
		var d DeletedEndpoint
		return d, r.Scan(&d.ID, &d.DeletedBy)
	})
	if err != nil {
		return nil, fmt.Errorf("list deleted endpoints: %w", err)
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

// Event is one accepted event in the ledger. The embedded intake.Event's
// EndpointID is not stored: the event's routing is its deliveries.
type Event struct {
	intake.Event
	// Endpoints are the endpoints it was routed to at acceptance, sorted;
	// Deliveries are its deliveries to them, in the same order.
	Endpoints  []string
	Deliveries []Delivery
	// State is the aggregate of its deliveries' (see EventMarkStarted): queued
	// until its workflow starts, then dead_lettered if any delivery is, else
	// delivering if any is, else waiting if any is, else delivered if any is
	// or there are none, else skipped.
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

// eventColumns are the destinations of an event row as the event queries
// return it (events_routed's columns), after any leading ones; finish turns
// the deliveries' JSON into e's Deliveries and Endpoints.
func eventColumns(e *Event, deliveries *[]byte) []any {
	return []any{&e.ID, &e.CorrelationID, &e.Sequence, &e.Type, &e.Data, &e.PayloadHash, &e.State, &e.AcceptedAt,
		&e.ReleasedAt, &e.DeliveredAt, &e.UpdatedAt, &e.RunID, &e.Restarts, &e.RestartedAt, &e.RestartReason, deliveries}
}

func (e *Event) decodeDeliveries(raw []byte) error {
	e.Deliveries, e.Endpoints = nil, nil
	if err := json.Unmarshal(raw, &e.Deliveries); err != nil {
		return fmt.Errorf("decode deliveries: %w", err)
	}
	if len(e.Deliveries) == 0 {
		e.Deliveries = nil
		return nil
	}
	e.Endpoints = make([]string, len(e.Deliveries))
	for i := range e.Deliveries {
		e.Deliveries[i].EventID = e.ID
		e.Endpoints[i] = e.Deliveries[i].EndpointID
	}
	return nil
}

func scanEvent(row pgx.Row) (Event, error) {
	var e Event
	var raw []byte
	if err := row.Scan(eventColumns(&e, &raw)...); err != nil {
		return e, translate(err)
	}
	return e, e.decodeDeliveries(raw)
}

func collectEvents(rows pgx.Rows, err error) ([]Event, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) { return scanEvent(r) })
}

// EventInsertRouted stores e as queued with one delivery per endpoint
// (state waiting), all in one statement; endpoints may be empty, and a
// repeated endpoint counts once. e.EndpointID is not stored (the routing is
// the deliveries). It reports inserted=false, and no error, when the id or
// the (correlation, sequence) pair is already taken, or the sequence is
// behind the correlation's cursor. The returned Event has Endpoints (sorted)
// and Deliveries.
func (s *Store) EventInsertRouted(ctx context.Context, e intake.Event, endpoints []string) (Event, bool, error) {
	if endpoints == nil {
		endpoints = []string{} // a NULL array would route to nothing just the same, but say so
	}
	got, err := scanEvent(s.pool.QueryRow(ctx, s.q.EventInsertRouted, e.ID, e.CorrelationID, e.Sequence, e.Type, e.Data, e.PayloadHash, endpoints))
	if errors.Is(err, ErrNotFound) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("insert event: %w", err)
	}
	return got, true, nil
}

// EventGet returns the event with its deliveries (sorted by endpoint), or
// ErrNotFound.
func (s *Store) EventGet(ctx context.Context, id string) (Event, error) {
	e, err := scanEvent(s.pool.QueryRow(ctx, s.q.EventGet, id))
	if err != nil {
		return e, fmt.Errorf("get event: %w", err)
	}
	return e, nil
}

// EventMarkStarted records that the event's workflow exists (queued →
// waiting), and its run when this call started it (runID "" otherwise). An
// event with no deliveries goes to delivered instead and moves its
// correlation's cursor, in one transaction under the same locks as a
// delivery's finish. It changes nothing for an event past queued, or one
// that does not exist.
func (s *Store) EventMarkStarted(ctx context.Context, id, runID string) error {
	var (
		corr   string
		state  contract.State
		routed bool
	)
	err := translate(s.pool.QueryRow(ctx, s.q.EventMarkStarted, id, runID).Scan(&corr, &state, &routed))
	if errors.Is(err, ErrNotFound) || err == nil && (routed || state != contract.StateQueued) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark event started: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(s.q.CorrelationLock, corr)
		b.Queue(s.q.EventLock, id)
		b.Queue(s.q.EventMarkStartedUnrouted, id, runID)
		b.Queue(s.q.CorrelationAdvance, corr)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("mark unrouted event started: %w", err)
	}
	return nil
}

// EventsQueuedClaim takes up to limit events queued for longer than lease
// that no other sweep took within lease, and returns them with their
// deliveries. The claim is committed when it returns: the caller starts
// their workflows with no transaction open.
func (s *Store) EventsQueuedClaim(ctx context.Context, limit int, lease time.Duration) ([]Event, error) {
	out, err := collectEvents(s.pool.Query(ctx, s.q.EventsQueuedClaim, limit, lease.Seconds()))
	if err != nil {
		return nil, fmt.Errorf("claim queued events: %w", err)
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

// CorrelationSweepDeferred puts a correlation whose heads the sweep could
// not look at at the back of LanesStuckHeadsClaim's line.
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

// CorrelationHighWater is the highest sequence accepted for the correlation.
func (s *Store) CorrelationHighWater(ctx context.Context, correlationID string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.CorrelationHighWater, correlationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("get correlation high-water mark: %w", err)
	}
	return n, nil
}
