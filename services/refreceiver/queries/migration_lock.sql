-- name: MigrationLock :exec
-- Serialises concurrent Migrate calls; released at commit.
SELECT pg_advisory_xact_lock(7215346201934520812);
