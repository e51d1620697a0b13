-- name: APIKeyInsert :one
-- tenant_id NULL is an operator key; a tenant's key reaches only it.
INSERT INTO api_keys (id, name, scopes, key_hash, tenant_id) VALUES ($1, $2, $3, $4, sqlc.narg(tenant_id))
RETURNING id, name, scopes, created_at, revoked_at, tenant_id;

-- name: APIKeyByHash :one
-- The key a request presents, unless it is revoked (key_hash is unique),
-- with whether its tenant is disabled (a disabled tenant's keys are
-- refused).
SELECT k.id, k.name, k.scopes, k.created_at, k.revoked_at, k.tenant_id, COALESCE(t.disabled, false)::bool AS tenant_disabled
FROM api_keys k LEFT JOIN tenants t ON t.id = k.tenant_id
WHERE k.key_hash = $1 AND k.revoked_at IS NULL;

-- name: APIKeyList :many
SELECT id, name, scopes, created_at, revoked_at, tenant_id FROM api_keys ORDER BY created_at, id;

-- name: APIKeyRevoke :one
-- Revoking twice keeps the first time.
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1
RETURNING id, name, scopes, created_at, revoked_at, tenant_id;
