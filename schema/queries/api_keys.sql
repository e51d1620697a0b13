-- name: APIKeyInsert :one
INSERT INTO api_keys (id, name, scopes, key_hash) VALUES ($1, $2, $3, $4)
RETURNING id, name, scopes, created_at, revoked_at;

-- name: APIKeyByHash :one
-- The key a request presents, unless it is revoked (key_hash is unique).
SELECT id, name, scopes, created_at, revoked_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL;

-- name: APIKeyList :many
SELECT id, name, scopes, created_at, revoked_at FROM api_keys ORDER BY created_at, id;

-- name: APIKeyRevoke :one
-- Revoking twice keeps the first time.
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1
RETURNING id, name, scopes, created_at, revoked_at;
