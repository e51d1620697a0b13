// Package contract is what hookflow's processes say to each other through
// Temporal: the workflow types, the signal, update and query names with
// their payloads, the search attributes and the event states. The API, the
// workflows, the activities and the CLI all speak it, and it imports nothing
// of theirs, so none of them has to import another for a name.
package contract

import (
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Workflow types.
const (
	// EventWorkflow is one accepted event; its workflow ID is the event's
	// idempotency key.
	EventWorkflow = "EventWorkflow"
	// SequencerWorkflow is one correlation's sequencer; its workflow ID is
	// SequencerID(correlation).
	SequencerWorkflow = "SequencerWorkflow"
)

// Signal, update and query names.
const (
	// UpdateArrive (Arrival → Announcement) tells a sequencer an event of its
	// correlation exists, and answers whether it is released now.
	UpdateArrive = "arrive"
	// UpdateFinished (Done → Handoff) tells a sequencer its released event is
	// finished, and answers the event it releases next.
	UpdateFinished = "finished"
	// UpdateResync (no argument → Handoff) makes a sequencer merge what the
	// ledger knows (finished sequences, stored events) into its state, and
	// answers the event it releases, if any: the repair after an operator
	// reset or terminated it.
	UpdateResync = "resync"
	// SignalRelease (Release) lets a held event deliver.
	SignalRelease = "release"
	// SignalReplay (Replay) gives a dead-lettered event a fresh window.
	SignalReplay = "replay"
	// SignalSkip (Skip) gives a dead-lettered event up so its successors go.
	SignalSkip = "skip"
	// QueryState answers an event's EventStatus or a sequencer's
	// SequencerState.
	QueryState = "state"
)

// SequencerPrefix starts every sequencer's workflow ID. An event's key can
// never contain "/", so the two never collide.
const SequencerPrefix = "sequencer/"

// SequencerID is the workflow ID of a correlation's sequencer.
func SequencerID(correlationID string) string { return SequencerPrefix + correlationID }

// CorrelationOf returns the correlation of a sequencer's workflow ID.
func CorrelationOf(sequencerID string) (string, bool) {
	return strings.CutPrefix(sequencerID, SequencerPrefix)
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

// Arrival tells a sequencer that an event of its correlation exists.
type Arrival struct {
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id"`
}

// Announcement is a sequencer's answer to an Arrival.
type Announcement struct {
	// Released: the event may deliver now (it is next and nothing else is in
	// flight). Otherwise it waits for SignalRelease.
	Released bool `json:"released,omitempty"`
	// Skipped are the sequences skipped since the last delivered one, which
	// a released event's envelope carries.
	Skipped []int64 `json:"skipped,omitempty"`
	// Finished: the sequencer is past this sequence already.
	Finished bool `json:"finished,omitempty"`
}

// Release is a sequencer's go-ahead to an event (SignalRelease's payload).
// Skipped lists the sequences an operator skipped since the last delivered
// one, so the receiver moves its cursor past them instead of waiting.
type Release struct {
	Sequence int64   `json:"sequence"`
	Skipped  []int64 `json:"skipped,omitempty"`
}

// Previous is the envelope's previous_sequence for the released event: the
// last delivered sequence before it, 0 for none. One endpoint sees every
// sequence of its correlation today, and Skipped is the contiguous run
// skipped just before Sequence, so the last delivered one precedes that run.
func (r Release) Previous() int64 {
	return max(r.Sequence-1-int64(len(r.Skipped)), 0)
}

// Done tells a sequencer that its released event is finished.
type Done struct {
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id"`
	// Skipped: an operator skipped it rather than it being delivered.
	Skipped bool `json:"skipped,omitempty"`
}

// Handoff is a sequencer's answer to Done or a resync: the event it released
// (none when EventID is empty), which the caller then signals.
type Handoff struct {
	EventID string  `json:"event_id,omitempty"`
	Release Release `json:"release"`
}

// Replay asks a dead-lettered event to try again with a fresh window.
// Generation names the dead letter it is for: a replay of an earlier one
// (a double click, a retried request) is ignored. Zero means "the dead
// letter it waits on now", for a signal sent by hand from the Web UI.
type Replay struct {
	Generation int32  `json:"generation,omitempty"`
	By         string `json:"by,omitempty"`
}

// Skip asks a dead-lettered event to give up so its successors can go;
// Generation as in Replay.
type Skip struct {
	Generation int32  `json:"generation,omitempty"`
	By         string `json:"by,omitempty"`
	Note       string `json:"note,omitempty"`
}

// EventStatus is what QueryState answers for an event.
type EventStatus struct {
	State State `json:"state"`
	// Generation is the dead letter it waits on, when dead-lettered.
	Generation int32  `json:"generation,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// SequencerState is a sequencer's whole memory, and what QueryState answers
// for it: the next sequence to release, the event released and not finished
// yet, the arrivals parked until their turn (in sequence order), and the
// sequences skipped since the last delivered one.
type SequencerState struct {
	Next     int64     `json:"next"`
	Released *Arrival  `json:"released,omitempty"`
	Parked   []Arrival `json:"parked,omitempty"`
	Skipped  []int64   `json:"skipped,omitempty"`
}

// Search attributes hookflow's workflows carry; the dev server and the test
// server register them. An event's workflow has all three, a sequencer
// CorrelationId, so the Web UI lists a correlation's sequencer beside its
// events.
var (
	CorrelationIDKey = temporal.NewSearchAttributeKeyKeyword("CorrelationId")
	SequenceKey      = temporal.NewSearchAttributeKeyInt64("Sequence")
	DeliveryStateKey = temporal.NewSearchAttributeKeyKeyword("DeliveryState")
)
