// Package workflows holds hookflow's two workflows: EventWorkflow, one per
// accepted event (workflow ID = the event's idempotency key), and
// SequencerWorkflow, one per correlation ID, which releases each event only
// after its predecessor is delivered or skipped.
package workflows

import (
	"strings"

	"github.com/hookflow/hookflow/activities"
)

// Signal and query names: the contract between the workflows, the API and
// the CLI.
const (
	// SignalArrived (activities.Arrival) tells a sequencer an event exists.
	SignalArrived = "arrived"
	// UpdateArrive (activities.Arrival → activities.Announcement) tells a
	// sequencer an event exists and answers whether it may deliver at once.
	UpdateArrive = "arrive"
	// UpdateFinished (Done → activities.Handoff) tells a sequencer its
	// released event is finished and answers the event it released next.
	UpdateFinished = "finished"
	// SignalRelease (Release) lets an event deliver.
	SignalRelease = "release"
	// SignalDone (Done) tells the sequencer its released event is finished.
	SignalDone = "done"
	// SignalReplay (Replay) restarts a dead-lettered event's delivery.
	SignalReplay = "replay"
	// SignalSkip (Skip) gives a dead-lettered event up.
	SignalSkip = "skip"
	// QueryState returns a workflow's state (EventState or SequencerState).
	QueryState = "state"
)

// SequencerPrefix starts every sequencer's workflow ID. An event ID can
// never contain "/", so it never collides with one.
const SequencerPrefix = "sequencer/"

// SequencerID is the workflow ID of a correlation's sequencer.
func SequencerID(correlationID string) string { return SequencerPrefix + correlationID }

// CorrelationOf returns the correlation ID of a sequencer's workflow ID.
func CorrelationOf(sequencerID string) (string, bool) {
	return strings.CutPrefix(sequencerID, SequencerPrefix)
}

// Release is the sequencer's go-ahead to an event (see activities.Release).
type Release = activities.Release

// Done tells the sequencer an event is finished: delivered, or skipped.
type Done struct {
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id"`
	Skipped  bool   `json:"skipped,omitempty"`
}

// Replay asks a dead-lettered event to try again with a fresh window.
type Replay struct {
	By string `json:"by,omitempty"`
}

// Skip asks a dead-lettered event to give up so its successors can go.
type Skip struct {
	By   string `json:"by"`
	Note string `json:"note,omitempty"`
}

// SequencerTaskQueue is the task queue new sequencers of events on
// taskQueue run on: workers poll both, so a sequencer's workflow tasks never
// wait behind the event tasks that wait for its answers.
func SequencerTaskQueue(taskQueue string) string { return taskQueue + "-sequencers" }

// EventWorkflowName is the event workflow's registered type.
const EventWorkflowName = "EventWorkflow"
