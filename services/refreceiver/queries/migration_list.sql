-- name: MigrationList :many
SELECT version FROM refreceiver_schema_migrations ORDER BY version;
