-- name: MigrationInsert :exec
INSERT INTO refreceiver_schema_migrations (version, name) VALUES ($1, $2);
