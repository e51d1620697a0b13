-- Queries on the outbox table: the producer's insert (Enqueue) and the
-- relay's side (claim, mark, lag). Parameters are numbered as at the Go call
-- sites.

-- name: OutboxInsert :one
-- No conflict target: a repeated id and a sequence taken by another id both
-- leave the table alone (and the caller's transaction usable);
-- OutboxHashGet tells them apart.
INSERT INTO outbox (tenant_id, id, correlation_id, sequence, endpoint_id, type, data, payload_hash, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, sqlc.narg(metadata)::json)
ON CONFLICT DO NOTHING
RETURNING position;

-- name: OutboxHashGet :one
SELECT payload_hash FROM outbox WHERE tenant_id = $1 AND id = $2;

-- name: OutboxListen :exec
LISTEN hookflow_outbox;

-- name: OutboxCorrelationsPending :many
-- (Tenant, correlation) pairs with pending rows, tenants in turn: each
-- tenant's correlations ranked the longest waiting first, and every
-- tenant's first before anyone's second, so one tenant's backlog (a bulk
-- import through the outbox) delays only itself.
SELECT p.tenant_id, p.correlation_id
FROM (
    SELECT tenant_id, correlation_id, min(created_at) AS waiting_since,
           row_number() OVER (PARTITION BY tenant_id ORDER BY min(created_at), correlation_id) AS turn
    FROM outbox
    WHERE state = 'pending'
    GROUP BY tenant_id, correlation_id
) p
ORDER BY p.turn, p.waiting_since, p.tenant_id, p.correlation_id
LIMIT $1;

-- name: OutboxCorrelationLock :one
-- One relay at a time per (tenant, correlation), held to the end of the
-- claiming transaction; a relay that dies releases it with its connection.
-- The first key keeps these locks apart from any other user of advisory
-- locks in the producer's database; the second joins tenant and
-- correlation with a "/", which neither may contain. Two correlations
-- sharing a hash only wait for each other.
SELECT pg_try_advisory_xact_lock(hashtext('hookflow_outbox'), hashtext(sqlc.arg(tenant_id)::text || '/' || sqlc.arg(correlation_id)::text));

-- name: OutboxPendingList :many
SELECT position, tenant_id, id, correlation_id, sequence, endpoint_id, type, data, payload_hash, created_at, attempts, metadata
FROM outbox
WHERE tenant_id = $1 AND correlation_id = $2 AND state = 'pending'
ORDER BY sequence
LIMIT $3;

-- name: OutboxMarkRelayed :exec
UPDATE outbox SET state = 'relayed', relayed_at = now(), last_error = NULL
WHERE position = $1 AND state = 'pending';

-- name: OutboxMarkFailed :exec
UPDATE outbox SET state = 'failed', failure = $2
WHERE position = $1 AND state = 'pending';

-- name: OutboxNoteError :exec
UPDATE outbox SET attempts = attempts + 1, last_error = $2
WHERE position = $1 AND state = 'pending';

-- name: OutboxLag :one
-- Unrelayed rows and the age of the oldest, in seconds.
SELECT count(*) AS pending, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_secs
FROM outbox WHERE state = 'pending';

-- name: OutboxPruneRelayed :execrows
-- In batches, so a large backlog never becomes one long delete.
DELETE FROM outbox WHERE position IN (
    SELECT position FROM outbox
    WHERE state = 'relayed' AND relayed_at < now() - make_interval(secs => $1)
    LIMIT $2
);

-- name: OutboxFailedCount :one
SELECT count(*) FROM outbox WHERE state = 'failed';

-- name: MigrationLock :exec
-- Any constant works; it only has to be the same for every outbox.Migrate.
SELECT pg_advisory_xact_lock(7215346201934520813);

-- name: MigrationTableExists :one
SELECT to_regclass('outbox_schema_migrations') IS NOT NULL;

-- name: MigrationList :many
SELECT version FROM outbox_schema_migrations ORDER BY version;

-- name: MigrationInsert :exec
INSERT INTO outbox_schema_migrations (version, name) VALUES ($1, $2);
