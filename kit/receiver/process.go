package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/kit/receiver/internal/dbsqlc"
	"github.com/hookflow/hookflow/kit/webhook"
)

// outcome is what one delivery came to.
type outcome int

const (
	outcomeApplied outcome = iota + 1
	outcomeAlreadyProcessed
	outcomeParked
	// outcomeSequenceConflict: the event's sequence is applied, or parked,
	// under another event ID. It must never apply, and a retry cannot change
	// that, so the answer is a permanent 409 and the sender dead-letters the
	// event for an operator to look at.
	outcomeSequenceConflict
	// outcomePreviousPassed: the cursor is past the event's
	// previous_sequence, at a sequence the event does not list as skipped,
	// so the sender and the receiver disagree on what was delivered. The
	// cursor never moves back, so it is a permanent 409 as well.
	outcomePreviousPassed
)

// errCursorMoved means the cursor's compare-and-swap matched no row. The
// row lock makes this impossible unless someone edits the table by hand;
// the request is rolled back and answered 500 so the sender retries.
var errCursorMoved = errors.New("correlation cursor moved concurrently")

// process runs one verified delivery in one transaction. Lock order, the
// same in every transaction of the kit: the processed_events row, then the
// lane's cursor, then parked_events.
func (rc *Receiver) process(ctx context.Context, ev Event, body []byte, header http.Header) (outcome, error) {
	tx, err := rc.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// A concurrent copy of this event blocks here until the first one commits
	// (then this one is a duplicate) or rolls back (then this one proceeds).
	q := dbsqlc.New(tx)
	if dedupChecked {
		inserted, err := q.ProcessedEventInsert(ctx, processedEventInsert(ev))
		if err != nil {
			return 0, fmt.Errorf("insert processed event: %w", err)
		}
		if inserted == 0 {
			exists, err := q.ProcessedEventExists(ctx, dbsqlc.ProcessedEventExistsParams{
				EndpointID: ev.EndpointID, EventID: ev.ID, CorrelationID: ev.CorrelationID, PrunedThrough: ev.Sequence})
			if err != nil {
				return 0, fmt.Errorf("look up processed event: %w", err)
			}
			// Two EXISTS are never NULL.
			if exists != nil && *exists {
				return outcomeAlreadyProcessed, nil
			}
			return outcomeSequenceConflict, nil
		}
	}

	last, prunedThrough, err := rc.lockCursor(ctx, tx, ev.EndpointID, ev.CorrelationID)
	if err != nil {
		return 0, err
	}
	switch {
	case last == 0 && rc.cfg.StartPosition == StartMidStream && ev.PreviousSequence > 0:
		// Nothing of this lane applied here yet, and the event follows
		// events that went elsewhere (the endpoint was re-pointed here):
		// the lane starts at it. hookflow sends a lane's next event only
		// once the one before is delivered, so the first to arrive is the
		// one to start at; it also rescues a lane that parked before the
		// receiver was switched to StartMidStream, on the sender's next
		// retry or replay. The cursor lock makes a concurrent copy wait,
		// then find it applied.
		if err := rc.applyLocked(ctx, tx, ev, last); err != nil {
			return 0, err
		}
		if err := tx.Commit(ctx); err != nil {
			return 0, fmt.Errorf("commit applied event: %w", err)
		}
		rc.logger.Info("lane started mid-stream", "event_id", ev.ID, "endpoint_id", ev.EndpointID, "correlation_id", ev.CorrelationID,
			"sequence", ev.Sequence, "previous_sequence", ev.PreviousSequence)
		return outcomeApplied, nil

	case ev.Sequence <= prunedThrough:
		// Prune deleted this sequence's row: a retry of the event applied
		// there, since the sender never sends another ID for a delivered
		// sequence. The rollback takes back the insert above.
		return outcomeAlreadyProcessed, nil

	case cursorChecked && ev.Sequence <= last:
		// A sequence the cursor passed with no row for it: skipped by the
		// sender, never meant for this endpoint, or its row deleted by hand. The unique (endpoint_id,
		// correlation_id, sequence) index catches every other case before this.
		return outcomeSequenceConflict, nil

	case !cursorChecked || ev.follows(last):
		if err := rc.applyLocked(ctx, tx, ev, last); err != nil {
			return 0, err
		}
		if err := tx.Commit(ctx); err != nil {
			return 0, fmt.Errorf("commit applied event: %w", err)
		}
		return outcomeApplied, nil

	case ev.PreviousSequence > last:
		out, err := rc.park(ctx, tx, ev, body, header)
		if err != nil || out != outcomeParked {
			return out, err
		}
		if err := tx.Commit(ctx); err != nil {
			return 0, fmt.Errorf("commit parked event: %w", err)
		}
		return outcomeParked, nil

	default:
		return outcomePreviousPassed, nil
	}
}

// lockCursor creates the lane's cursor at 0 when absent, locks it for the
// rest of tx and returns the last applied sequence and the pruned watermark
// (see Prune).
func (rc *Receiver) lockCursor(ctx context.Context, tx pgx.Tx, endpointID, correlationID string) (last, prunedThrough int64, err error) {
	q := dbsqlc.New(tx)
	if err := q.CorrelationCursorEnsure(ctx, dbsqlc.CorrelationCursorEnsureParams{EndpointID: endpointID, CorrelationID: correlationID}); err != nil {
		return 0, 0, fmt.Errorf("create correlation cursor: %w", err)
	}
	c, err := q.CorrelationCursorLock(ctx, dbsqlc.CorrelationCursorLockParams{EndpointID: endpointID, CorrelationID: correlationID})
	if err != nil {
		return 0, 0, fmt.Errorf("lock correlation cursor: %w", err)
	}
	return c.LastSequence, c.PrunedThrough, nil
}

// park stores an event that arrived ahead of its previous_sequence. It runs
// under the cursor lock, so the transaction that applies that predecessor
// either commits before it (and this event is not parked but applied) or
// after it (and its drain finds this row).
func (rc *Receiver) park(ctx context.Context, tx pgx.Tx, ev Event, body []byte, header http.Header) (outcome, error) {
	// Deleting this transaction's own insert keeps the cursor lock; rolling
	// back to a savepoint taken before the insert would release it.
	q := dbsqlc.New(tx)
	if err := q.ProcessedEventDelete(ctx, dbsqlc.ProcessedEventDeleteParams{EndpointID: ev.EndpointID, EventID: ev.ID}); err != nil {
		return 0, fmt.Errorf("delete processed event: %w", err)
	}
	headers, err := json.Marshal(map[string]string{
		webhook.HeaderID:        header.Get(webhook.HeaderID),
		webhook.HeaderTimestamp: header.Get(webhook.HeaderTimestamp),
		webhook.HeaderSignature: header.Get(webhook.HeaderSignature),
	})
	if err != nil {
		return 0, fmt.Errorf("encode parked headers: %w", err)
	}
	parked, err := q.ParkedEventInsert(ctx, dbsqlc.ParkedEventInsertParams{EndpointID: ev.EndpointID, EventID: ev.ID,
		CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, PreviousSequence: ev.PreviousSequence, Body: body, Headers: headers})
	if err != nil {
		return 0, fmt.Errorf("insert parked event: %w", err)
	}
	if parked == 1 {
		return outcomeParked, nil
	}
	exists, err := q.ParkedEventExists(ctx, dbsqlc.ParkedEventExistsParams{EndpointID: ev.EndpointID, EventID: ev.ID})
	if err != nil {
		return 0, fmt.Errorf("look up parked event: %w", err)
	}
	if exists {
		// A retry of a parked event: still waiting. The first copy stays.
		return outcomeParked, nil
	}
	return outcomeSequenceConflict, nil
}

// applyLocked applies ev, which follows the cursor at from, under the cursor
// lock: Apply, advance the cursor from from to ev's sequence by
// compare-and-swap, and clear the parking lot of what can no longer apply:
// ev itself, another ID parked at its sequence, and another event parked
// behind the same previous_sequence.
func (rc *Receiver) applyLocked(ctx context.Context, tx pgx.Tx, ev Event, from int64) error {
	if err := rc.apply(ctx, tx, ev); err != nil {
		return fmt.Errorf("apply event: %w", err)
	}
	q := dbsqlc.New(tx)
	moved, err := q.CorrelationCursorAdvance(ctx, dbsqlc.CorrelationCursorAdvanceParams{
		EndpointID: ev.EndpointID, CorrelationID: ev.CorrelationID, LastSequence: ev.Sequence, LastSequence_2: from})
	if err != nil {
		return fmt.Errorf("advance correlation cursor: %w", err)
	}
	if moved != 1 {
		return errCursorMoved
	}
	gone, err := q.ParkedEventDeleteSuperseded(ctx, dbsqlc.ParkedEventDeleteSupersededParams{
		EndpointID: ev.EndpointID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, PreviousSequence: ev.PreviousSequence})
	if err != nil {
		return fmt.Errorf("delete parked event: %w", err)
	}
	for _, p := range gone {
		if p.EventID != ev.ID {
			rc.logger.Warn("discarded parked event that can no longer apply: its sequence or its previous sequence was applied under another id",
				"event_id", p.EventID, "parked_sequence", p.Sequence, "applied_event_id", ev.ID, "endpoint_id", ev.EndpointID, "correlation_id", ev.CorrelationID, "sequence", ev.Sequence)
		}
	}
	return nil
}

// drain applies the parked events of the lane (endpointID, correlationID)
// that follow the cursor at from, one after the other (each names the one before as its
// previous_sequence), each in its own transaction, until none follows or one
// cannot be applied. It runs after the commit that moved the cursor to from.
// What it leaves parked is applied by the sender's retry of that event,
// which the 202 it got asked for.
func (rc *Receiver) drain(ctx context.Context, endpointID, correlationID string, from int64) {
	for cursor := from; ; {
		next, err := rc.drainOne(ctx, endpointID, correlationID, cursor)
		if err != nil {
			rc.logger.Error("apply parked event", "endpoint_id", endpointID, "correlation_id", correlationID, "previous_sequence", cursor, "error", err)
			return
		}
		if next == 0 {
			return
		}
		cursor = next
	}
}

// drainOne applies the parked event of the lane whose previous_sequence is
// cursor, with the same guarantees as a delivery: dedup insert, cursor
// lock and compare-and-swap, Apply, all in one transaction. It returns the
// sequence it applied, or 0 when there is nothing to apply, including when a
// concurrent request got there first (that request drains on after its own
// commit).
func (rc *Receiver) drainOne(ctx context.Context, endpointID, correlationID string, cursor int64) (int64, error) {
	tx, err := rc.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	q := dbsqlc.New(tx)
	parked, err := q.ParkedEventGetByPrevious(ctx, dbsqlc.ParkedEventGetByPreviousParams{
		EndpointID: endpointID, CorrelationID: correlationID, PreviousSequence: cursor})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get parked event: %w", err)
	}
	// The body was verified when it was parked; its timestamp has aged since,
	// so it is not verified again.
	ev, err := decodeEvent(parked.Body)
	if err != nil {
		return 0, fmt.Errorf("decode parked event %s: %w", parked.EventID, err)
	}
	if dedupChecked {
		inserted, err := q.ProcessedEventInsert(ctx, processedEventInsert(ev))
		if err != nil {
			return 0, fmt.Errorf("insert processed event: %w", err)
		}
		if inserted == 0 {
			return 0, nil
		}
	}
	last, _, err := rc.lockCursor(ctx, tx, endpointID, correlationID)
	if err != nil {
		return 0, err
	}
	if last != cursor {
		return 0, nil
	}
	if err := rc.applyLocked(ctx, tx, ev, cursor); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit parked event: %w", err)
	}
	rc.logger.Debug("parked event applied", "event_id", ev.ID, "endpoint_id", endpointID, "correlation_id", correlationID, "sequence", ev.Sequence)
	return ev.Sequence, nil
}

// ParkedEvent is an event waiting for the cursor to reach its
// previous_sequence.
type ParkedEvent struct {
	EventID          string
	Sequence         int64
	PreviousSequence int64
	ParkedAt         time.Time
}

// CorrelationState is the receiver's view of one lane: a correlation ID at
// one endpoint.
type CorrelationState struct {
	EndpointID    string
	CorrelationID string
	// LastSequence is the last applied sequence (0: none yet).
	LastSequence int64
	// PrunedThrough is the highest sequence whose processed_events row Prune
	// deleted (0: none); always below LastSequence.
	PrunedThrough int64
	UpdatedAt     time.Time
	// Parked lists waiting events in sequence order.
	Parked []ParkedEvent
}

// Correlation returns the state of the lane (endpointID, correlationID)
// from one snapshot, or ErrNotFound when no event of it has arrived.
func (rc *Receiver) Correlation(ctx context.Context, endpointID, correlationID string) (CorrelationState, error) {
	tx, err := rc.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return CorrelationState{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	q := dbsqlc.New(tx)
	c, err := q.CorrelationCursorGet(ctx, dbsqlc.CorrelationCursorGetParams{EndpointID: endpointID, CorrelationID: correlationID})
	if errors.Is(err, pgx.ErrNoRows) {
		return CorrelationState{}, ErrNotFound
	}
	if err != nil {
		return CorrelationState{}, fmt.Errorf("get correlation cursor: %w", err)
	}
	st := CorrelationState{EndpointID: endpointID, CorrelationID: correlationID,
		LastSequence: c.LastSequence, PrunedThrough: c.PrunedThrough, UpdatedAt: c.UpdatedAt}
	parked, err := q.ParkedEventListByLane(ctx, dbsqlc.ParkedEventListByLaneParams{EndpointID: endpointID, CorrelationID: correlationID})
	if err != nil {
		return CorrelationState{}, fmt.Errorf("list parked events: %w", err)
	}
	st.Parked = make([]ParkedEvent, len(parked))
	for i, p := range parked {
		st.Parked[i] = ParkedEvent(p)
	}
	return st, nil
}

// Endpoints lists, in order, the endpoints with a lane of correlationID at
// this receiver (none: an empty list).
func (rc *Receiver) Endpoints(ctx context.Context, correlationID string) ([]string, error) {
	ids, err := dbsqlc.New(rc.pool).CorrelationCursorListEndpoints(ctx, correlationID)
	if err != nil {
		return nil, fmt.Errorf("list correlation endpoints: %w", err)
	}
	return ids, nil
}

// processedEventInsert is ev's row of processed_events.
func processedEventInsert(ev Event) dbsqlc.ProcessedEventInsertParams {
	return dbsqlc.ProcessedEventInsertParams{EndpointID: ev.EndpointID, EventID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence}
}
