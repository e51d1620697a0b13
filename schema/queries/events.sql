-- name: EventInsert
-- DO NOTHING covers both unique keys: the caller tells a repeated id from a
-- sequence taken by another id by reading the row back. A sequence behind
-- its correlation's cursor is refused as well, though its event's row may be
-- gone (HOOKFLOW_KEY_RETENTION): the cursor outlives the keys. A stored
-- event raises its correlation's high-water mark (creating the row of a new
-- correlation), which puts the correlation in the stuck-heads sweep's index.
WITH ins AS (
    INSERT INTO events (id, correlation_id, sequence, endpoint_id, type, data, payload_hash)
    SELECT $1, $2, $3, $4, $5, $6, $7
    WHERE NOT EXISTS (SELECT 1 FROM correlations WHERE correlation_id = $2 AND next_sequence > $3)
    ON CONFLICT DO NOTHING
    RETURNING id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, run_id, restarts, restarted_at, restart_reason
), high AS (
    INSERT INTO correlations AS c (correlation_id, high_water)
    SELECT correlation_id, sequence FROM ins
    ON CONFLICT (correlation_id) DO UPDATE SET high_water = GREATEST(c.high_water, EXCLUDED.high_water)
)
SELECT * FROM ins;

-- name: EventGet
SELECT id, correlation_id, sequence, endpoint_id, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, run_id, restarts, restarted_at, restart_reason
FROM events WHERE id = $1;

-- name: EventMarkStarted
-- Only a queued event moves to waiting: a later state is never rolled back.
-- $2 is the run started, empty when the workflow existed already.
UPDATE events SET state = 'waiting', run_id = COALESCE(NULLIF($2, ''), run_id), updated_at = now()
WHERE id = $1 AND state = 'queued';

-- name: EventsQueuedClaim
-- Takes up to $1 events queued for more than $2 seconds that no sweep took
-- within as long, and stamps them, in one statement: the sweep then starts
-- their workflows with no transaction open, and another API process's sweep
-- leaves them alone for $2 seconds. They are taken in the order they became
-- due (accepted, or last taken in hand), so one the sweep could not start
-- goes to the back of the line rather than taking the front of every batch.
UPDATE events e SET swept_at = now()
FROM (
    SELECT id FROM events
    WHERE state = 'queued' AND GREATEST(accepted_at, swept_at) < now() - make_interval(secs => $2)
    ORDER BY GREATEST(accepted_at, swept_at)
    LIMIT $1
    FOR UPDATE SKIP LOCKED
) q
WHERE e.id = q.id
RETURNING e.id, e.correlation_id, e.sequence, e.endpoint_id, e.type, e.data, e.payload_hash, e.state, e.accepted_at, e.released_at, e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason;

-- name: EventSweepDeferred
-- The queued sweep could not start the event: it goes to the back of the
-- line (EventsQueuedClaim's order), its lease counted from now.
UPDATE events SET swept_at = now() WHERE id = $1 AND state = 'queued';

-- name: EventsStuckHeadsClaim
-- Heads of their correlation (the sequence its cursor is on) whose
-- correlation's cursor has not moved, and that no sweep took in hand, for
-- $1 seconds, and that are not finished and have not changed for as long
-- themselves; up to $2 correlations are taken, in the order they became
-- due, and stamped (swept_at) in one statement, so the sweep then calls
-- Temporal with no transaction open and another API process's sweep leaves
-- them alone for $1 seconds. A head that does not move may be fine (a dead
-- letter waits for its operator; a retry waits for its timer), or its
-- workflow may have been terminated, or its sequencer reset: the sweep
-- finds out which. Queued heads are the other sweep's; a correlation whose
-- head is queued, missing (a later sequence came first) or changed within
-- $1 seconds is stamped all the same and looked at again a lease later.
-- correlations_due_idx holds only correlations with an event not finished,
-- in due order, so the claim reads what it takes and no more.
WITH due AS (
    UPDATE correlations c SET swept_at = now()
    FROM (
        SELECT correlation_id FROM correlations
        WHERE high_water >= next_sequence
          AND GREATEST(updated_at, swept_at) < now() - make_interval(secs => $1)
        ORDER BY GREATEST(updated_at, swept_at)
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ) d
    WHERE c.correlation_id = d.correlation_id
    RETURNING c.correlation_id, c.next_sequence
)
SELECT e.id, e.correlation_id, e.sequence, e.endpoint_id, e.type, e.data, e.payload_hash, e.state, e.accepted_at, e.released_at, e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason
FROM due JOIN events e ON e.correlation_id = due.correlation_id AND e.sequence = due.next_sequence
WHERE e.state NOT IN ('delivered', 'skipped', 'queued')
  AND e.updated_at < now() - make_interval(secs => $1);

-- name: CorrelationSweepDeferred
-- The heads sweep could not look at the correlation's head: it goes to the
-- back of the line (EventsStuckHeadsClaim's order), its lease counted from
-- now.
UPDATE correlations SET swept_at = now() WHERE correlation_id = $1;

-- name: EventRestarted
-- A sweep, a release or a replay started the event's workflow again (run
-- $3): say when and why.
UPDATE events SET restarts = restarts + 1, restarted_at = now(), restart_reason = $2, run_id = $3 WHERE id = $1;

-- name: EventStartAttempt
-- Marks the event delivering (when its endpoint is usable) and reads its
-- endpoint, its state before this attempt and its dead letter's status and
-- generation, in one round trip (the CTEs and the sub-selects see the same
-- snapshot, from before the update). A dead-lettered event is sent again
-- only once a replay of its dead letter is claimed: a Reset of its workflow
-- to before the dead letter must not deliver it behind its operator, who
-- may be skipping it.
WITH dl AS (
    SELECT status, generation FROM dead_letters WHERE event_id = $1
), marked AS (
    UPDATE events SET state = 'delivering', released_at = COALESCE(released_at, now()), updated_at = now()
    WHERE id = $1 AND state IN ('queued', 'waiting', 'delivering', 'dead_lettered')
      AND (state <> 'dead_lettered' OR EXISTS (SELECT 1 FROM dl WHERE status = 'replayed'))
      AND EXISTS (SELECT 1 FROM endpoints WHERE id = $2 AND NOT disabled)
)
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at,
       COALESCE((SELECT state FROM events WHERE id = $1), ''),
       COALESCE((SELECT status FROM dl), ''), COALESCE((SELECT generation FROM dl), 0)
FROM endpoints WHERE id = $2;

-- name: EventMarkFinal
-- delivered or skipped; $3 = delivered_at (NULL when skipped). A final
-- state is never overwritten: a delivered event stays delivered.
UPDATE events SET state = $2, delivered_at = $3, updated_at = now()
WHERE id = $1 AND state NOT IN ('delivered', 'skipped');

-- name: EventStateForUpdate
-- The event's state, its row locked until the transaction ends.
SELECT state FROM events WHERE id = $1 FOR UPDATE;

-- name: EventMarkDeadLettered
UPDATE events SET state = 'dead_lettered', has_dead_letter = true, updated_at = now() WHERE id = $1 AND state NOT IN ('delivered', 'skipped');

-- name: CorrelationAdvance
-- The sequencer's cursor, mirrored: it moves past $2 only from $2 itself,
-- so a repeated call (an activity retried after a crash) changes nothing.
-- $3: $2 was skipped, which adds it to the skipped tail; a delivered one
-- empties it (the receiver has moved its cursor past every skip before it).
INSERT INTO correlations AS c (correlation_id, next_sequence, skipped_tail)
VALUES ($1, $2::bigint + 1, CASE WHEN $3::boolean THEN ARRAY[$2::bigint] ELSE '{}' END)
ON CONFLICT (correlation_id) DO UPDATE SET next_sequence = $2::bigint + 1,
    skipped_tail = CASE WHEN $3::boolean THEN c.skipped_tail || $2::bigint ELSE '{}' END,
    updated_at = now()
WHERE c.next_sequence = $2::bigint;

-- name: CorrelationNext
SELECT COALESCE((SELECT next_sequence FROM correlations WHERE correlation_id = $1), 1);

-- name: CorrelationPending
-- Events of the correlation not delivered or skipped yet, in sequence order
-- (events_pending_idx).
SELECT id, sequence, state FROM events
WHERE correlation_id = $1 AND state NOT IN ('delivered', 'skipped')
ORDER BY sequence
LIMIT $2;

-- name: CorrelationHighWater
-- Highest sequence accepted for the correlation, 0 when none.
SELECT COALESCE(max(sequence), 0) FROM events WHERE correlation_id = $1;

-- name: CorrelationSkippedTail
-- Sequences skipped since the correlation's last delivered event, in order:
-- a sequencer starting afresh owes them to the receiver with its next
-- release. Kept on the correlation's row (CorrelationAdvance), so it does
-- not depend on the delivered event's row outliving the cleaner.
SELECT skipped_tail FROM correlations WHERE correlation_id = $1;

-- name: AttemptInsert
INSERT INTO delivery_attempts (event_id, attempt, started_at, latency_ms, status_code, error, outcome)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: AttemptsList
SELECT attempt, started_at, latency_ms, status_code, error, outcome
FROM delivery_attempts WHERE event_id = $1 ORDER BY id;
