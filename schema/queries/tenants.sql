-- name: TenantPut :one
-- Creates tenant $1, or replaces its name, metadata and limits (a PUT:
-- what the body leaves out goes back to its default); its disabled flag
-- and creation time stay. created says which.
INSERT INTO tenants AS t (id, name, metadata, events_per_second, max_endpoints, max_recovery_window_ms)
VALUES ($1, $2, $3, sqlc.narg(events_per_second), sqlc.narg(max_endpoints), sqlc.narg(max_recovery_window_ms))
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, metadata = EXCLUDED.metadata,
    events_per_second = EXCLUDED.events_per_second, max_endpoints = EXCLUDED.max_endpoints,
    max_recovery_window_ms = EXCLUDED.max_recovery_window_ms, updated_at = now()
RETURNING id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at,
    (xmax = 0)::bool AS created;

-- name: TenantGet :one
SELECT id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at
FROM tenants WHERE id = $1;

-- name: TenantsList :many
-- A page in id order, after $1 ('' for the first).
SELECT id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at
FROM tenants WHERE id > $1 ORDER BY id LIMIT $2;

-- name: TenantSetDisabled :one
-- Disables or enables tenant $1: a disabled tenant's keys are refused
-- (APIKeyByHash).
UPDATE tenants SET disabled = $2, updated_at = now() WHERE id = $1
RETURNING id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at;
