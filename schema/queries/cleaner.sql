-- name: CleanerLock :one
-- One cleaner at a time across API processes: a session lock, held by the
-- connection the run works on, let go when the run ends.
SELECT pg_try_advisory_lock(hashtextextended('hookflow.cleaner', 0));

-- name: CleanerUnlock :exec
SELECT pg_advisory_unlock(hashtextextended('hookflow.cleaner', 0));

-- name: EventsPrunePayloads :execrows
-- Up to $2 finished events whose payload is older than $1 seconds lose it.
UPDATE events e SET data = NULL
FROM (
    SELECT tenant_id, id FROM events
    WHERE state IN ('delivered', 'skipped') AND data IS NOT NULL
      AND updated_at < now() - make_interval(secs => $1)
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) old
WHERE e.tenant_id = old.tenant_id AND e.id = old.id;

-- name: AttemptsPrune :execrows
-- Up to $2 attempts older than $1 seconds of finished events. A dead letter
-- keeps its own copy of its attempts.
DELETE FROM delivery_attempts a
USING (
    SELECT a.id FROM delivery_attempts a
    JOIN events e ON e.tenant_id = a.tenant_id AND e.id = a.event_id AND e.state IN ('delivered', 'skipped')
    WHERE a.started_at < now() - make_interval(secs => $1)
    ORDER BY a.started_at
    LIMIT $2
) old
WHERE a.id = old.id;

-- name: EventsPruneKeys :one
-- Up to $2 finished events that finished more than $1 seconds ago, whose
-- payload is gone, that have no dead letter (dead letters are never
-- pruned) and that are behind their correlation's cursor, are deleted, with
-- their deliveries and whatever attempts of theirs are left: the key
-- retention is at least the attempt retention, so those are past theirs,
-- and taking them here keeps each batch to its own rows however far the
-- attempt pruner is behind. Their correlation's cursor stays: a repost of
-- their key or sequence is answered 409. An event finished in every lane
-- but ahead of the cursor (a lane before it is held by a dead letter) is
-- kept until the cursor passes it: the cursor's walk (CorrelationAdvance)
-- and a sequencer's load read a missing sequence as one that has not
-- arrived. Their lanes rows stay, like the correlations'. Answers the events
-- and the attempts deleted.
WITH old AS (
    SELECT tenant_id, id FROM events e
    WHERE state IN ('delivered', 'skipped') AND data IS NULL AND NOT has_dead_letter
      AND updated_at < now() - make_interval(secs => $1)
      AND sequence < (SELECT c.next_sequence FROM correlations c WHERE c.tenant_id = e.tenant_id AND c.correlation_id = e.correlation_id)
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), gone_attempts AS (
    DELETE FROM delivery_attempts a USING old WHERE a.tenant_id = old.tenant_id AND a.event_id = old.id
    RETURNING 1
), gone_deliveries AS (
    DELETE FROM deliveries d USING old WHERE d.tenant_id = old.tenant_id AND d.event_id = old.id
), gone AS (
    DELETE FROM events e USING old WHERE e.tenant_id = old.tenant_id AND e.id = old.id
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS keys, (SELECT count(*) FROM gone_attempts) AS attempts;

-- name: CleanerRunRecord :exec
INSERT INTO cleaner_runs (id, started_at, finished_at, payloads_pruned, attempts_deleted, keys_deleted, error)
VALUES (1, $1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
    payloads_pruned = EXCLUDED.payloads_pruned, attempts_deleted = EXCLUDED.attempts_deleted,
    keys_deleted = EXCLUDED.keys_deleted, error = EXCLUDED.error;

-- name: CleanerRunLast :one
SELECT started_at, finished_at, payloads_pruned, attempts_deleted, keys_deleted, error FROM cleaner_runs WHERE id = 1;
