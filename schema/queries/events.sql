-- name: EventLockCorrelation
-- Serialises the inserts of one correlation until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended('hookflow.correlation:' || $1, 0));

-- name: EventInsert
-- DO NOTHING covers both unique keys: the caller tells a repeated id from a
-- sequence taken by another id by reading the row back.
-- The protocol is 2 (the ledger orders the event) unless an event of the
-- correlation stored before protocol 2 is still unfinished: then its
-- sequencer orders this one too (see migration 003). The caller holds the
-- correlation's lock (EventLockCorrelation), so two inserts cannot decide
-- differently.
INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash, protocol)
SELECT $1, $2, $3, $4, $5, $6, $7,
       CASE WHEN EXISTS (SELECT 1 FROM events WHERE correlation_id = $2 AND protocol < 2 AND state NOT IN ('delivered', 'skipped'))
            THEN 1 ELSE 2 END
ON CONFLICT DO NOTHING
RETURNING id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, protocol;

-- name: EventGet
SELECT id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, protocol
FROM events WHERE id = $1;

-- name: EventMarkStarted
-- Only a queued event moves to waiting: a later state is never rolled back.
UPDATE events SET state = 'waiting', updated_at = now() WHERE id = $1 AND state = 'queued';

-- name: EventsQueuedClaim
SELECT id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, protocol
FROM events
WHERE state = 'queued' AND accepted_at < now() - make_interval(secs => $2)
ORDER BY accepted_at
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: EventStartAttempt
-- Marks the event delivering (when its endpoint is usable) and reads its
-- endpoint and its state before this attempt, in one round trip (the CTE
-- and the sub-select see the same snapshot, from before the update).
WITH marked AS (
    UPDATE events SET state = 'delivering', released_at = COALESCE(released_at, now()), updated_at = now()
    WHERE id = $1 AND state IN ('queued', 'waiting', 'delivering', 'dead_lettered')
      AND EXISTS (SELECT 1 FROM endpoints WHERE id = $2 AND NOT disabled)
)
SELECT id, url, secret, previous_secret, previous_expires_at, disabled, disabled_reason, created_at, updated_at,
       COALESCE((SELECT state FROM events WHERE id = $1), '')
FROM endpoints WHERE id = $2;

-- name: EventMarkFinal
-- delivered or skipped; $3 = delivered_at (NULL when skipped).
UPDATE events SET state = $2, delivered_at = $3, updated_at = now() WHERE id = $1;

-- name: EventMarkDeadLettered
UPDATE events SET state = 'dead_lettered', updated_at = now() WHERE id = $1 AND state NOT IN ('delivered', 'skipped');

-- name: CorrelationAdvance
-- Compare-and-swap: the cursor moves past $2 only from $2 itself, so a
-- repeated call (an activity retried after a crash) changes nothing.
INSERT INTO correlations AS c (correlation_id, next_sequence)
VALUES ($1, $2 + 1)
ON CONFLICT (correlation_id) DO UPDATE SET next_sequence = $2 + 1, updated_at = now()
WHERE c.next_sequence = $2;

-- name: CorrelationNext
SELECT COALESCE((SELECT next_sequence FROM correlations WHERE correlation_id = $1), 1);

-- name: CorrelationPending
-- Events of the correlation not delivered or skipped yet, in sequence order.
SELECT id, sequence, state FROM events
WHERE correlation_id = $1 AND state NOT IN ('delivered', 'skipped')
ORDER BY sequence
LIMIT $2;

-- name: CorrelationHighWater
-- Highest sequence accepted for the correlation, 0 when none.
SELECT COALESCE(max(sequence), 0) FROM events WHERE correlation_id = $1;

-- name: AttemptInsert
INSERT INTO delivery_attempts (event_id, attempt, started_at, latency_ms, status_code, error, outcome)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: AttemptsList
SELECT attempt, started_at, latency_ms, status_code, error, outcome
FROM delivery_attempts WHERE event_id = $1 ORDER BY id;

-- name: CorrelationSkippedTail
-- Sequences skipped since the correlation's last delivered event: a sequencer
-- starting afresh owes them to the receiver with its next release.
SELECT sequence FROM events
WHERE correlation_id = $1 AND state = 'skipped'
  AND sequence > COALESCE((SELECT max(sequence) FROM events WHERE correlation_id = $1 AND state = 'delivered'), 0)
ORDER BY sequence;

-- name: CorrelationClaim
-- The ledger's answer to an event of protocol 2 asking to deliver: the
-- correlation's next sequence, the event's own state, and when it is next
-- the sequences skipped since the last delivered one (its envelope carries
-- them).
SELECT c.next,
       (SELECT state FROM events WHERE id = $3),
       CASE WHEN c.next = $2 THEN ARRAY(
           SELECT sequence FROM events
           WHERE correlation_id = $1 AND state = 'skipped' AND sequence < $2
             AND sequence > COALESCE((SELECT max(sequence) FROM events WHERE correlation_id = $1 AND state = 'delivered' AND sequence < $2), 0)
           ORDER BY sequence)
       END
FROM (SELECT COALESCE((SELECT next_sequence FROM correlations WHERE correlation_id = $1), 1) AS next) c;

-- name: EventSuccessor
-- The event after $2 when it is stored but not released yet: the one a
-- finished event of protocol 2 starts.
SELECT id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, protocol
FROM events
WHERE correlation_id = $1 AND sequence = $2 + 1 AND state IN ('queued', 'waiting') AND protocol = 2;

-- name: EventsMissedRelease
-- Events of protocol 2 still waiting although their correlation's cursor
-- reached them more than $1 seconds ago: the hand-off of the event before
-- never happened. The sweep starts them.
SELECT e.id, e.correlation_id, e.sequence, e.endpoint_id, e.type, e.data, e.payload_hash, e.state, e.accepted_at, e.released_at, e.delivered_at, e.updated_at, e.protocol
FROM events e
JOIN correlations c ON c.correlation_id = e.correlation_id AND c.next_sequence = e.sequence
WHERE e.state = 'waiting' AND e.protocol = 2
  AND c.updated_at < now() - make_interval(secs => $1)
  AND e.updated_at < now() - make_interval(secs => $1)
ORDER BY e.accepted_at
LIMIT $2;
