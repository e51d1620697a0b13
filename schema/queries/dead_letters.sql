-- name: DeadLetterUpsert :one
-- One per delivery ($1 event, $4 endpoint). A replayed delivery that fails
-- again is dead-lettered again: the row is
-- reopened with the new attempts as the next generation, keeping its replay
-- count. A write for the window the row already ends ($10, window_key: an
-- activity retried after its first try committed) changes nothing and
-- returns no row; the caller reads the generation then written.
-- Returns the generation written and its dead_lettered_at.
-- dead_lettered_at is the database's clock, as the circuit's failing_since
-- and closed_at are, which the auto-replay compares it with: a worker's
-- clock behind the database's would leave an outage's first dead letters
-- out of its auto-replay. attempts are the generation's
-- own ($6, AttemptsSinceDeadLetter), up to delivery_attempts row $9.
INSERT INTO dead_letters (tenant_id, event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, first_failure_at, dead_lettered_at, window_key, last_attempt_id)
VALUES (sqlc.arg(tenant_id), $1, $2, $3, $4, $5, $6, $7, $8, now(), $10, $9)
ON CONFLICT (tenant_id, event_id, endpoint_id) DO UPDATE SET
    envelope = EXCLUDED.envelope, attempts = EXCLUDED.attempts, reason = EXCLUDED.reason,
    first_failure_at = EXCLUDED.first_failure_at, dead_lettered_at = EXCLUDED.dead_lettered_at,
    generation = dead_letters.generation + 1, status = 'open', window_key = EXCLUDED.window_key,
    last_attempt_id = COALESCE(EXCLUDED.last_attempt_id, dead_letters.last_attempt_id)
WHERE dead_letters.window_key IS DISTINCT FROM EXCLUDED.window_key
RETURNING generation, dead_lettered_at;

-- name: AttemptsSinceDeadLetter :many
-- The attempts of delivery ($1, $2) after those its dead letter's last
-- generation holds (all of them before its first), with their row IDs:
-- what the next generation stores.
SELECT a.id, a.attempt, a.started_at, a.latency_ms, a.status_code, a.error, a.outcome
FROM delivery_attempts a
WHERE a.tenant_id = sqlc.arg(tenant_id) AND a.event_id = $1 AND a.endpoint_id = $2
  AND a.id > COALESCE((SELECT d.last_attempt_id FROM dead_letters d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $1 AND d.endpoint_id = $2), 0)
ORDER BY a.id;

-- name: DeadLetterGeneration :one
SELECT generation FROM dead_letters WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2;

-- name: DeadLetterGet :one
SELECT event_id, correlation_id, sequence, endpoint_id, envelope, attempts, jsonb_array_length(attempts), reason, first_failure_at, dead_lettered_at,
       generation, status, replayed_at, replayed_by, replay_count, skipped_by, skipped_at, skip_note, tenant_id
FROM dead_letters WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2;

-- name: DeadLettersOfEvent :many
-- Every dead letter of the event, whatever its status, by endpoint (the
-- primary key's range).
SELECT event_id, correlation_id, sequence, endpoint_id, envelope, attempts, jsonb_array_length(attempts), reason, first_failure_at, dead_lettered_at,
       generation, status, replayed_at, replayed_by, replay_count, skipped_by, skipped_at, skip_note, tenant_id
FROM dead_letters WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1
ORDER BY endpoint_id;

-- name: DeadLetterList :many
-- Keyset pagination on (dead_lettered_at, event_id, endpoint_id), unique
-- now that an event has a dead letter per delivery (dead_letters_open_idx
-- for the open ones); empty filters match all.
-- The envelope (up to the API's body limit) and the attempts are read only
-- when with_envelope and with_attempts ask for them: a CASE that is false
-- never detoasts them.
SELECT event_id, correlation_id, sequence, endpoint_id,
       (CASE WHEN sqlc.arg(with_envelope)::bool THEN envelope END)::jsonb AS envelope,
       (CASE WHEN sqlc.arg(with_attempts)::bool THEN attempts END)::jsonb AS attempts, jsonb_array_length(attempts),
       reason, first_failure_at, dead_lettered_at,
       generation, status, replayed_at, replayed_by, replay_count, skipped_by, skipped_at, skip_note, tenant_id
FROM dead_letters
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(correlation_id)::text IS NULL OR correlation_id = sqlc.narg(correlation_id))
  AND (sqlc.narg(endpoint_id)::text IS NULL OR endpoint_id = sqlc.narg(endpoint_id))
  AND (sqlc.narg(since)::timestamptz IS NULL OR dead_lettered_at >= sqlc.narg(since))
  AND (sqlc.narg(until)::timestamptz IS NULL OR dead_lettered_at < sqlc.narg(until))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(event_id)::text IS NULL OR event_id = sqlc.narg(event_id))
  AND (sqlc.narg(only_endpoints)::text[] IS NULL OR endpoint_id = ANY(sqlc.narg(only_endpoints)::text[]))
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (dead_lettered_at, event_id, endpoint_id) > (sqlc.narg(after_time), sqlc.arg(after_event_id)::text, sqlc.arg(after_endpoint_id)::text))
ORDER BY dead_lettered_at, event_id, endpoint_id
LIMIT sqlc.arg(max_rows);

-- name: DeadLetterReplayPage :many
-- One page of a batch replay: open dead letters in the order they are
-- replayed, each lane (correlation, endpoint) in sequence order
-- (dead_letters_lane_idx), keyset on (correlation_id, endpoint_id,
-- sequence, event_id), without envelopes or attempts.
SELECT event_id, correlation_id, sequence, endpoint_id, NULL::jsonb AS envelope, NULL::jsonb AS attempts, jsonb_array_length(attempts),
       reason, first_failure_at, dead_lettered_at,
       generation, status, replayed_at, replayed_by, replay_count, skipped_by, skipped_at, skip_note, tenant_id
FROM dead_letters
WHERE tenant_id = sqlc.arg(tenant_id) AND status = 'open'
  AND (sqlc.narg(correlation_id)::text IS NULL OR correlation_id = sqlc.narg(correlation_id))
  AND (sqlc.narg(endpoint_id)::text IS NULL OR endpoint_id = sqlc.narg(endpoint_id))
  AND (sqlc.narg(since)::timestamptz IS NULL OR dead_lettered_at >= sqlc.narg(since))
  AND (sqlc.narg(until)::timestamptz IS NULL OR dead_lettered_at < sqlc.narg(until))
  AND (sqlc.narg(event_id)::text IS NULL OR event_id = sqlc.narg(event_id))
  AND (sqlc.narg(only_endpoints)::text[] IS NULL OR endpoint_id = ANY(sqlc.narg(only_endpoints)::text[]))
  AND (sqlc.narg(after_correlation_id)::text IS NULL
       OR (correlation_id, endpoint_id, sequence, event_id)
          > (sqlc.narg(after_correlation_id), sqlc.arg(after_endpoint_id)::text, sqlc.arg(after_sequence)::bigint, sqlc.arg(after_event_id)::text))
ORDER BY correlation_id, endpoint_id, sequence, event_id
LIMIT sqlc.arg(max_rows);

-- name: DeadLetterMarkReplayed :execrows
-- Claims the replay of generation $2 of the delivery ($1, $4): only one caller (the API, or the
-- workflow acting on a replay sent by hand) moves it from open.
UPDATE dead_letters SET status = 'replayed', replayed_at = now(), replayed_by = $3, replay_count = replay_count + 1
WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $4 AND generation = $2 AND status = 'open';

-- name: DeadLetterMarkSkipped :execrows
-- Claims the skip of generation $2, as DeadLetterMarkReplayed.
UPDATE dead_letters SET status = 'skipped', skipped_by = $3, skipped_at = now(), skip_note = $4
WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $5 AND generation = $2 AND status = 'open';

-- name: DeadLetterEndDeleted :exec
-- A replayed dead letter whose delivery then ended skipped because its
-- endpoint was deleted (the replay's attempt sent nothing): the row says
-- skipped, by who deleted the endpoint, as the delete's own skips do.
UPDATE dead_letters SET status = 'skipped', skipped_by = $3, skipped_at = now(), skip_note = $4
WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2 AND status = 'replayed';

-- name: DeadLetterReopen :exec
-- Undoes a claim of generation $2 whose signal never reached the workflow.
UPDATE dead_letters SET
    replay_count = replay_count - CASE WHEN status = 'replayed' THEN 1 ELSE 0 END,
    status = 'open', replayed_at = NULL, replayed_by = NULL, skipped_by = NULL, skipped_at = NULL, skip_note = NULL
WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $3 AND generation = $2 AND status <> 'open';

-- name: DeliveryStateForUpdate :one
-- The delivery's state, its row locked until the transaction ends (after
-- EventLock).
SELECT state FROM deliveries WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2 FOR UPDATE;

-- name: DeliveryMarkDeadLettered :exec
-- Marks the delivery, and its event as one that has a dead letter: such an
-- event is never pruned (migration 003), since dead letters are kept.
WITH d AS (
    UPDATE deliveries SET state = 'dead_lettered', updated_at = now()
    WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2 AND state NOT IN ('delivered', 'skipped')
)
UPDATE events SET has_dead_letter = true WHERE events.tenant_id = sqlc.arg(tenant_id) AND events.id = $1 AND NOT events.has_dead_letter;
