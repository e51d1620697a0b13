-- name: DeadLetterUpsert
-- A replayed event that fails again is dead-lettered again: the row is
-- reopened with the new attempts, keeping its replay count.
INSERT INTO dead_letters (event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, first_failure_at, dead_lettered_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (event_id) DO UPDATE SET
    envelope = EXCLUDED.envelope, attempts = EXCLUDED.attempts, reason = EXCLUDED.reason,
    first_failure_at = EXCLUDED.first_failure_at, dead_lettered_at = EXCLUDED.dead_lettered_at,
    status = 'open';

-- name: DeadLetterGet
SELECT event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, first_failure_at, dead_lettered_at,
       status, replayed_at, replay_count, skipped_by, skipped_at, skip_note
FROM dead_letters WHERE event_id = $1;

-- name: DeadLetterList
-- Keyset pagination on (dead_lettered_at, event_id); empty filters match all.
SELECT event_id, correlation_id, sequence, endpoint_id, envelope, attempts, reason, first_failure_at, dead_lettered_at,
       status, replayed_at, replay_count, skipped_by, skipped_at, skip_note
FROM dead_letters
WHERE ($1::text IS NULL OR correlation_id = $1)
  AND ($2::text IS NULL OR endpoint_id = $2)
  AND ($3::timestamptz IS NULL OR dead_lettered_at >= $3)
  AND ($4::timestamptz IS NULL OR dead_lettered_at < $4)
  AND ($5::text IS NULL OR status = $5)
  AND ($6::timestamptz IS NULL OR (dead_lettered_at, event_id) > ($6, $7::text))
ORDER BY dead_lettered_at, event_id
LIMIT $8;

-- name: DeadLetterMarkReplayed
UPDATE dead_letters SET status = 'replayed', replayed_at = now(), replay_count = replay_count + 1
WHERE event_id = $1 AND status = 'open';

-- name: DeadLetterMarkSkipped
UPDATE dead_letters SET status = 'skipped', skipped_by = $2, skipped_at = now(), skip_note = $3
WHERE event_id = $1;
