-- name: CorrelationLaneAtAny :one
-- Whether correlation $1 has a lane at any of endpoints $2: a lane's row
-- (something finished there), or a delivery not finished (the lane's open
-- head, by deliveries_pending_idx). A portal session limited to endpoints
-- reaches only such correlations.
SELECT EXISTS (SELECT 1 FROM lanes l
               WHERE l.tenant_id = sqlc.arg(tenant_id) AND l.correlation_id = $1 AND l.endpoint_id = ANY(sqlc.arg(endpoints)::text[]))
    OR EXISTS (SELECT 1 FROM deliveries d
               WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.correlation_id = $1 AND d.endpoint_id = ANY(sqlc.arg(endpoints)::text[])
                 AND d.state NOT IN ('delivered', 'skipped'));

-- name: CorrelationTop :one
-- The highest sequence correlation $1 holds: its high-water mark (events
-- and tombstones accepted) or its cursor, 0 for a correlation with no row.
-- A void may reach a bounded distance past it (store.MaxVoidAhead).
SELECT COALESCE((SELECT GREATEST(high_water, next_sequence - 1) FROM correlations
                 WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1), 0)::bigint;
