-- name: CatalogLock :exec
-- Serializes changes to one tenant's catalog (a lock for the
-- transaction), so that the count CatalogCount reads before an insert
-- sees every entry created before it: two PUTs at the cap cannot both pass
-- it. Two tenants may share a lock (a hash), which only makes one wait.
SELECT pg_advisory_xact_lock(3604, hashtext(sqlc.arg(tenant_id)::text));

-- name: CatalogCount :one
SELECT count(*) FROM event_types WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CatalogUpsert :one
-- Creates the entry at version 1, or replaces it and raises its version
-- when what it says changes; an entry that says the same is left as it is
-- (version and updated_at kept). created says which it was; changed
-- whether a row was written (false: unchanged). The schema and example
-- are canonical text (catalog.Check), so the same content is the same
-- text, compared as text: json has no equality of its own.
INSERT INTO event_types AS t (tenant_id, name, description, schema, example)
VALUES (sqlc.arg(tenant_id), sqlc.arg(name), sqlc.arg(description), sqlc.arg(schema)::json, sqlc.narg(example)::json)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    description = excluded.description, schema = excluded.schema, example = excluded.example,
    version = t.version + 1, updated_at = now()
WHERE (t.description, t.schema::text) IS DISTINCT FROM (excluded.description, excluded.schema::text)
   OR t.example::text IS DISTINCT FROM excluded.example::text
RETURNING name, description, schema, example, version, created_at, updated_at, (xmax = 0)::boolean AS created;

-- name: CatalogGet :one
SELECT name, description, schema, example, version, created_at, updated_at
FROM event_types WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name);

-- name: CatalogSchema :one
-- What acceptance reads for each event: the schema and its version only.
SELECT schema, version FROM event_types WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name);

-- name: CatalogList :many
-- A page of the catalog in name order, from the first name after after
-- ('' for the first page).
SELECT name, description, schema, example, version, created_at, updated_at
FROM event_types WHERE tenant_id = sqlc.arg(tenant_id) AND name > sqlc.arg(after)::text
ORDER BY name LIMIT sqlc.arg(max_rows);

-- name: CatalogDelete :one
DELETE FROM event_types WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name)
RETURNING name, description, schema, example, version, created_at, updated_at;
