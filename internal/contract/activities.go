package contract

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Activity names: the workflows call the activities by these names, and the
// worker registers the activities under them.
const (
	ActivityDeliver         = "Deliver"
	ActivityFinish          = "Finish"
	ActivityLoadSequencer   = "LoadSequencer"
	ActivityLoadLanes       = "LoadLanes"
	ActivitySkip            = "Skip"
	ActivityWriteDeadLetter = "WriteDeadLetter"
	ActivityReplayed        = "Replayed"
	ActivityHandOverPause   = "HandOverPause"
)

// Error types of Deliver's failures, as workflows see them in
// temporal.ApplicationError.Type().
const (
	ErrTypePermanent        = "PermanentRejection" // a 4xx other than 408/410/429, or a 3xx: dead-letter at once
	ErrTypeEndpointGone     = "EndpointGone"       // 410: the endpoint is disabled and the event dead-lettered
	ErrTypeEndpointDisabled = "EndpointDisabled"   // the endpoint was disabled before this attempt
	ErrTypeRetryable        = "RetryableFailure"   // 5xx, 408, 202, timeouts, connection errors
	ErrTypeRetryAfter       = "RetryAfter"         // 429/503 with Retry-After: the next attempt waits as told
	ErrTypeCircuitOpen      = "CircuitOpen"        // the window was spent waiting on the endpoint's open circuit
)

// CircuitOpenReason is the reason of a dead letter whose window was spent
// while its endpoint's circuit breaker was open.
const CircuitOpenReason = "endpoint circuit open"

// WindowSpentPrefix begins the reason of a dead letter whose window was
// spent on retryable failures; the last attempt's follows.
const WindowSpentPrefix = "recovery window spent; last attempt: "

// The reasons of dead letters their endpoint's being disabled wrote
// (workflows' failureReason): an attempt refused because the endpoint was
// disabled (or is gone), and the 410 that disabled it; the error's message
// follows.
const (
	EndpointDisabledPrefix = "endpoint disabled: "
	EndpointGonePrefix     = "endpoint gone (410), endpoint disabled: "
)

// EndpointDeletedNote is the note of the skips that deleting an endpoint
// makes.
const EndpointDeletedNote = "endpoint deleted"

// EndpointEnabledBy records who replayed the dead letters an endpoint's
// disabling wrote, once the endpoint was enabled again.
const EndpointEnabledBy = "hookflow (endpoint enabled)"

// DisablingCaused tells the dead letters an endpoint's being disabled
// wrote, which enabling it replays, from the others.
func DisablingCaused(reason string) bool {
	return strings.HasPrefix(reason, EndpointDisabledPrefix) || strings.HasPrefix(reason, EndpointGonePrefix)
}

// OutageCaused tells the dead letters an endpoint's outage wrote (its
// window spent on retryable failures, or waiting on its open circuit),
// which auto_replay replays once the circuit closes, from the others: a
// permanent rejection, a disabled or gone endpoint.
func OutageCaused(reason string) bool {
	return reason == CircuitOpenReason || strings.HasPrefix(reason, WindowSpentPrefix)
}

// MaxReasonBytes bounds a dead letter's reason as JSON encodes it (escapes
// counted): the reason rides in the inputs of an event's workflow, one per
// lane (a restart's dead-lettered lanes, a continue-as-new's windows), so
// its bound times MaxSubscribersCeiling is what keeps those inputs under
// Temporal's payload limit whatever a receiver answers. The whole answer
// stays in the attempt's error.
const MaxReasonBytes = 512

// CapReason cuts reason, at a character, so that its JSON form takes at
// most MaxReasonBytes, ending with "…" when cut. The front stays: it says
// what kind of failure it was (WindowSpentPrefix, EndpointDisabledPrefix).
func CapReason(reason string) string {
	const ellipsis = "…"
	budget := MaxReasonBytes
	if jsonLen(reason) <= budget {
		return reason
	}
	budget -= len(ellipsis)
	used := 0
	for i, r := range reason {
		n := jsonLen(string(r))
		if used+n > budget {
			return reason[:i] + ellipsis
		}
		used += n
	}
	return reason
}

// jsonLen is how many bytes encoding/json writes for s, less its quotes:
// it escapes <, > and & (as \u003c), quotes, backslashes, control
// characters, U+2028, U+2029 and invalid UTF-8 (as \ufffd).
func jsonLen(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029 || r == utf8.RuneError:
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}

// FinishInput names finished deliveries of an event.
type FinishInput struct {
	Tenant        string     `json:"tenant_id"`
	CorrelationID string     `json:"correlation_id"`
	Sequence      int64      `json:"sequence"`
	EventID       string     `json:"event_id"`
	Lanes         []LaneDone `json:"lanes"`
}

// SequencerLoad is what the ledger knows of a correlation, for a sequencer
// starting afresh or resyncing: the correlation's cursor, which sequences
// have arrived from it on, and the position of each lane with open
// deliveries with its first ones (at most MaxQueuedPerLane and
// MaxQueuedBytesPerLane, and MaxQueuedBytes in all; Partial when there are
// more). The other lanes it leaves out, whatever their position: a
// sequencer loads one when an event for it arrives.
type SequencerLoad struct {
	// Next is the ledger's cursor: every sequence below it is finished in
	// every lane.
	Next     int64           `json:"next"`
	Frontier int64           `json:"frontier"`
	Arrived  []SequenceRange `json:"arrived,omitempty"`
	Lanes    []LaneState     `json:"lanes,omitempty"`
	// Voided are the correlation's voided sequences (their tombstones,
	// VoidedType), in order: the newest MaxVoidedKept.
	Voided []int64 `json:"voided,omitempty"`
}

// LoadLanesInput asks the ledger for the next open deliveries of lanes of
// a correlation, each after a sequence (the lane's last finished one).
type LoadLanesInput struct {
	Tenant        string      `json:"tenant_id"`
	CorrelationID string      `json:"correlation_id"`
	Lanes         []LaneAfter `json:"lanes"`
}

// LaneAfter is one lane of a LoadLanesInput.
type LaneAfter struct {
	Endpoint string `json:"endpoint_id"`
	After    int64  `json:"after"`
}

// SkipInput names the dead letter of a delivery an operator skipped.
type SkipInput struct {
	Tenant        string `json:"tenant_id"`
	EventID       string `json:"event_id"`
	EndpointID    string `json:"endpoint_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	Generation    int32  `json:"generation"`
	By            string `json:"by,omitempty"`
	Note          string `json:"note,omitempty"`
}

// DeadLetterInput is the context of an event whose delivery gave up.
type DeadLetterInput struct {
	Event  DeliverInput `json:"event"`
	Reason string       `json:"reason"`
	// Window names the delivery window this dead letter ends (the
	// workflow's run and the window's number in it). A retry of the write
	// for the same window, whose first try committed but whose result was
	// lost, writes nothing and answers the generation written then.
	Window string `json:"window"`
	// WindowStart is when that window began (workflow time): a dead letter
	// an outage caused, written after the outage's circuit closed, is
	// auto-replayed when the close came after it (store.DeadLetter).
	WindowStart time.Time `json:"window_start"`
	// Follows is the generation of the dead letter whose replay began the
	// window (0: the delivery's first window). The ledger past it holds
	// this window's dead letter already, written by a run that an
	// operator's Reset discarded: nothing is written again, and the answer
	// names that dead letter and the operator's action claimed on it, which
	// a run IDs' window key alone would lose to a fresh generation.
	Follows int32 `json:"follows,omitempty"`
}

// DeadLetterResult is what WriteDeadLetter did.
type DeadLetterResult struct {
	// Generation is the dead letter written.
	Generation int32 `json:"generation,omitempty"`
	// Finished is the event's final state when the ledger has it delivered
	// or skipped already: then no dead letter is written. A delivering
	// attempt whose result was lost on its way back (Temporal restarted,
	// the retries ran out of window) leaves exactly that.
	Finished State `json:"finished,omitempty"`
	// Claimed is the operator's action (DeadLetterClaimReplayed,
	// DeadLetterClaimSkipped) the ledger has claimed on dead letter
	// Generation, when that dead letter was written before (Follows): the
	// API answered it 202, so the workflow carries it out, as the signal a
	// Reset took from it would have. By and Note are the claim's.
	Claimed string `json:"claimed,omitempty"`
	By      string `json:"by,omitempty"`
	Note    string `json:"note,omitempty"`
}

// The operator's actions a dead letter row can hold claimed
// (DeadLetterResult.Claimed), as the ledger names them.
const (
	DeadLetterClaimReplayed = "replayed"
	DeadLetterClaimSkipped  = "skipped"
)

// OperatorResult is what an operator's replay or skip did to its dead
// letter. Lost names the other action (replayed, skipped) that was claimed
// on the dead letter first, by the API or by an earlier signal: this one
// took no effect, and the workflow waits for the action that won.
type OperatorResult struct {
	Lost string `json:"lost,omitempty"`
	// Generation is the dead letter's generation in the ledger when it is
	// not the one acted on: a run that an operator's Reset discarded
	// dead-lettered the event again, or a signal sent by hand named one that
	// does not exist. The workflow waits on the ledger's.
	Generation int32 `json:"generation,omitempty"`
}

// ReplayedInput names the dead letter a replay is for.
type ReplayedInput struct {
	Tenant     string `json:"tenant_id"`
	EventID    string `json:"event_id"`
	EndpointID string `json:"endpoint_id"`
	Generation int32  `json:"generation"`
	By         string `json:"by,omitempty"`
}

// DeliverInput is one delivery of an event as the workflow hands it to
// Deliver: the event, the endpoint, and the lane's position its release
// carried. Every attempt sends the same envelope; only webhook-timestamp and
// the signature change.
type DeliverInput struct {
	// Tenant is the tenant the event belongs to: every activity of the
	// event reads and writes its ledger as the tenant's.
	Tenant        string    `json:"tenant_id"`
	EventID       string    `json:"event_id"`
	CorrelationID string    `json:"correlation_id"`
	Sequence      int64     `json:"sequence"`
	EndpointID    string    `json:"endpoint_id"`
	Type          string    `json:"type"`
	Timestamp     time.Time `json:"timestamp"`
	// Data is the payload, which workflows leave empty: Deliver and
	// WriteDeadLetter read it from the ledger (events.data), so that no
	// activity input copies it into the history. One set is sent as is
	// when the ledger has none.
	Data json.RawMessage `json:"data,omitempty"`
	// Previous is the sequence last delivered to this endpoint in the
	// correlation (0 for none): the envelope's previous_sequence.
	Previous int64 `json:"previous,omitempty"`
	// Skipped are the lane's sequences an operator skipped (or voided)
	// since Previous, at most MaxSkippedListed (ReleaseSkipped); the
	// envelope tells the receiver so it does not wait for them.
	Skipped []int64 `json:"skipped,omitempty"`
	// Timeout bounds one HTTP attempt.
	Timeout time.Duration `json:"timeout"`
	// DeferHandOver: a delivered attempt does not tell the sequencer itself
	// but answers HandOffPending, so that the workflow tells it of the
	// event's deliveries that finished together in one update (an event
	// with several lanes); one lane's attempt hands over itself.
	DeferHandOver bool `json:"defer_hand_over,omitempty"`
	// AttemptOffset is added to Temporal's attempt number in the attempts
	// recorded: the regular activity that follows a first attempt made as a
	// local activity counts on from it.
	AttemptOffset int32 `json:"attempt_offset,omitempty"`
	// SlotReserved: the send slots of this attempt under its endpoint's
	// rate limit and its tenant's deliveries_per_second were reserved by
	// the attempt that answered Throttled, and the
	// workflow has waited for it: the activity's first try sends in it
	// without reserving another (a retry reserves its own).
	SlotReserved bool `json:"slot_reserved,omitempty"`
	// Probe: the first attempt of a window an operator's replay (or
	// auto-replay) opened. An open circuit lets it through as its probe at
	// once, not at the next probe's time, when no other probe is out: an
	// operator replays when the receiver is back, and the replay must not
	// spend its window waiting on a backoff the outage left.
	Probe bool `json:"probe,omitempty"`
}

// Envelope is the signed body a receiver gets.
type Envelope struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	// EndpointID names the endpoint the event is sent to: with
	// CorrelationID, the lane whose order PreviousSequence and
	// SkippedSequences speak of. A receiver keeps its cursor per
	// (endpoint_id, correlation_id), so several endpoints may point at one
	// receiver database. Signed like the rest.
	EndpointID    string `json:"endpoint_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	// PreviousSequence is the sequence of the last earlier event of this
	// correlation delivered to this endpoint, 0 for none: a receiver applies
	// the event when its lane's cursor stands there (compare-and-swap), so
	// an event never meant for it is no gap, and a missing one is.
	PreviousSequence int64           `json:"previous_sequence"`
	Data             json.RawMessage `json:"data"`
	// SkippedSequences, present only after an operator skip or void, lists
	// the sequences after PreviousSequence and before this one that will
	// never be delivered to this endpoint: the newest MaxSkippedListed, its
	// own skips before voided sequences (ReleaseSkipped), the same list
	// whichever path released it.
	SkippedSequences []int64 `json:"skipped_sequences,omitempty"`
}

// Envelope builds the body sent for this event.
func (in DeliverInput) Envelope() Envelope {
	return Envelope{
		ID: in.EventID, Type: in.Type, Timestamp: in.Timestamp.UTC().Format(time.RFC3339Nano), EndpointID: in.EndpointID,
		CorrelationID: in.CorrelationID, Sequence: in.Sequence, PreviousSequence: in.Previous, Data: in.Data, SkippedSequences: in.Skipped,
	}
}

// WithRelease is the delivery of in to the released lane r.
func (in DeliverInput) WithRelease(r LaneRelease) DeliverInput {
	in.EndpointID, in.Previous, in.Skipped = r.Endpoint, r.Previous, r.Skipped
	return in
}

// DeliverResult describes the attempt that succeeded.
type DeliverResult struct {
	StatusCode int   `json:"status_code"`
	Attempt    int32 `json:"attempt"`
	// HandOffPending: the event is delivered but telling its sequencer (or
	// releasing the successor it named) failed; the workflow runs Finish,
	// which retries.
	HandOffPending bool `json:"hand_off_pending,omitempty"`
	// Skipped: nothing was sent, because the ledger has the event as
	// skipped by an operator (a Reset ran its delivery again).
	Skipped bool `json:"skipped,omitempty"`
	// DeadLettered: nothing was sent, because the ledger has the event
	// waiting on this generation of its dead letter, with no replay claimed
	// (a Reset ran its delivery again): the workflow waits on it.
	DeadLettered int32 `json:"dead_lettered,omitempty"`
	// Throttled: nothing was sent, because the endpoint's rate limit (or
	// its tenant's deliveries_per_second) gave this attempt a send slot
	// that far ahead: the workflow waits it out on a timer, which does not
	// spend its recovery window, and makes the attempt (number Attempt)
	// again with SlotReserved.
	Throttled time.Duration `json:"throttled,omitempty"`
	// InFlightFull: the throttle was the endpoint's cap on attempts in
	// flight (max_in_flight), or its tenant is disabled, not a rate: no
	// send slot was reserved, so the attempt made again reserves its own.
	InFlightFull bool `json:"in_flight_full,omitempty"`
	// CircuitOpen: nothing was sent, because the endpoint's circuit breaker
	// is open and this attempt is not its probe: the workflow waits this
	// long (until the next probe may be due) on one timer, which, unlike a
	// throttle, spends the recovery window (the endpoint is failing), and
	// makes the attempt again.
	CircuitOpen time.Duration `json:"circuit_open,omitempty"`
}
