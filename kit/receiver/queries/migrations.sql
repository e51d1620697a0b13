-- Bookkeeping for receiver.Migrate. The kit keeps its own version table so it
-- never collides with the application's migration tool.

-- name: MigrationLock :exec
-- Serialises concurrent Migrate calls (several replicas starting at once);
-- released at commit. The key is an arbitrary constant owned by the kit.
SELECT pg_advisory_xact_lock(7215346201934520811);

-- name: MigrationTableExists :one
SELECT to_regclass('receiver_schema_migrations') IS NOT NULL;

-- name: MigrationList :many
SELECT version FROM receiver_schema_migrations ORDER BY version;

-- name: MigrationInsert :exec
INSERT INTO receiver_schema_migrations (version, name) VALUES ($1, $2);
