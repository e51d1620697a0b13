-- name: MigrationsLock :exec
-- Any constant works; it only has to be the same for every hookflow migrate.
SELECT pg_advisory_xact_lock(727001);

-- name: MigrationsApplied :many
SELECT version FROM schema_migrations ORDER BY version;

-- name: MigrationsRecord :exec
INSERT INTO schema_migrations (version, name) VALUES ($1, $2);

-- name: MigrationsTableExists :one
SELECT to_regclass('schema_migrations') IS NOT NULL;
