-- name: TenantPut :one
-- Creates tenant $1, or replaces its name, metadata and limits (a PUT:
-- what the body leaves out goes back to its default); its disabled flag
-- and creation time stay. created says which.
INSERT INTO tenants AS t (id, name, metadata, events_per_second, max_endpoints, max_recovery_window_ms, deliveries_per_second, allow_private_targets,
    portal_origins)
VALUES ($1, $2, $3, sqlc.narg(events_per_second), sqlc.narg(max_endpoints), sqlc.narg(max_recovery_window_ms),
    sqlc.narg(deliveries_per_second), sqlc.narg(allow_private_targets), sqlc.arg(portal_origins))
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, metadata = EXCLUDED.metadata,
    events_per_second = EXCLUDED.events_per_second, max_endpoints = EXCLUDED.max_endpoints,
    max_recovery_window_ms = EXCLUDED.max_recovery_window_ms, deliveries_per_second = EXCLUDED.deliveries_per_second,
    allow_private_targets = EXCLUDED.allow_private_targets, portal_origins = EXCLUDED.portal_origins, updated_at = now()
RETURNING id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at,
    deliveries_per_second, allow_private_targets, portal_origins,
    (xmax = 0)::bool AS created;

-- name: TenantGet :one
SELECT id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at,
    deliveries_per_second, allow_private_targets, portal_origins
FROM tenants WHERE id = $1;

-- name: TenantsList :many
-- A page in id order, after $1 ('' for the first).
SELECT id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at,
    deliveries_per_second, allow_private_targets, portal_origins
FROM tenants WHERE id > $1 ORDER BY id LIMIT $2;

-- name: TenantSetDisabled :one
-- Disables or enables tenant $1: a disabled tenant's keys are refused
-- (APIKeyByHash), and its deliveries wait (DeliveryStartAttempt). Enabling
-- it asks every lane of its endpoints to wake (migration 016's stamp, which
-- the wake sweep signals), so that the heads held while it was disabled
-- send now rather than when their timers say.
UPDATE tenants SET disabled = $2, updated_at = now() WHERE id = $1
RETURNING id, name, metadata, disabled, events_per_second, max_endpoints, max_recovery_window_ms, created_at, updated_at,
    deliveries_per_second, allow_private_targets, portal_origins;

-- name: TenantWakeLanes :exec
-- Stamps a wake on every endpoint of tenant $1 not deleted (made closed,
-- as CircuitEnsure makes it, for an endpoint whose circuit never failed).
INSERT INTO endpoint_circuits AS c (endpoint_id, tenant_id, wake_requested_at)
SELECT e.id, e.tenant_id, clock_timestamp() FROM endpoints e WHERE e.tenant_id = $1 AND e.deleted_at IS NULL
ON CONFLICT (endpoint_id) DO UPDATE SET wake_requested_at = clock_timestamp(), updated_at = now();

-- name: TenantRateReserve :one
-- Reserves tenant $1's next send slot under a rate of one per $2 seconds
-- (its deliveries_per_second), on the database's clock, as
-- EndpointRateReserve does an endpoint's.
WITH clock AS (SELECT clock_timestamp() AS now)
INSERT INTO tenant_rate_slots AS s (tenant_id, next_slot)
SELECT $1, clock.now + make_interval(secs => $2) FROM clock
ON CONFLICT (tenant_id) DO UPDATE
    SET next_slot = GREATEST(s.next_slot, (SELECT now FROM clock)) + make_interval(secs => $2),
        throttled = s.throttled + (s.next_slot > (SELECT now FROM clock))::int
RETURNING (next_slot - make_interval(secs => $2))::timestamptz AS slot, (SELECT now FROM clock)::timestamptz AS now;

-- name: TenantRateSlotsReset :exec
-- Tenant $1's deliveries_per_second is about to become $2 (NULL: none):
-- when that is a change, the slots reserved under the old rate are given
-- up and every lane of its endpoints is asked to wake, as
-- EndpointRateSlotsReset does for an endpoint's rate_limit. Run in the
-- PUT's transaction, the tenant's row locked.
WITH changed AS (
    SELECT t.id AS tenant_id FROM tenants t
    WHERE t.id = sqlc.arg(id) AND t.deliveries_per_second IS DISTINCT FROM sqlc.narg(deliveries_per_second)::double precision
    FOR UPDATE
), slots AS (
    UPDATE tenant_rate_slots SET next_slot = LEAST(next_slot, clock_timestamp())
    WHERE tenant_id IN (SELECT tenant_id FROM changed)
)
INSERT INTO endpoint_circuits AS c (endpoint_id, tenant_id, wake_requested_at)
SELECT e.id, e.tenant_id, clock_timestamp() FROM endpoints e
WHERE e.tenant_id IN (SELECT tenant_id FROM changed) AND e.deleted_at IS NULL
ON CONFLICT (endpoint_id) DO UPDATE SET wake_requested_at = clock_timestamp(), updated_at = now();
