-- Queries of receiver.Prune. Each batch is one statement in its own short
-- transaction.

-- name: ProcessedEventPruneLock :one
-- One pruner at a time per database: a session lock, held by the connection
-- the run works on, let go when the run ends. Two pruners would only scan the
-- same rows twice, and could deadlock on the cursors they both raise.
SELECT pg_try_advisory_lock(hashtextextended('hookflow.receiver.prune', 0));

-- name: ProcessedEventPruneUnlock :exec
SELECT pg_advisory_unlock(hashtextextended('hookflow.receiver.prune', 0));

-- name: ProcessedEventPrune :one
-- Deletes up to $3 rows processed more than $2 seconds ago, oldest first from
-- processed_at $1 on (NULL: from the first), whose sequence is strictly below their lane's
-- cursor, and raises those lanes' watermarks in the same statement, so
-- no transaction sees the one without the other. The cursor read here may be
-- behind by the time the row goes, which is harmless: cursors only move up.
-- Returns how many rows went and the processed_at of the newest of them,
-- where the next batch starts: the rows before it that stayed are their
-- correlation's cursor (or not old enough), and are not read again.
WITH doomed AS (
    SELECT p.endpoint_id, p.event_id
    FROM processed_events p
    WHERE p.processed_at >= COALESCE(sqlc.narg(processed_from)::timestamptz, '-infinity')
      AND p.processed_at < now() - make_interval(secs => sqlc.arg(older_than_secs)::float8)
      AND p.sequence < (SELECT c.last_sequence FROM correlation_cursors c
                        WHERE c.endpoint_id = p.endpoint_id AND c.correlation_id = p.correlation_id)
    ORDER BY p.processed_at
    LIMIT sqlc.arg(batch_size)::int
), deleted AS (
    DELETE FROM processed_events p
    USING doomed d
    WHERE p.endpoint_id = d.endpoint_id AND p.event_id = d.event_id
    RETURNING p.endpoint_id, p.correlation_id, p.sequence, p.processed_at
), raised AS (
    UPDATE correlation_cursors c
    SET pruned_through = m.sequence
    FROM (SELECT endpoint_id, correlation_id, max(sequence) AS sequence FROM deleted GROUP BY endpoint_id, correlation_id) m
    WHERE c.endpoint_id = m.endpoint_id AND c.correlation_id = m.correlation_id AND c.pruned_through < m.sequence
)
SELECT count(*) AS deleted, max(processed_at) AS newest FROM deleted;
