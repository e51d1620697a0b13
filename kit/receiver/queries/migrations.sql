-- Bookkeeping for receiver.Migrate. The kit keeps its own version table so it
-- never collides with the application's migration tool.

-- name: MigrationLock
-- Serialises concurrent Migrate calls (several replicas starting at once);
-- released at commit. The key is an arbitrary constant owned by the kit.
SELECT pg_advisory_xact_lock(7215346201934520811);

-- name: MigrationTableCreate
CREATE TABLE IF NOT EXISTS receiver_schema_migrations (
    version    bigint      PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: MigrationTableExists
SELECT to_regclass('receiver_schema_migrations') IS NOT NULL;

-- name: MigrationList
SELECT version FROM receiver_schema_migrations ORDER BY version;

-- name: MigrationInsert
INSERT INTO receiver_schema_migrations (version, name) VALUES ($1, $2);
