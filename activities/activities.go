// Package activities holds the side effects of hookflow's workflows: the
// signed HTTP delivery, the ledger writes in Postgres, and the signal that
// starts or wakes a correlation's sequencer.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/metrics"
	"github.com/hookflow/hookflow/store"
)

// Error types of Deliver's failures, as workflows see them in
// temporal.ApplicationError.Type().
const (
	ErrTypePermanent        = "PermanentRejection" // a 4xx other than 408/410/429: dead-letter at once
	ErrTypeEndpointGone     = "EndpointGone"       // 410: the endpoint is disabled and the event dead-lettered
	ErrTypeEndpointDisabled = "EndpointDisabled"   // the endpoint was disabled before this attempt
	ErrTypeRetryable        = "RetryableFailure"   // 5xx, 408, 202, timeouts, connection errors
	ErrTypeRetryAfter       = "RetryAfter"         // 429/503 with Retry-After: the next attempt waits as told
)

// Activities carries the activities' dependencies; workers register one.
type Activities struct {
	store    *store.Store
	temporal client.Client
	http     *http.Client
	logger   *slog.Logger
	metrics  *metrics.Metrics
	starter  Starter
	now      func() time.Time
}

// Starter starts the workflow of an event the ledger just released
// (starter.Starter).
type Starter interface {
	StartReleased(ctx context.Context, ev store.Event, skipped []int64) error
}

// Deps are what the activities need.
type Deps struct {
	Store    *store.Store
	Temporal client.Client
	HTTP     *http.Client
	Logger   *slog.Logger
	// Metrics is optional: nil records nothing.
	Metrics *metrics.Metrics
	// Starter starts the successors the ledger releases (hand-off). Only
	// events of the ledger protocol need it.
	Starter Starter
}

// New returns the activities; every dependency is required.
func New(d Deps) (*Activities, error) {
	switch {
	case d.Store == nil:
		return nil, errors.New("activities: store is required")
	case d.Temporal == nil:
		return nil, errors.New("activities: temporal client is required")
	case d.HTTP == nil:
		return nil, errors.New("activities: http client is required")
	case d.Logger == nil:
		return nil, errors.New("activities: logger is required")
	}
	return &Activities{store: d.Store, temporal: d.Temporal, http: d.HTTP, logger: d.Logger, metrics: d.Metrics, starter: d.Starter, now: time.Now}, nil
}

// Arrival tells a sequencer that an event of its correlation exists.
type Arrival struct {
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id"`
}

// ArriveInput is everything needed to signal-with-start a sequencer.
type ArriveInput struct {
	SequencerID   string
	SequencerType string
	Signal        string
	Arrival       Arrival
	// StartArg is the sequencer's input when this signal starts it.
	StartArg any
	// SearchAttributes of a sequencer this signal starts.
	CorrelationID string
}

// Arrive signals the correlation's sequencer, starting it when it is not
// running. Repeating it is harmless: the sequencer ignores a duplicate arrival.
func (a *Activities) Arrive(ctx context.Context, in ArriveInput) error {
	info := activity.GetInfo(ctx)
	_, err := a.temporal.SignalWithStartWorkflow(ctx, in.SequencerID, in.Signal, in.Arrival, client.StartWorkflowOptions{
		ID:                    in.SequencerID,
		TaskQueue:             info.TaskQueue,
		TypedSearchAttributes: searchAttributes(in.CorrelationID),
	}, in.SequencerType, in.StartArg)
	if err != nil {
		return fmt.Errorf("signal sequencer %s: %w", in.SequencerID, err)
	}
	return nil
}

// AnnounceInput is everything needed to update-with-start a sequencer.
type AnnounceInput struct {
	SequencerID string
	// TaskQueue is where a sequencer this starts runs.
	TaskQueue     string
	SequencerType string
	Update        string
	Arrival       Arrival
	// StartArg is the sequencer's input when this update starts it.
	StartArg any
	// CorrelationID sets the search attributes of a sequencer this starts.
	CorrelationID string
}

// Announcement is the sequencer's answer to an arrival: Released when the
// event may deliver at once (it was next and nothing was in flight), with
// the skipped sequences its envelope must carry; otherwise the event waits
// for the release signal.
type Announcement struct {
	Released bool    `json:"released"`
	Skipped  []int64 `json:"skipped,omitempty"`
}

// Announce tells the correlation's sequencer that the event exists through
// update-with-start, starting the sequencer when it is not running, and
// returns whether the event is released at once. The in-order event thus
// needs no release signal. Repeating it is harmless: the update ID is the
// event's, and the sequencer answers a repeated announcement as it did the
// first.
func (a *Activities) Announce(ctx context.Context, in AnnounceInput) (Announcement, error) {
	queue := in.TaskQueue
	if queue == "" {
		queue = activity.GetInfo(ctx).TaskQueue
	}
	start := a.temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       in.SequencerID,
		TaskQueue:                queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    searchAttributes(in.CorrelationID),
	}, in.SequencerType, in.StartArg)
	h, err := a.temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID:     "arrive/" + in.Arrival.EventID,
			UpdateName:   in.Update,
			Args:         []any{in.Arrival},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return Announcement{}, fmt.Errorf("announce to sequencer %s: %w", in.SequencerID, err)
	}
	var out Announcement
	if err := h.Get(ctx, &out); err != nil {
		return Announcement{}, fmt.Errorf("announce to sequencer %s: %w", in.SequencerID, err)
	}
	return out, nil
}

// Release is a sequencer's go-ahead to an event (the release signal's
// payload). Skipped lists the sequences an operator skipped since the last
// delivered one, so the receiver can move its cursor past them instead of
// waiting for them.
type Release struct {
	Sequence int64   `json:"sequence"`
	Skipped  []int64 `json:"skipped,omitempty"`
}

// Handoff is a sequencer's answer to a finished event: the event it
// released next (none when EventID is empty), which the finished event's
// workflow then signals itself.
type Handoff struct {
	EventID string  `json:"event_id,omitempty"`
	Release Release `json:"release"`
}

// FinishInput tells a sequencer that an event is finished.
type FinishInput struct {
	SequencerID string
	EventID     string
	// Update is the sequencer's update that takes Done and answers a
	// Handoff; ReleaseSignal is the signal that releases the next event.
	Update, ReleaseSignal string
	Done                  any
}

// Finish tells the correlation's sequencer the event is finished, by update,
// and releases the successor the sequencer hands it with a signal of its
// own, so the hand-over costs the sequencer no signal command and no extra
// workflow task. A sequencer that is not running has nothing to wait for:
// the ledger already holds the finished event and its next run starts from
// there. Repeating it is harmless: the update ID is the event's, and a
// second release signal is ignored by its receiver.
func (a *Activities) Finish(ctx context.Context, in FinishInput) error {
	h, err := a.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   in.SequencerID,
		UpdateID:     "finish/" + in.EventID,
		UpdateName:   in.Update,
		Args:         []any{in.Done},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var next Handoff
	if err == nil {
		err = h.Get(ctx, &next)
	}
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tell sequencer %s: %w", in.SequencerID, err)
	}
	if next.EventID == "" {
		return nil
	}
	if err := a.temporal.SignalWorkflow(ctx, next.EventID, "", in.ReleaseSignal, next.Release); err != nil && !notFound(err) {
		return fmt.Errorf("release %s: %w", next.EventID, err)
	}
	return nil
}

func notFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// Cursor is where a correlation stands in the ledger.
type Cursor struct {
	// Next is the sequence the correlation needs next.
	Next int64 `json:"next"`
	// Skipped are the sequences skipped since the last delivered one.
	Skipped []int64 `json:"skipped,omitempty"`
}

// LoadCursor reads a correlation's cursor from the ledger; a sequencer
// starting afresh begins there.
func (a *Activities) LoadCursor(ctx context.Context, correlationID string) (Cursor, error) {
	next, err := a.store.CorrelationNext(ctx, correlationID)
	if err != nil {
		return Cursor{}, err
	}
	skipped, err := a.store.CorrelationSkippedTail(ctx, correlationID)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{Next: next, Skipped: skipped}, nil
}

// HandOffInput names an event ordered by the ledger that is finished.
type HandOffInput struct {
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	// Skipped: the event was skipped, not delivered, so the successor's
	// envelope must name the skipped sequences.
	Skipped bool `json:"skipped,omitempty"`
}

// HandOff starts the workflow of the event after a finished one, released,
// when that event is stored and waiting. The ledger moved the cursor to it
// when the finished one was marked, and an event of the ledger protocol gets
// a workflow only once released, so this is the release. An event stored
// after the cursor moved is released by the starter at its own start.
// Repeating it is harmless: the workflow ID is the event's key.
func (a *Activities) HandOff(ctx context.Context, in HandOffInput) error {
	next, err := a.store.EventSuccessor(ctx, in.CorrelationID, in.Sequence)
	if err != nil || next == nil {
		return err
	}
	var skipped []int64
	if in.Skipped {
		if skipped, err = a.store.CorrelationSkippedTail(ctx, in.CorrelationID); err != nil {
			return err
		}
	}
	return a.startReleased(ctx, *next, skipped)
}

func (a *Activities) startReleased(ctx context.Context, ev store.Event, skipped []int64) error {
	if a.starter == nil {
		return errors.New("activities: no starter to release " + ev.ID + " with")
	}
	return a.starter.StartReleased(ctx, ev, skipped)
}

// SkipInput names the event an operator skipped.
type SkipInput struct {
	EventID       string
	CorrelationID string
	Sequence      int64
	By            string
	Note          string
	// HandOff: the event is ordered by the ledger, so its successor is
	// signalled once the cursor is past it.
	HandOff bool `json:",omitempty"`
}

// Skip marks the event skipped (who, when, why) and moves its correlation's
// cursor past it.
func (a *Activities) Skip(ctx context.Context, in SkipInput) error {
	if err := a.store.DeadLetterMarkSkipped(ctx, in.EventID, in.By, in.Note); err != nil {
		return err
	}
	if err := a.store.EventFinish(ctx, in.EventID, in.CorrelationID, in.Sequence, store.StateSkipped, a.now()); err != nil {
		return err
	}
	if !in.HandOff {
		return nil
	}
	return a.HandOff(ctx, HandOffInput{CorrelationID: in.CorrelationID, Sequence: in.Sequence, Skipped: true})
}

// DeadLetterInput is the context of an event whose delivery gave up.
type DeadLetterInput struct {
	Event  DeliverInput
	Reason string
}

// WriteDeadLetter stores the dead letter with the signed envelope and every
// attempt recorded so far, and marks the event dead-lettered.
func (a *Activities) WriteDeadLetter(ctx context.Context, in DeadLetterInput) error {
	attempts, err := a.store.AttemptsList(ctx, in.Event.EventID)
	if err != nil {
		return err
	}
	env, err := json.Marshal(in.Event.Envelope())
	if err != nil {
		return fmt.Errorf("encode envelope: %w", err)
	}
	var first *time.Time
	for _, at := range attempts {
		if at.Outcome != OutcomeDelivered {
			t := at.StartedAt
			first = &t
			break
		}
	}
	now := a.now()
	err = a.store.DeadLetterUpsert(ctx, store.DeadLetter{
		EventID: in.Event.EventID, CorrelationID: in.Event.CorrelationID, Sequence: in.Event.Sequence,
		EndpointID: in.Event.EndpointID, Envelope: env, Attempts: attempts, Reason: in.Reason,
		FirstFailureAt: first, DeadLetteredAt: now,
	})
	if err != nil {
		return err
	}
	a.metrics.DeadLettered(in.Event.EndpointID)
	a.logger.Warn("event dead-lettered",
		"event_id", in.Event.EventID, "correlation_id", in.Event.CorrelationID, "sequence", in.Event.Sequence,
		"endpoint_id", in.Event.EndpointID, "reason", in.Reason, "attempts", len(attempts))
	return nil
}

// Replayed records that an operator replayed the event's dead letter.
func (a *Activities) Replayed(ctx context.Context, eventID string) error {
	_, err := a.store.DeadLetterMarkReplayed(ctx, eventID)
	return err
}
