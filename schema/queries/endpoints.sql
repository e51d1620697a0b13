-- name: EndpointInsert :one
-- An empty type is the column's default, a webhook.
INSERT INTO endpoints (tenant_id, id, url, secret, event_types, headers, recovery_window_ms, timeout_ms, rate_limit,
                       circuit_failure_threshold, auto_replay, disable_after_ms,
                       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public, type, config, credentials, filter)
VALUES (sqlc.arg(tenant_id), $1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE($10::boolean, false), $11, $12, $13, $14, $15,
        COALESCE($16::boolean, false), COALESCE(NULLIF(sqlc.arg(type)::text, ''), 'webhook'),
        sqlc.narg(config)::jsonb, sqlc.narg(credentials)::jsonb, sqlc.narg(filter)::json)
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types,
       headers, recovery_window_ms, timeout_ms, rate_limit, circuit_failure_threshold, auto_replay, disable_after_ms,
       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public, type, config, credentials, filter;

-- name: EndpointCreateLock :exec
-- Serializes endpoint creation and changes of event_types within the
-- tenant (a lock for the transaction), so that the counts below, in
-- statements of their own, see every endpoint of the tenant created or
-- changed before: two creates at a cap (max_endpoints,
-- HOOKFLOW_MAX_SUBSCRIBERS) cannot both pass it. Two tenants' creates may
-- share a lock (a hash), which only makes one wait.
SELECT pg_advisory_xact_lock(3303, hashtext(sqlc.arg(tenant_id)::text));

-- name: EndpointsCount :one
-- The tenant's endpoints not deleted: what max_endpoints caps.
SELECT count(*) FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND deleted_at IS NULL;

-- name: EndpointsPatterns :many
-- The event_types of the tenant's endpoints other than $1, not deleted
-- (disabled ones too: Route counts them): what a new list of patterns is
-- judged against for HOOKFLOW_MAX_SUBSCRIBERS. Bounded by max_endpoints.
SELECT event_types FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND deleted_at IS NULL AND id <> $1;

-- name: EndpointGet :one
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types,
       headers, recovery_window_ms, timeout_ms, rate_limit, circuit_failure_threshold, auto_replay, disable_after_ms,
       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public, type, config, credentials, filter
FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1 AND deleted_at IS NULL;

-- name: EndpointUpdate :one
-- NULL leaves a field as it is, but for event_types, where NULL is every
-- type: set_event_types says whether event_types replaces them; and for the
-- delivery settings, where NULL is the server's: settings is a bit set of
-- those replaced (1 headers, 2 recovery_window_ms, 4 timeout_ms,
-- 8 rate_limit, 16 circuit_failure_threshold, 32 auto_replay,
-- 64 disable_after_ms, 128 circuit_failure_rate, 256 circuit_window_ms,
-- 512 circuit_min_attempts, 1024 max_in_flight, 2048 url_path_public,
-- 4096 filter).
-- Re-enabling clears the reason it was disabled. A broker destination's
-- config comes with its url (the canonical address made from it), and its
-- credentials are replaced whole; NULL leaves either as it is.
UPDATE endpoints SET
    url             = COALESCE(sqlc.narg(url)::text, url),
    config          = COALESCE(sqlc.narg(config)::jsonb, config),
    credentials     = COALESCE(sqlc.narg(credentials)::jsonb, credentials),
    event_types     = CASE WHEN sqlc.arg(set_event_types)::boolean THEN sqlc.narg(event_types)::text[] ELSE event_types END,
    headers            = CASE WHEN sqlc.arg(settings)::int & 1 <> 0 THEN sqlc.narg(headers)::jsonb ELSE headers END,
    recovery_window_ms = CASE WHEN sqlc.arg(settings)::int & 2 <> 0 THEN sqlc.narg(recovery_window_ms)::bigint ELSE recovery_window_ms END,
    timeout_ms         = CASE WHEN sqlc.arg(settings)::int & 4 <> 0 THEN sqlc.narg(timeout_ms)::bigint ELSE timeout_ms END,
    rate_limit         = CASE WHEN sqlc.arg(settings)::int & 8 <> 0 THEN sqlc.narg(rate_limit)::double precision ELSE rate_limit END,
    circuit_failure_threshold = CASE WHEN sqlc.arg(settings)::int & 16 <> 0 THEN sqlc.narg(circuit_failure_threshold)::integer ELSE circuit_failure_threshold END,
    auto_replay               = CASE WHEN sqlc.arg(settings)::int & 32 <> 0 THEN COALESCE(sqlc.narg(auto_replay)::boolean, false) ELSE auto_replay END,
    disable_after_ms          = CASE WHEN sqlc.arg(settings)::int & 64 <> 0 THEN sqlc.narg(disable_after_ms)::bigint ELSE disable_after_ms END,
    circuit_failure_rate      = CASE WHEN sqlc.arg(settings)::int & 128 <> 0 THEN sqlc.narg(circuit_failure_rate)::integer ELSE circuit_failure_rate END,
    circuit_window_ms         = CASE WHEN sqlc.arg(settings)::int & 256 <> 0 THEN sqlc.narg(circuit_window_ms)::bigint ELSE circuit_window_ms END,
    circuit_min_attempts      = CASE WHEN sqlc.arg(settings)::int & 512 <> 0 THEN sqlc.narg(circuit_min_attempts)::integer ELSE circuit_min_attempts END,
    max_in_flight             = CASE WHEN sqlc.arg(settings)::int & 1024 <> 0 THEN sqlc.narg(max_in_flight)::integer ELSE max_in_flight END,
    url_path_public           = CASE WHEN sqlc.arg(settings)::int & 2048 <> 0 THEN COALESCE(sqlc.narg(url_path_public)::boolean, false) ELSE url_path_public END,
    filter                    = CASE WHEN sqlc.arg(settings)::int & 4096 <> 0 THEN sqlc.narg(filter)::json ELSE filter END,
    disabled        = COALESCE(sqlc.narg(disabled)::boolean, disabled),
    disabled_reason = CASE WHEN sqlc.narg(disabled)::boolean IS NULL THEN disabled_reason
                           WHEN sqlc.narg(disabled)::boolean THEN COALESCE(sqlc.narg(disabled_reason)::text, 'disabled by operator')
                           ELSE NULL END,
    updated_at      = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND deleted_at IS NULL
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types,
       headers, recovery_window_ms, timeout_ms, rate_limit, circuit_failure_threshold, auto_replay, disable_after_ms,
       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public, type, config, credentials, filter;

-- name: EndpointLockURL :one
-- The endpoint's URL, custom headers, url_path_public and whether it has
-- credentials, its row locked for the rest of the transaction: a change of
-- URL is judged (does it keep the origin the headers were set for? does a
-- broker's new address come with credentials of its own?) against the row
-- it replaces, not against a read another PATCH may have overtaken.
SELECT url, headers, url_path_public, COALESCE(credentials <> '{}'::jsonb, false)::boolean AS has_credentials FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1 AND deleted_at IS NULL FOR UPDATE;

-- name: EndpointURLChangeInsert :exec
INSERT INTO endpoint_url_changes (endpoint_id, changed_by_id, changed_by, old_url, new_url, headers_replaced)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: EndpointURLChangesList :many
-- The endpoint's URL changes, newest first, up to $2: none when the
-- endpoint is not the tenant's.
SELECT c.id, c.changed_at, c.changed_by_id, c.changed_by, c.old_url, c.new_url, c.headers_replaced
FROM endpoint_url_changes c JOIN endpoints e ON e.id = c.endpoint_id
WHERE e.tenant_id = sqlc.arg(tenant_id) AND c.endpoint_id = $1 ORDER BY c.id DESC LIMIT $2;

-- name: EndpointRotateSecret :one
-- The current secret joins the previous ones, to sign for $3 seconds more;
-- previous ones whose grace has ended are dropped.
UPDATE endpoints SET
    previous_secrets = COALESCE((
        SELECT jsonb_agg(p ORDER BY p->>'expires_at')
        FROM jsonb_array_elements(previous_secrets) p
        WHERE (p->>'expires_at')::timestamptz > now()), '[]'::jsonb)
        || jsonb_build_array(jsonb_build_object('secret', secret, 'expires_at', now() + make_interval(secs => $3))),
    secret     = $2,
    updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1 AND deleted_at IS NULL
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types,
       headers, recovery_window_ms, timeout_ms, rate_limit, circuit_failure_threshold, auto_replay, disable_after_ms,
       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public, type, config, credentials, filter;

-- name: EndpointDisable :exec
UPDATE endpoints SET disabled = true, disabled_reason = $2, updated_at = now() WHERE id = $1;

-- name: EndpointsList :many
-- A page of the tenant's, in id order, after $1 ('' for the first); only
-- those of only_endpoints when it is not NULL (a portal session limited to
-- them).
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types,
       headers, recovery_window_ms, timeout_ms, rate_limit, circuit_failure_threshold, auto_replay, disable_after_ms,
       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public, type, config, credentials, filter
FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND id > $1 AND deleted_at IS NULL
  AND (sqlc.narg(only_endpoints)::text[] IS NULL OR id = ANY(sqlc.narg(only_endpoints)::text[]))
ORDER BY id LIMIT $2;

-- name: EndpointsSubscribed :many
-- The ids of the tenant's endpoints whose event_types match type $1, in id order,
-- disabled ones included: a disabled endpoint is paused, and the events of
-- its types wait in its lanes until it is enabled (its heads dead-lettered
-- 'endpoint disabled', which enabling replays), so that none is lost and the
-- next envelope's previous_sequence is the true one. Only the ids and
-- filters: routing needs nothing else, and the rows carry secrets and
-- headers. At most $2
-- (the cap on subscribers plus one, so the caller tells "at the cap" from
-- "past it" without reading every match). The same rule
-- as eventtypes.Matches: NULL is every type, "*" too, "prefix.*" every type
-- starting with "prefix." (compared as text, not LIKE, so % and _ in a
-- prefix are themselves), anything else that exact type.
SELECT id, filter
FROM endpoints
WHERE tenant_id = sqlc.arg(tenant_id) AND deleted_at IS NULL
  AND (event_types IS NULL
       OR sqlc.arg(event_type)::text = ANY (event_types)
       OR EXISTS (SELECT 1 FROM unnest(event_types) p
                  WHERE p = '*' OR (right(p, 2) = '.*' AND starts_with(sqlc.arg(event_type), left(p, -1)))))
ORDER BY id
LIMIT sqlc.arg(max_endpoints);

-- name: EndpointRateReserve :one
-- Reserves the endpoint's next send slot for a rate limit of one per $2
-- seconds, and answers it with the database's clock (the one clock every
-- worker shares): the slot is max(next_slot, now), and next_slot moves one
-- interval past it, in one statement, so concurrent attempts on any worker
-- get distinct slots in the order they reserve. A slot in the past (the
-- endpoint was idle) is not banked: an idle endpoint gets no burst.
-- A reservation whose slot is later than now (the attempt waits its turn)
-- is counted in throttled by the same statement (migration 012). now is
-- read once, so the count and the wait the caller computes agree.
WITH clock AS (SELECT clock_timestamp() AS now)
INSERT INTO endpoint_rate_slots AS s (endpoint_id, next_slot)
SELECT $1, clock.now + make_interval(secs => $2) FROM clock
ON CONFLICT (endpoint_id) DO UPDATE
    SET next_slot = GREATEST(s.next_slot, (SELECT now FROM clock)) + make_interval(secs => $2),
        throttled = s.throttled + (s.next_slot > (SELECT now FROM clock))::int
RETURNING (next_slot - make_interval(secs => $2))::timestamptz AS slot, (SELECT now FROM clock)::timestamptz AS now;

-- name: EndpointRateSlotsReset :exec
-- Endpoint $1's rate_limit is about to become $2 (NULL: none): when that is
-- a change, the slots reserved under the old rate are given up (next_slot
-- back to now: the next attempt reserves at the new rate, with no burst
-- banked) and its lanes are asked to wake (migration 016's stamp, which the
-- wake sweep signals; a row is made for an endpoint whose circuit never
-- failed, closed as CircuitEnsure makes it), so that a head sleeping on a
-- slot of the old rate reserves again now. Run in the update's transaction
-- (EndpointUpdate), the endpoint's row locked, so a crash loses neither and
-- two PATCHes of the rate each see the other's.
WITH changed AS (
    SELECT id FROM endpoints
    WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND deleted_at IS NULL AND rate_limit IS DISTINCT FROM sqlc.narg(rate_limit)::double precision
    FOR UPDATE
), slots AS (
    UPDATE endpoint_rate_slots SET next_slot = LEAST(next_slot, clock_timestamp())
    WHERE endpoint_id IN (SELECT id FROM changed)
)
INSERT INTO endpoint_circuits AS c (endpoint_id, tenant_id, wake_requested_at)
SELECT id, sqlc.arg(tenant_id), clock_timestamp() FROM changed
ON CONFLICT (endpoint_id) DO UPDATE SET wake_requested_at = clock_timestamp(), updated_at = now();

-- name: EndpointDisableIfEnabled :execrows
-- Disables an endpoint that is enabled (the circuit breaker's auto-disable:
-- an operator's own reason is not overwritten).
UPDATE endpoints SET disabled = true, disabled_reason = $2, updated_at = now() WHERE id = $1 AND NOT disabled;

-- name: EndpointDisabledForShare :one
-- Whether endpoint $1 is disabled, its row locked against a change until the
-- transaction ends (DeadLetterUpsert: a PATCH that enables the endpoint waits
-- for the dead letter to commit, or has committed before this reads it).
SELECT disabled FROM endpoints WHERE id = $1 FOR SHARE;

-- name: EndpointDelete :one
-- Deletes endpoint $1 for good, as $2 (the key's name): stamped rather than
-- removed (its deliveries, attempts and dead letters refer to it), and
-- disabled with it, so that the breaker's passes, the auto-replay and the
-- attempts under way treat it as a disabled one until each finds it
-- deleted. Its circuit, if it has one, is asked to wake the lanes it holds
-- (migration 016's stamp, which the wake sweep signals), so that a head
-- waiting on an open circuit looks now, finds it deleted and ends skipped.
-- No row when there is none such, or it is deleted already.
WITH deleted AS (
    UPDATE endpoints SET deleted_at = now(), deleted_by = $2, disabled = true,
        disabled_reason = 'deleted by ' || $2, updated_at = now()
    WHERE endpoints.tenant_id = sqlc.arg(tenant_id) AND id = $1 AND deleted_at IS NULL
    RETURNING id
), woken AS (
    UPDATE endpoint_circuits SET wake_requested_at = clock_timestamp(), updated_at = now()
    WHERE endpoint_id IN (SELECT id FROM deleted)
)
SELECT id FROM deleted;

-- name: EndpointsDeletedOpen :many
-- Deleted endpoints that still have dead letters open, with who deleted
-- them: the sweep skips those (a dead letter written while the delete ran,
-- or left by an API process that stopped half way), of every tenant, in
-- turn: each tenant's by id, and every tenant's first before anyone's
-- second, so a tenant with more such endpoints than a batch delays only
-- itself. The ranking reads the deleted endpoints (endpoints_deleted_idx),
-- as the first-come order did whenever fewer than a batch had one open.
SELECT o.tenant_id, o.id, o.deleted_by
FROM (
    SELECT e.tenant_id, e.id, e.deleted_by, row_number() OVER (PARTITION BY e.tenant_id ORDER BY e.id) AS turn
    FROM endpoints e
    WHERE e.deleted_at IS NOT NULL
      AND EXISTS (SELECT 1 FROM dead_letters d WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.id AND d.status = 'open')
) o
ORDER BY o.turn, o.id
LIMIT $1;

-- name: EndpointLeaseLock :exec
-- Locks endpoint $1's row of endpoint_in_flight (made on its first use),
-- first in the transaction of EndpointLeaseTake, so that the attempts of
-- every worker count the leases one after another: each counts in a
-- statement of its own, whose snapshot sees the lease the one before it
-- committed.
INSERT INTO endpoint_in_flight AS f (endpoint_id) VALUES ($1)
ON CONFLICT (endpoint_id) DO UPDATE SET endpoint_id = f.endpoint_id;

-- name: EndpointLeaseTake :one
-- Takes one of endpoint $1's max_in_flight ($3) places for attempts in
-- flight, as owner $2 (the attempt), until $4 seconds from now (a little
-- past the attempt's HTTP timeout: a lease a crashed worker never gave
-- back frees itself by then). Expired leases are dropped first. The same
-- owner taking it again (a retried try) renews its own. Answers whether
-- it was taken, and how many leases others hold.
WITH expired AS (
    DELETE FROM endpoint_leases x WHERE x.endpoint_id = $1 AND x.expires_at <= clock_timestamp()
    RETURNING x.owner
), held AS (
    SELECT count(*) AS n FROM endpoint_leases l
    WHERE l.endpoint_id = $1 AND l.owner <> $2 AND l.owner NOT IN (SELECT owner FROM expired)
), taken AS (
    INSERT INTO endpoint_leases (endpoint_id, owner, expires_at)
    SELECT $1, $2, clock_timestamp() + make_interval(secs => $4) FROM held WHERE held.n < $3::bigint
    ON CONFLICT (endpoint_id, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at
    RETURNING owner
)
SELECT EXISTS (SELECT 1 FROM taken), (SELECT n FROM held);

-- name: EndpointLeaseRelease :exec
-- The attempt is over: its place is free for the next.
DELETE FROM endpoint_leases WHERE endpoint_id = $1 AND owner = $2;

-- name: EndpointTenant :one
-- The tenant of endpoint $1, not deleted: an operator's command names an
-- endpoint by its id alone (ids are unique across tenants).
SELECT tenant_id FROM endpoints WHERE id = $1 AND deleted_at IS NULL;

-- name: EndpointDeliveries :many
-- Every delivery of the endpoint, lane by lane in sequence order: what the
-- conformance check of a broker destination compares the broker's content
-- with. An operator's command, one pass over the endpoint's deliveries
-- that the retention keeps.
SELECT event_id, correlation_id, sequence, state FROM deliveries
WHERE tenant_id = sqlc.arg(tenant_id) AND endpoint_id = $1 ORDER BY correlation_id, sequence;
