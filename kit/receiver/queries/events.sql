-- Queries of the receiver's request path. Parameters are numbered as in the
-- Go call sites; see process.go for the order they run in. Every table is
-- keyed by lane: $1 is the envelope's endpoint_id, and a correlation's lanes
-- at different endpoints never see each other's rows.

-- name: ProcessedEventInsert :execrows
-- No conflict target: a clash on the event ID (a retry) and a clash on
-- (endpoint_id, correlation_id, sequence) (another ID claiming the sequence)
-- both leave the table alone; ProcessedEventExists tells them apart.
INSERT INTO processed_events (endpoint_id, event_id, correlation_id, sequence)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING;

-- name: ProcessedEventExists :one
-- Whether event $2 was processed in the lane: its row is there, or its
-- sequence ($4) is at or below the pruned watermark of its lane. Both are
-- read from one snapshot, so a prune committing between the insert and this
-- query, which deletes the row and raises the watermark together, is seen
-- whole.
SELECT EXISTS (SELECT 1 FROM processed_events p WHERE p.endpoint_id = $1 AND p.event_id = $2)
    OR EXISTS (SELECT 1 FROM correlation_cursors c WHERE c.endpoint_id = $1 AND c.correlation_id = $3 AND c.pruned_through >= $4);

-- name: ProcessedEventDelete :exec
-- Undoes this transaction's own insert when the event is parked instead. A
-- savepoint rollback would also release the cursor lock taken after it.
DELETE FROM processed_events WHERE endpoint_id = $1 AND event_id = $2;

-- name: CorrelationCursorEnsure :exec
INSERT INTO correlation_cursors (endpoint_id, correlation_id)
VALUES ($1, $2)
ON CONFLICT (endpoint_id, correlation_id) DO NOTHING;

-- name: CorrelationCursorLock :one
SELECT last_sequence, pruned_through FROM correlation_cursors WHERE endpoint_id = $1 AND correlation_id = $2 FOR UPDATE;

-- name: CorrelationCursorAdvance :execrows
-- Compare-and-swap: moves the cursor to the event's sequence ($3) only from
-- where it stood when the event was found to follow it ($4: the event's
-- previous_sequence, a sequence the sender skipped after it, or 0 for the
-- first event of a lane started mid-stream).
UPDATE correlation_cursors
SET last_sequence = $3, updated_at = now()
WHERE endpoint_id = $1 AND correlation_id = $2 AND last_sequence = $4;

-- name: CorrelationCursorGet :one
SELECT last_sequence, pruned_through, updated_at FROM correlation_cursors WHERE endpoint_id = $1 AND correlation_id = $2;

-- name: CorrelationCursorListEndpoints :many
-- The endpoints with a lane of correlation $1.
SELECT endpoint_id FROM correlation_cursors WHERE correlation_id = $1 ORDER BY endpoint_id;

-- name: ParkedEventInsert :execrows
-- No conflict target: a retry (same event ID), another ID parked at the same
-- sequence and another ID parked behind the same previous_sequence all leave
-- the table alone; ParkedEventExists tells the retry apart.
INSERT INTO parked_events (endpoint_id, event_id, correlation_id, sequence, previous_sequence, body, headers)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING;

-- name: ParkedEventExists :one
SELECT EXISTS (SELECT 1 FROM parked_events WHERE endpoint_id = $1 AND event_id = $2);

-- name: ParkedEventGetByPrevious :one
-- The parked event that follows the lane's cursor at $3: the drain's next step.
SELECT event_id, body FROM parked_events WHERE endpoint_id = $1 AND correlation_id = $2 AND previous_sequence = $3;

-- name: ParkedEventDeleteSuperseded :many
-- After the event at sequence $3, which named $4 as its previous, was
-- applied: the parked rows of its lane that can never apply now, its own
-- among them.
DELETE FROM parked_events
WHERE endpoint_id = $1 AND correlation_id = $2 AND (sequence = $3 OR previous_sequence = $4)
RETURNING event_id, sequence;

-- name: ParkedEventListByLane :many
SELECT event_id, sequence, previous_sequence, parked_at
FROM parked_events
WHERE endpoint_id = $1 AND correlation_id = $2
ORDER BY sequence;
