package client

import (
	"encoding/json"
	"time"
)

// State is where an event stands.
type State string

// The states of an event.
const (
	// StateQueued: stored; its workflow is not started yet (Temporal was
	// unavailable), a sweep starts it.
	StateQueued State = "queued"
	// StateWaiting: its workflow waits for the events before it.
	StateWaiting State = "waiting"
	// StateDelivering: released; being delivered and retried.
	StateDelivering State = "delivering"
	// StateDelivered: the receiver answered 2xx.
	StateDelivered State = "delivered"
	// StateDeadLettered: not delivered within the recovery window, or
	// refused for good; it waits for an operator's replay or skip.
	StateDeadLettered State = "dead_lettered"
	// StateSkipped: an operator gave it up; its successors went on.
	StateSkipped State = "skipped"
)

// Scope is what an API key may do.
type Scope string

// The scopes of API keys.
const (
	// ScopeEventsWrite: EventCreate.
	ScopeEventsWrite Scope = "events:write"
	// ScopeEventsRead: reading events, correlations, endpoints, dead
	// letters and stats.
	ScopeEventsRead Scope = "events:read"
	// ScopeEndpointsWrite: creating, updating and rotating endpoints.
	ScopeEndpointsWrite Scope = "endpoints:write"
	// ScopeDeadLettersWrite: replay and skip, single and batch.
	ScopeDeadLettersWrite Scope = "dead-letters:write"
	// ScopeAdmin: everything, API keys included.
	ScopeAdmin Scope = "admin"
)

// The statuses of a dead letter, and the DeadLetterFilter status that lists
// them all.
const (
	DeadLetterOpen     = "open"
	DeadLetterReplayed = "replayed"
	DeadLetterSkipped  = "skipped"
	DeadLetterAll      = "all"
)

// Health is the answer of Healthz.
type Health struct {
	Status string `json:"status"`
}

// Readiness is the answer of Readyz: Status is "ready", "degraded" (only
// Temporal is down: events are still accepted, as queued) or "not_ready"
// (Postgres is down); Checks maps "postgres" and "temporal" to "ok" or
// "unavailable".
type Readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// EndpointCreateRequest registers a receiver URL. An endpoint is created
// enabled.
type EndpointCreateRequest struct {
	URL string `json:"url"`
	// URLPathPublic says the URL's path holds no secret, so that read-only
	// keys and errors show it; false (the default) shows it as
	// /[redacted], as Slack- and Discord-style URLs need.
	URLPathPublic bool `json:"url_path_public,omitempty"`
	// EventTypes are the event types it is sent; nil for every type. Each
	// is an exact type, "prefix.*" for every type that starts with
	// "prefix." ("order.*": order.created and order.a.b, not order), or
	// "*" for every type; at most 100, repeats dropped.
	EventTypes []string `json:"event_types,omitempty"`
	// Secret is a signing secret brought along ("whsec_" and the base64 of
	// 24 to 64 bytes); empty for one hookflow makes.
	Secret string `json:"secret,omitempty"`
	// Headers are custom headers sent with every delivery (a receiver's
	// API key): not webhook-*, content-type, host, traceparent or a
	// hop-by-hop header. Their values are secrets: answers show them as
	// "********".
	Headers map[string]string `json:"headers,omitempty"`
	// RecoveryWindow is how long a delivery is retried before it is
	// dead-lettered (1s to 72h); empty for the server's.
	RecoveryWindow Duration `json:"recovery_window,omitempty"`
	// Timeout is one attempt's HTTP timeout (1s to 60s); empty for the
	// server's.
	Timeout Duration `json:"timeout,omitempty"`
	// RateLimit is deliveries per second across all its lanes; 0 for
	// unlimited.
	RateLimit Rate `json:"rate_limit,omitempty"`
	// CircuitFailureThreshold is how many consecutive retryable failures
	// open its circuit breaker (1 to 1000); 0 for the default (5).
	CircuitFailureThreshold Threshold `json:"circuit_failure_threshold,omitempty"`
	// AutoReplay replays the dead letters of an outage, each lane in
	// order, once its circuit closes.
	AutoReplay bool `json:"auto_replay,omitempty"`
	// DisableAfter is how long it may fail before hookflow disables it
	// (1m to 2160h); empty for the default (120h).
	DisableAfter Duration `json:"disable_after,omitempty"`
	// CircuitFailureRate is the percentage of retryable failures among its
	// attempts of the last CircuitWindow that opens its circuit breaker
	// too (1 to 100), once the window holds CircuitMinAttempts (1 to
	// 10000); CircuitWindow is 10s to 1h. Each zero (empty) for the
	// default: 50 percent over 60s, at least 20 attempts.
	CircuitFailureRate Threshold `json:"circuit_failure_rate,omitempty"`
	CircuitWindow      Duration  `json:"circuit_window,omitempty"`
	CircuitMinAttempts Threshold `json:"circuit_min_attempts,omitempty"`
	// MaxInFlight caps its attempts in flight at once, across all workers
	// (1 to 10000): a slow receiver then holds at most that many worker
	// slots. 0 for the default (100).
	MaxInFlight Threshold `json:"max_in_flight,omitempty"`
}

// Threshold is one of an endpoint's whole-number settings: its circuit
// breaker's consecutive failures, failure rate in percent and window's
// minimum of attempts, and its cap on attempts in flight. Zero is sent as
// null: the default.
type Threshold int

// MarshalJSON sends the zero Threshold as null.
func (n Threshold) MarshalJSON() ([]byte, error) {
	if n == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(int(n))
}

// Duration is a Go duration as the API takes it ("30s", "5m", "72h"). The
// empty one is sent as null: the server's.
type Duration string

// DurationOf is d as the API takes it.
func DurationOf(d time.Duration) Duration { return Duration(d.String()) }

// MarshalJSON sends the empty Duration as null.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(d))
}

// Rate is a rate limit in deliveries per second. Zero is sent as null: no
// limit.
type Rate float64

// MarshalJSON sends the zero Rate as null.
func (r Rate) MarshalJSON() ([]byte, error) {
	if r == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(float64(r))
}

// EndpointUpdateRequest changes an endpoint; nil fields stay as they are,
// and at least one must be set.
type EndpointUpdateRequest struct {
	// URL re-points it. To another origin (scheme, host or port) while it
	// has custom headers, Headers must be sent too (the values for the new
	// receiver, or a pointer to nil for none), or the API answers 422
	// naming headers. A new URL's path is not public unless URLPathPublic
	// says so in the same request.
	URL      *string `json:"url,omitempty"`
	Disabled *bool   `json:"disabled,omitempty"`
	// URLPathPublic replaces whether its URL's path holds no secret.
	URLPathPublic *bool `json:"url_path_public,omitempty"`
	// EventTypes replaces its event types (as EndpointCreateRequest has
	// them); a pointer to a nil slice sends null: every type again.
	EventTypes *[]string `json:"event_types,omitempty"`
	// Headers replaces its custom headers whole; a pointer to a nil map
	// removes them all.
	Headers *map[string]string `json:"headers,omitempty"`
	// RecoveryWindow, Timeout and RateLimit replace its settings; a
	// pointer to the empty value puts the server's back (no limit).
	RecoveryWindow *Duration `json:"recovery_window,omitempty"`
	Timeout        *Duration `json:"timeout,omitempty"`
	RateLimit      *Rate     `json:"rate_limit,omitempty"`
	// CircuitFailureThreshold, AutoReplay, DisableAfter and the failure
	// rate's CircuitFailureRate, CircuitWindow and CircuitMinAttempts
	// replace its circuit breaker's settings; a pointer to the zero value
	// puts the default back.
	CircuitFailureThreshold *Threshold `json:"circuit_failure_threshold,omitempty"`
	AutoReplay              *bool      `json:"auto_replay,omitempty"`
	DisableAfter            *Duration  `json:"disable_after,omitempty"`
	CircuitFailureRate      *Threshold `json:"circuit_failure_rate,omitempty"`
	CircuitWindow           *Duration  `json:"circuit_window,omitempty"`
	CircuitMinAttempts      *Threshold `json:"circuit_min_attempts,omitempty"`
	// MaxInFlight replaces its cap on attempts in flight; a pointer to 0
	// puts the default (100) back.
	MaxInFlight *Threshold `json:"max_in_flight,omitempty"`
}

// Endpoint is a registered receiver URL.
type Endpoint struct {
	ID string `json:"id"`
	// URL is whole for keys with endpoints:write or admin; for others it
	// has no query, fragment or userinfo, and its path is /[redacted]
	// unless URLPathPublic.
	URL           string `json:"url"`
	URLPathPublic bool   `json:"url_path_public"`
	Disabled      bool   `json:"disabled"`
	// DisabledReason says why hookflow disabled it (a 410 from the
	// receiver); empty when it is enabled or an operator disabled it.
	DisabledReason string `json:"disabled_reason,omitempty"`
	// EventTypes are the patterns of the event types it is sent; nil when
	// it is sent every type.
	EventTypes []string `json:"event_types,omitempty"`
	// Headers are its custom headers' names, each value "********".
	Headers map[string]string `json:"headers,omitempty"`
	// RecoveryWindow, Timeout and RateLimit are its delivery settings;
	// empty (0) where it has the server's (no limit).
	RecoveryWindow string  `json:"recovery_window,omitempty"`
	Timeout        string  `json:"timeout,omitempty"`
	RateLimit      float64 `json:"rate_limit,omitempty"`
	// CircuitFailureThreshold, DisableAfter, CircuitFailureRate,
	// CircuitWindow and CircuitMinAttempts are its circuit breaker's
	// settings, empty (0) where it has the defaults (5, 120h, 50, 60s,
	// 20); AutoReplay whether an outage's dead letters are replayed when
	// it closes.
	CircuitFailureThreshold int    `json:"circuit_failure_threshold,omitempty"`
	AutoReplay              bool   `json:"auto_replay,omitempty"`
	DisableAfter            string `json:"disable_after,omitempty"`
	CircuitFailureRate      int    `json:"circuit_failure_rate,omitempty"`
	CircuitWindow           string `json:"circuit_window,omitempty"`
	CircuitMinAttempts      int    `json:"circuit_min_attempts,omitempty"`
	// MaxInFlight is its cap on attempts in flight at once, across all
	// workers: the one set, or the default (100).
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// PreviousSecretExpiresAt is when the secret replaced by the last
	// rotation stops signing; zero when none still signs.
	PreviousSecretExpiresAt time.Time `json:"previous_secret_expires_at,omitzero"`
	// ResumedDeadLetters, on the answer of the EndpointUpdate that enabled
	// it, counts the dead letters its being disabled caused that were
	// replayed, each lane in sequence order.
	ResumedDeadLetters int       `json:"resumed_dead_letters,omitempty"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

// URLChange is a change of an endpoint's URL, as EndpointURLChanges lists
// it: who (the API key's name and id) and when, and the URLs before and
// after, as a read-only key was shown them (no query, fragment or
// userinfo; the path /[redacted] unless it was public).
type URLChange struct {
	ChangedAt      time.Time `json:"changed_at"`
	ChangedBy      string    `json:"changed_by"`
	ChangedByKeyID string    `json:"changed_by_key_id"`
	OldURL         string    `json:"old_url"`
	NewURL         string    `json:"new_url"`
	// HeadersReplaced says the change sent the custom headers too.
	HeadersReplaced bool `json:"headers_replaced"`
}

// EndpointDeleted answers EndpointDelete: the endpoint, who deleted it,
// and how many of its open dead letters the request skipped (the sweep
// skips any it left).
type EndpointDeleted struct {
	ID                 string `json:"id"`
	Deleted            bool   `json:"deleted"`
	DeletedBy          string `json:"deleted_by"`
	SkippedDeadLetters int    `json:"skipped_dead_letters"`
}

// EndpointWithSecret is an endpoint as created or rotated: the one time its
// signing secret is shown.
type EndpointWithSecret struct {
	Endpoint
	// Secret (whsec_ and base64) signs deliveries (Standard Webhooks).
	Secret string `json:"secret"`
}

// EndpointListOptions selects a page of EndpointList.
type EndpointListOptions struct {
	// Limit is the page size, 1 to 500 (the API's default, 50, when 0).
	Limit int
	// Cursor is the NextCursor of the page before; empty for the first.
	Cursor string
}

// EndpointPage is a page of endpoints in id order.
type EndpointPage struct {
	Items []Endpoint `json:"items"`
	// NextCursor asks for the next page (EndpointListOptions.Cursor);
	// empty on the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// AttemptListOptions page a delivery's attempts (Client.EventAttempts).
type AttemptListOptions struct {
	// Limit is the page size, 1 to 500 (the API's default, 100, when 0).
	Limit int
	// Cursor is the NextCursor of the page before; empty for the first.
	Cursor string
}

// AttemptPage is a page of a delivery's attempts, oldest first.
type AttemptPage struct {
	Items []Attempt `json:"items"`
	// NextCursor asks for the next page (AttemptListOptions.Cursor);
	// empty on the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// EventCreateRequest is an event to deliver. ID is its idempotency key
// (the same event posted again is answered with its state, never delivered
// twice); Sequence orders it within CorrelationID, from 1. Without
// EndpointID it goes to every endpoint subscribed to its Type; with one, to
// that endpoint only. ID, CorrelationID and EndpointID are 1 to 255 of A-Z
// a-z 0-9 _ : -.
type EventCreateRequest struct {
	ID            string `json:"id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	EndpointID    string `json:"endpoint_id,omitempty"`
	Type          string `json:"type"`
	// Data is the payload: any value encoding/json marshals (a
	// json.RawMessage goes as it is).
	Data any `json:"data"`
}

// Accepted is the answer of EventCreate.
type Accepted struct {
	ID string `json:"id"`
	// State is queued or waiting when the event was accepted now, or the
	// state it is in when it had been accepted before.
	State State `json:"state"`
	// Unrouted says that no endpoint took the event (it named none, and
	// none subscribes to its type): its state says delivered, with nothing
	// sent.
	Unrouted bool `json:"unrouted"`
	// Deliveries are the endpoints it was routed to (none when no endpoint
	// subscribes to its type).
	Deliveries []AcceptedDelivery `json:"deliveries"`
	// Existing is the event as it stands when it had been accepted before
	// (the same id and content again: answered 200); nil when it was
	// accepted now (202).
	Existing *Event `json:"-"`
}

// AcceptedDelivery is one endpoint an accepted event was routed to.
type AcceptedDelivery struct {
	EndpointID string `json:"endpoint_id"`
	State      State  `json:"state"`
}

// Attempt is one delivery attempt.
type Attempt struct {
	Attempt   int       `json:"attempt"`
	StartedAt time.Time `json:"started_at"`
	LatencyMS int64     `json:"latency_ms"`
	// StatusCode is the receiver's HTTP status; zero when it gave none (a
	// timeout, a refused connection).
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
	// Outcome is delivered, retry, permanent, gone or disabled.
	Outcome string `json:"outcome"`
}

// Event is an event as the ledger keeps it, with its deliveries.
type Event struct {
	ID            string `json:"id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	Type          string `json:"type"`
	// State is how its deliveries stand together: dead_lettered if one is,
	// else delivering, else waiting, else delivered (also when it has
	// none), else skipped.
	State      State     `json:"state"`
	AcceptedAt time.Time `json:"accepted_at"`
	// Unrouted says that no endpoint took the event: its state says
	// delivered, with nothing sent.
	Unrouted   bool       `json:"unrouted"`
	Deliveries []Delivery `json:"deliveries"`
	// Restarts is set when a sweep or a replay had to start the event's
	// workflow again (an operator terminated it, say).
	Restarts *Restarts `json:"restarts,omitempty"`
}

// Delivery is an event's delivery to one endpoint, with its attempts.
type Delivery struct {
	EndpointID  string    `json:"endpoint_id"`
	State       State     `json:"state"`
	ReleasedAt  time.Time `json:"released_at,omitzero"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	// Attempts are its last 20 attempts, oldest first; AttemptCount
	// counts them all, and Client.EventAttempts pages through every one.
	Attempts     []Attempt `json:"attempts"`
	AttemptCount int64     `json:"attempt_count"`
	// DeadLetter is the delivery's dead letter, when it has one.
	DeadLetter *DeadLetterRef `json:"dead_letter,omitempty"`
}

// DeadLetterRef names a delivery's dead letter.
type DeadLetterRef struct {
	Generation int    `json:"generation"`
	Status     string `json:"status"`
}

// Delivery returns the event's delivery to endpointID.
func (e Event) Delivery(endpointID string) (Delivery, bool) {
	for _, d := range e.Deliveries {
		if d.EndpointID == endpointID {
			return d, true
		}
	}
	return Delivery{}, false
}

// Restarts says how often an event's workflow was started again, when
// last and why.
type Restarts struct {
	Count  int       `json:"count"`
	LastAt time.Time `json:"last_at"`
	Reason string    `json:"reason"`
}

// Correlation is where a correlation stands, lane by lane, as its
// sequencer sees it.
type Correlation struct {
	CorrelationID string `json:"correlation_id"`
	// NextSequence is the correlation's cursor: every sequence below it is
	// finished in every lane.
	NextSequence int64 `json:"next_sequence"`
	// Missing is the first sequence that has not arrived while a later one
	// has: it holds every lane.
	Missing *int64 `json:"missing,omitempty"`
	Lanes   []Lane `json:"lanes"`
	// Source is "sequencer" (its state query answered) or "ledger" (none
	// answered).
	Source string `json:"source"`
	// Voided are the sequences an operator voided (CorrelationSkip): they
	// never arrive, and every lane moves past them.
	Voided []int64 `json:"voided"`
}

// CorrelationSkipRequest voids sequences of a correlation that its producer
// lost: 1 to 100 of them, none of which has arrived, and why.
type CorrelationSkipRequest struct {
	Sequences []int64 `json:"sequences"`
	Note      string  `json:"note,omitempty"`
}

// CorrelationVoided answers CorrelationSkip: the sequences it voided, those
// voided before (unchanged), and the key that voided them.
type CorrelationVoided struct {
	CorrelationID string  `json:"correlation_id"`
	Voided        []int64 `json:"voided"`
	AlreadyVoided []int64 `json:"already_voided"`
	VoidedBy      string  `json:"voided_by"`
}

// Lane returns the correlation's lane of endpointID.
func (c Correlation) Lane(endpointID string) (Lane, bool) {
	for _, l := range c.Lanes {
		if l.EndpointID == endpointID {
			return l, true
		}
	}
	return Lane{}, false
}

// Lane is one endpoint's lane of a correlation.
type Lane struct {
	EndpointID string `json:"endpoint_id"`
	// Next is the sequence it delivers next, Released the one in flight
	// (or dead-lettered), Parked those that wait in it.
	Next     *int64  `json:"next,omitempty"`
	Released *int64  `json:"released,omitempty"`
	Parked   []int64 `json:"parked"`
	// ParkedMore: more wait past those Parked lists (the first 100).
	ParkedMore bool `json:"parked_more,omitempty"`
	// PreviousSequence is the sequence last delivered in the lane, and
	// Skipped the lane's sequences skipped since.
	PreviousSequence int64   `json:"previous_sequence"`
	Skipped          []int64 `json:"skipped"`
	// BlockedBy is what holds the lane: its released delivery, or a
	// sequence that has not arrived (State "missing").
	BlockedBy *BlockedBy `json:"blocked_by,omitempty"`
}

// BlockedBy is what holds a lane back.
type BlockedBy struct {
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id,omitempty"`
	State    string `json:"state"`
}

// DeadLetterFilter selects dead letters. Zero fields select everything.
type DeadLetterFilter struct {
	CorrelationID string
	EndpointID    string
	// EventID selects one event's dead letters. List only.
	EventID string
	// Since and Until bound the time of dead-lettering: at or after Since,
	// before Until.
	Since, Until time.Time
	// Status is DeadLetterOpen (the API's default when empty),
	// DeadLetterReplayed, DeadLetterSkipped or DeadLetterAll. List only.
	Status string
	// Limit is the page size, 1 to 500, or to 20 with Include (the API's
	// default when zero: 50, or 20 with Include). List only.
	Limit int
	// Include asks a page for each dead letter's envelope and/or attempts
	// (IncludeEnvelope, IncludeAttempts), which it leaves out otherwise.
	// List only.
	Include []string
	// Cursor is the NextCursor of the page before. List only.
	Cursor string
}

// What a DeadLetterFilter's Include may ask a page of dead letters for.
const (
	IncludeEnvelope = "envelope"
	IncludeAttempts = "attempts"
)

// DeadLetter is an event that was not delivered, with what was tried.
type DeadLetter struct {
	EventID       string `json:"event_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	EndpointID    string `json:"endpoint_id"`
	// Envelope is the signed body as sent, and Attempts what was tried:
	// DeadLetterGet has both; a page of DeadLetterList has them only when
	// its filter's Include asks, and AttemptCount always.
	Envelope       json.RawMessage `json:"envelope,omitzero"`
	Attempts       []Attempt       `json:"attempts,omitzero"`
	AttemptCount   int             `json:"attempt_count"`
	Reason         string          `json:"reason"`
	FirstFailureAt time.Time       `json:"first_failure_at,omitzero"`
	DeadLetteredAt time.Time       `json:"dead_lettered_at"`
	// Generation counts the times the event was dead-lettered; a replay or
	// skip is for this one.
	Generation int `json:"generation"`
	// Status is DeadLetterOpen, DeadLetterReplayed or DeadLetterSkipped.
	Status      string    `json:"status"`
	ReplayedAt  time.Time `json:"replayed_at,omitzero"`
	ReplayedBy  string    `json:"replayed_by,omitempty"`
	ReplayCount int       `json:"replay_count"`
	SkippedBy   string    `json:"skipped_by,omitempty"`
	SkippedAt   time.Time `json:"skipped_at,omitzero"`
	SkipNote    string    `json:"skip_note,omitempty"`
}

// DeadLetterPage is a page of dead letters, the oldest first.
type DeadLetterPage struct {
	Items []DeadLetter `json:"items"`
	// NextCursor asks for the next page (DeadLetterFilter.Cursor); empty on
	// the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// BatchReplay is the answer of DeadLetterReplayBatch.
type BatchReplay struct {
	Replayed int `json:"replayed"`
	// EventIDs lists the replayed events, the first 1,000 at most;
	// Truncated says there were more.
	EventIDs  []string `json:"event_ids"`
	Truncated bool     `json:"event_ids_truncated,omitempty"`
}

// OperatorRequest goes with a replay or a skip. Who did it is the name of
// the API key that did, not something the caller says.
type OperatorRequest struct {
	// EndpointID names the delivery; it may be left out when the event has
	// one open dead letter (else the API answers 422 naming them).
	EndpointID string `json:"endpoint_id,omitempty"`
	// Note is recorded with a skip (at most 2000 characters).
	Note string `json:"note,omitempty"`
}

// OperatorAction is the answer of DeadLetterReplay and DeadLetterSkip.
type OperatorAction struct {
	EventID    string `json:"event_id"`
	EndpointID string `json:"endpoint_id"`
	// Status is "replaying" or "skipping".
	Status string `json:"status"`
	// SignalUnconfirmed says the signal to the event's workflow failed in
	// a way that leaves open whether it arrived (a timeout, Temporal
	// unavailable): the action stands, and hookflow's repair sweep sends it
	// again if the workflow did not take it. Detail says what failed.
	SignalUnconfirmed bool   `json:"signal_unconfirmed,omitempty"`
	Detail            string `json:"detail,omitempty"`
}

// StatsParams shapes Stats.
type StatsParams struct {
	// Top is how many blocked correlations to list, 0 to 100; nil for the
	// API's default (10).
	Top *int
}

// Stats is the ledger at a glance.
type Stats struct {
	Queued int64 `json:"queued"`
	// InFlight counts the events waiting or being delivered.
	InFlight        int64 `json:"in_flight"`
	DeliveredLast5m int64 `json:"delivered_last_5m"`
	DeadLettersOpen int64 `json:"dead_letters_open"`
	// OldestLagSeconds is the age of the oldest event not delivered or
	// skipped.
	OldestLagSeconds    float64        `json:"oldest_lag_seconds"`
	BlockedCorrelations BlockedSummary `json:"blocked_correlations"`
	// Endpoints are the same figures per endpoint.
	Endpoints []EndpointStats `json:"endpoints"`
	// Cleaner is the cleaner's last run (by any API process); nil before
	// the first.
	Cleaner *CleanerRun `json:"cleaner,omitempty"`
}

// BlockedSummary counts the blocked correlations and lists the longest
// blocked ones.
type BlockedSummary struct {
	Count int64                `json:"count"`
	Top   []BlockedCorrelation `json:"top"`
}

// EndpointStats are one endpoint's deliveries at a glance.
type EndpointStats struct {
	EndpointID       string  `json:"endpoint_id"`
	Waiting          int64   `json:"waiting"`
	Delivering       int64   `json:"delivering"`
	DeliveredLast5m  int64   `json:"delivered_last_5m"`
	DeadLettersOpen  int64   `json:"dead_letters_open"`
	OldestLagSeconds float64 `json:"oldest_lag_seconds"`
}

// EndpointsHealth is a page of the endpoints' health (StatsEndpoints).
type EndpointsHealth struct {
	Endpoints []EndpointHealth `json:"endpoints"`
	// NextCursor asks for the next page (StatsEndpointsOptions.Cursor);
	// empty on the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// StatsEndpointsOptions page the endpoints' health (Client.StatsEndpoints).
type StatsEndpointsOptions struct {
	// Limit is the page size, 1 to 500 (the API's default, 100, when 0).
	Limit int
	// Cursor is the NextCursor of the page before; empty for the first.
	Cursor string
}

// EndpointHealth is one endpoint's health (EndpointStats).
type EndpointHealth struct {
	EndpointID string `json:"endpoint_id"`
	// WindowSeconds is the span the attempt figures cover, ending now.
	WindowSeconds int64 `json:"window_seconds"`
	// SampleLimit is the most attempts the figures are drawn from (the
	// window's last); Sampled says the window held more.
	SampleLimit int  `json:"sample_limit"`
	Sampled     bool `json:"sampled"`
	// Attempts counts the HTTP attempts the figures are drawn from: the
	// window's, at most its last SampleLimit.
	Attempts int64           `json:"attempts"`
	Outcomes AttemptOutcomes `json:"outcomes"`
	// SuccessRate is delivered attempts over attempts, 0 to 1; nil when
	// there were none, as are the latency percentiles (milliseconds).
	SuccessRate     *float64 `json:"success_rate"`
	LatencyP50MS    *float64 `json:"latency_p50_ms"`
	LatencyP99MS    *float64 `json:"latency_p99_ms"`
	Waiting         int64    `json:"waiting"`
	Delivering      int64    `json:"delivering"`
	DeadLettersOpen int64    `json:"dead_letters_open"`
	// OldestUndelivered is the delivery not delivered or skipped whose
	// event was accepted first; nil when there is none.
	OldestUndelivered *OldestUndelivered `json:"oldest_undelivered,omitempty"`
	// Throttled counts the attempts its rate limit held back for a later
	// send slot, since its first rate-limited attempt (not the window's).
	Throttled int64 `json:"throttled"`
	// Circuit is its circuit breaker.
	Circuit CircuitState `json:"circuit"`
}

// CircuitState is an endpoint's circuit breaker: State "closed" (attempts
// are made), "open" (none is, but for one probe at a time from
// NextProbeAt) or "half_open" (a probe was answered: attempts go one at a
// time until enough answers in a row close it), with the consecutive retryable failures counted and since
// when it fails (zero times when they do not apply).
type CircuitState struct {
	State               string    `json:"state"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	FailureThreshold    int       `json:"failure_threshold"`
	FailingSince        time.Time `json:"failing_since,omitzero"`
	OpenedAt            time.Time `json:"opened_at,omitzero"`
	NextProbeAt         time.Time `json:"next_probe_at,omitzero"`
	// AutoReplayPending says the dead letters of its last outage are being
	// replayed (auto_replay).
	AutoReplayPending bool `json:"auto_replay_pending,omitempty"`
}

// AttemptOutcomes are attempts by outcome: delivered (2xx but 202), retry
// (202, 408, 429, 5xx, timeouts, connection errors), permanent (other 4xx),
// gone (410).
type AttemptOutcomes struct {
	Delivered int64 `json:"delivered"`
	Retry     int64 `json:"retry"`
	Permanent int64 `json:"permanent"`
	Gone      int64 `json:"gone"`
}

// OldestUndelivered is an endpoint's oldest delivery not finished.
type OldestUndelivered struct {
	EventID       string `json:"event_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	// State is waiting, delivering or dead_lettered.
	State string `json:"state"`
	// AgeSeconds is how long ago its event was accepted.
	AgeSeconds float64 `json:"age_seconds"`
}

// BlockedCorrelation is a lane (correlation, endpoint) whose next delivery
// holds others back.
type BlockedCorrelation struct {
	CorrelationID string `json:"correlation_id"`
	EndpointID    string `json:"endpoint_id"`
	NextSequence  int64  `json:"next_sequence"`
	// BlockedBy is the next event's state, or "missing" when it has not
	// arrived.
	BlockedBy       string  `json:"blocked_by"`
	BlockingEventID string  `json:"blocking_event_id,omitempty"`
	Parked          int64   `json:"parked"`
	AgeSeconds      float64 `json:"age_seconds"`
}

// CleanerRun is what a run of the cleaner pruned.
type CleanerRun struct {
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	PayloadsPruned  int64     `json:"payloads_pruned"`
	AttemptsDeleted int64     `json:"attempts_deleted"`
	KeysDeleted     int64     `json:"keys_deleted"`
	// Error is why the run failed; empty when it did not.
	Error string `json:"error,omitempty"`
}

// APIKeyCreateRequest makes an API key.
type APIKeyCreateRequest struct {
	// Name says who or what uses the key; it is the "by" of its replays and
	// skips (at most 100 characters).
	Name   string  `json:"name"`
	Scopes []Scope `json:"scopes"`
}

// APIKey is an API key as listed: never the key itself.
type APIKey struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Scopes    []Scope   `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// APIKeyCreated is a new API key: the one time Key (hfk_…) is shown; only
// its hash is kept.
type APIKeyCreated struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Scopes    []Scope   `json:"scopes"`
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
}
