-- name: PortalSessionInsert :one
-- A new session of tenant $1, its code good until code_expires_at.
INSERT INTO portal_sessions (tenant_id, id, actor, capabilities, endpoints_limited, return_url, code_hash, code_expires_at, expires_at, created_by)
VALUES (sqlc.arg(tenant_id), sqlc.arg(id), sqlc.arg(actor), sqlc.arg(capabilities), sqlc.arg(endpoints_limited), sqlc.arg(return_url),
    sqlc.arg(code_hash), sqlc.arg(code_expires_at), sqlc.arg(expires_at), sqlc.arg(created_by))
RETURNING tenant_id, id, actor, capabilities, endpoints_limited, return_url, code_expires_at, code_used_at, expires_at, revoked_at,
    created_by, created_at;

-- name: PortalSessionEndpointsInsert :exec
-- Limits session $2 of tenant $1 to endpoints $3, each one of the tenant's
-- not deleted; the caller checks the count (PortalSessionEndpointsKnown).
INSERT INTO portal_session_endpoints (tenant_id, session_id, endpoint_id)
SELECT sqlc.arg(tenant_id), sqlc.arg(session_id), e.id FROM endpoints e
WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.id = ANY(sqlc.arg(endpoint_ids)::text[]) AND e.deleted_at IS NULL;

-- name: PortalEndpointsKnown :many
-- Which of endpoints $2 are tenant $1's, not deleted.
SELECT id FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(endpoint_ids)::text[]) AND deleted_at IS NULL;

-- name: PortalSessionExchange :one
-- Exchanges code $1 for token $2: once, within its minute, and only while
-- the session stands and its tenant is enabled. One statement, so that of
-- two processes exchanging one code, one wins. Binds no tenant: the code
-- is what tells the tenant (as a key's hash does, APIKeyByHash).
UPDATE portal_sessions s SET code_used_at = now(), token_hash = sqlc.arg(token_hash)
FROM tenants t
WHERE s.code_hash = sqlc.arg(code_hash) AND s.code_used_at IS NULL AND s.code_expires_at > now()
  AND s.revoked_at IS NULL AND s.expires_at > now() AND t.id = s.tenant_id AND NOT t.disabled
RETURNING s.tenant_id, s.id, s.actor, s.capabilities, s.endpoints_limited, s.return_url, s.code_expires_at, s.code_used_at,
    s.expires_at, s.revoked_at, s.created_by, s.created_at;

-- name: PortalSessionByCode :one
-- Why code $1 was not exchanged: used, expired, revoked, or its tenant
-- disabled.
SELECT s.tenant_id, s.id, s.actor, s.capabilities, s.endpoints_limited, s.return_url, s.code_expires_at, s.code_used_at,
    s.expires_at, s.revoked_at, s.created_by, s.created_at, t.disabled AS tenant_disabled
FROM portal_sessions s JOIN tenants t ON t.id = s.tenant_id
WHERE s.code_hash = $1;

-- name: PortalSessionByToken :one
-- The session token $1 belongs to, revoked and expired ones included (the
-- API tells those apart), with the endpoints it is limited to, whether it
-- has expired on the database's clock, and whether its tenant is disabled.
SELECT s.tenant_id, s.id, s.actor, s.capabilities, s.endpoints_limited, s.return_url, s.code_expires_at, s.code_used_at,
    s.expires_at, s.revoked_at, s.created_by, s.created_at,
    (s.expires_at <= now())::bool AS expired, t.disabled AS tenant_disabled,
    ARRAY(SELECT pe.endpoint_id FROM portal_session_endpoints pe
          WHERE pe.tenant_id = s.tenant_id AND pe.session_id = s.id ORDER BY pe.endpoint_id)::text[] AS endpoint_ids
FROM portal_sessions s JOIN tenants t ON t.id = s.tenant_id
WHERE s.token_hash = $1;

-- name: PortalSessionEndpoints :many
-- The endpoints session $2 of tenant $1 is limited to.
SELECT endpoint_id FROM portal_session_endpoints WHERE tenant_id = $1 AND session_id = $2 ORDER BY endpoint_id;

-- name: PortalSessionRevoke :one
-- Revokes session $2 of tenant $1; revoking twice keeps the first time.
UPDATE portal_sessions SET revoked_at = COALESCE(revoked_at, now())
WHERE tenant_id = $1 AND id = $2
RETURNING tenant_id, id, actor, capabilities, endpoints_limited, return_url, code_expires_at, code_used_at, expires_at, revoked_at,
    created_by, created_at;

-- name: PortalSessionsRevokeActor :many
-- Revokes every standing session of actor $2 of tenant $1, exchanged or
-- not, and answers their ids.
UPDATE portal_sessions SET revoked_at = now()
WHERE tenant_id = $1 AND actor = $2 AND revoked_at IS NULL
RETURNING id;
