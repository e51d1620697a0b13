-- The table the migration runner (kit/migrate) records the reference receiver's applied
-- migrations in, created by it before it reads them. Not a migration: it
-- holds them. sqlc reads it as schema, for the ledger's queries.
CREATE TABLE IF NOT EXISTS refreceiver_schema_migrations (
    version    bigint      PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
