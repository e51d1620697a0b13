-- name: MigrationsTableCreate
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: MigrationsLock
-- Any constant works; it only has to be the same for every hookflow migrate.
SELECT pg_advisory_xact_lock(727001);

-- name: MigrationsApplied
SELECT version FROM schema_migrations ORDER BY version;

-- name: MigrationsRecord
INSERT INTO schema_migrations (version, name) VALUES ($1, $2);

-- name: MigrationsTableExists
SELECT to_regclass('schema_migrations') IS NOT NULL;
