-- name: OperationalSequenceNext :one
-- The next sequence of endpoint $1's operational events, whose correlation
-- is $2 (contract.OperationalCorrelation): 1 the first time. It is past
-- every sequence the correlation's ledger holds (its high-water mark and
-- cursor), so it is free whatever else was stored there: a taken sequence
-- would refuse the event, and with it the change it reports. The row stays
-- locked until the caller's transaction ends, so a concurrent publisher
-- about the same endpoint waits and reads the number after this one, or
-- this one again if the caller rolled back.
WITH taken AS (
    SELECT GREATEST(high_water, next_sequence - 1) AS n FROM correlations WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $2
)
INSERT INTO operational_sequences AS o (endpoint_id, last_sequence)
VALUES ($1, COALESCE((SELECT n FROM taken), 0) + 1)
ON CONFLICT (endpoint_id) DO UPDATE
    SET last_sequence = GREATEST(o.last_sequence, COALESCE((SELECT n FROM taken), 0)) + 1, updated_at = now()
RETURNING last_sequence;

-- name: OperationalSubscribers :many
-- The tenant's endpoints, other than $2 (the endpoint the event is about),
-- subscribed to operational type $1 by a pattern of their own: the rule of
-- EndpointsSubscribed (disabled ones included: paused, their events wait in
-- their lanes), except that every type (NULL or "*") does not take
-- hookflow's events: a producer's receiver that takes every type never
-- asked for them. Any pattern that matches a "hookflow." type otherwise
-- (exact, "hookflow.*", "hookflow.endpoint.*") starts with "hookflow.".
-- At most $3 (contract.MaxSubscribersCeiling): the API refuses more
-- subscribers to hookflow's types than HOOKFLOW_MAX_SUBSCRIBERS
-- (EndpointsOperationalCount), and this holds the event's lanes to what its
-- workflow is sized for should two PATCHes race past that check.
SELECT id FROM endpoints
WHERE tenant_id = sqlc.arg(tenant_id) AND id <> $2 AND deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM unnest(event_types) p
              WHERE p = $1::text OR (p <> '*' AND right(p, 2) = '.*' AND starts_with($1, left(p, -1))))
ORDER BY id
LIMIT $3;

-- name: EndpointsOperationalCount :one
-- The tenant's endpoints other than $1, not deleted, subscribed to any of hookflow's
-- operational types (a pattern starting with "hookflow.", as
-- OperationalSubscribers has them): what HOOKFLOW_MAX_SUBSCRIBERS caps for
-- operational events, which cannot be refused at accept.
SELECT count(*) FROM endpoints
WHERE tenant_id = sqlc.arg(tenant_id) AND id <> $1 AND deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM unnest(event_types) p WHERE starts_with(p, 'hookflow.'));

-- name: EventTypeGet :one
-- The event's type: a dead letter's operational event names it, and a dead
-- letter of an operational event publishes none.
SELECT type FROM events WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1;
