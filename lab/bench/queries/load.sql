-- The throughput scenarios' check of hookflow's own ledger, read once the
-- rounds are over (never while one is measured).

-- name: LanesDeliveredCheck :one
-- How the deliveries of correlations $1 stand, lane by lane: all of them,
-- those not delivered, those whose first attempt started before the
-- sequence before them in their lane was delivered (a lane releases a
-- sequence only once its predecessor is delivered, so anything else was
-- sent out of order, which the receiver's parking would hide from its
-- ledger), and those with more than one delivered attempt (sent again
-- after a 2xx: the receiver answers "already processed", so this too is
-- invisible in its ledger). Attempt and delivery times are the worker's
-- clock, one machine's.
WITH d AS (
    SELECT d.tenant_id, d.event_id, d.endpoint_id, d.state,
           lag(d.delivered_at) OVER (PARTITION BY d.tenant_id, d.correlation_id, d.endpoint_id ORDER BY d.sequence) AS before
    FROM deliveries d WHERE d.correlation_id = ANY($1::text[])
), a AS (
    SELECT a.tenant_id, a.event_id, a.endpoint_id, min(a.started_at) AS first,
           count(*) FILTER (WHERE a.outcome = 'delivered') AS delivered
    FROM delivery_attempts a JOIN d USING (tenant_id, event_id, endpoint_id)
    GROUP BY a.tenant_id, a.event_id, a.endpoint_id
)
SELECT count(*) AS deliveries,
       count(*) FILTER (WHERE d.state <> 'delivered') AS not_delivered,
       count(*) FILTER (WHERE a.first < d.before) AS out_of_order,
       count(*) FILTER (WHERE a.delivered > 1) AS delivered_twice
FROM d LEFT JOIN a USING (tenant_id, event_id, endpoint_id);
