-- name: MigrationTableExists :one
SELECT to_regclass('refreceiver_schema_migrations') IS NOT NULL;
