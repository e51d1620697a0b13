-- Queries of the receiver's request path. Parameters are numbered as in the
-- Go call sites; see process.go for the order they run in.

-- name: ProcessedEventInsert
-- No conflict target: a clash on the event ID (a retry) and a clash on
-- (correlation_id, sequence) (another ID claiming the sequence) both leave the
-- table alone; ProcessedEventExists tells them apart.
INSERT INTO processed_events (event_id, correlation_id, sequence)
VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING;

-- name: ProcessedEventExists
-- Whether event $1 was processed: its row is there, or its sequence ($3) is at
-- or below the pruned watermark of its correlation ($2). Both are read from one
-- snapshot, so a prune committing between the insert and this query, which
-- deletes the row and raises the watermark together, is seen whole.
SELECT EXISTS (SELECT 1 FROM processed_events WHERE event_id = $1)
    OR EXISTS (SELECT 1 FROM correlation_cursors WHERE correlation_id = $2 AND pruned_through >= $3);

-- name: ProcessedEventDelete
-- Undoes this transaction's own insert when the event is parked instead. A
-- savepoint rollback would also release the cursor lock taken after it.
DELETE FROM processed_events WHERE event_id = $1;

-- name: CorrelationCursorEnsure
INSERT INTO correlation_cursors (correlation_id)
VALUES ($1)
ON CONFLICT (correlation_id) DO NOTHING;

-- name: CorrelationCursorLock
SELECT last_sequence, pruned_through FROM correlation_cursors WHERE correlation_id = $1 FOR UPDATE;

-- name: CorrelationCursorAdvance
-- Compare-and-swap: moves the cursor to the event's sequence ($2) only from
-- where it stood when the event was found to follow it ($3: the event's
-- previous_sequence, or a sequence the sender skipped after it).
UPDATE correlation_cursors
SET last_sequence = $2, updated_at = now()
WHERE correlation_id = $1 AND last_sequence = $3;

-- name: CorrelationCursorGet
SELECT last_sequence, pruned_through, updated_at FROM correlation_cursors WHERE correlation_id = $1;

-- name: ParkedEventInsert
-- No conflict target: a retry (same event ID), another ID parked at the same
-- sequence and another ID parked behind the same previous_sequence all leave
-- the table alone; ParkedEventExists tells the retry apart.
INSERT INTO parked_events (event_id, correlation_id, sequence, previous_sequence, body, headers)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING;

-- name: ParkedEventExists
SELECT EXISTS (SELECT 1 FROM parked_events WHERE event_id = $1);

-- name: ParkedEventGetByPrevious
-- The parked event that follows the cursor at $2: the drain's next step.
SELECT event_id, body FROM parked_events WHERE correlation_id = $1 AND previous_sequence = $2;

-- name: ParkedEventDeleteSuperseded
-- After the event at sequence $2, which named $3 as its previous, was
-- applied: the parked rows that can never apply now, its own among them.
DELETE FROM parked_events
WHERE correlation_id = $1 AND (sequence = $2 OR previous_sequence = $3)
RETURNING event_id, sequence;

-- name: ParkedEventListByCorrelation
SELECT event_id, sequence, previous_sequence, parked_at
FROM parked_events
WHERE correlation_id = $1
ORDER BY sequence;
