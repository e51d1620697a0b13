-- name: StatsSummary :many
-- The operator's summary of a tenant, or (tenant_id NULL) of every tenant
-- for the scrape-time gauges, per endpoint (the totals are their sums): deliveries not finished, from
-- deliveries_pending_idx, each with its event (a primary-key probe: OFFSET 0
-- keeps the planner from turning the probes into a scan of events, whose
-- history is far larger than the backlog), those delivered in the last five
-- minutes, from deliveries_delivered_at_idx and not probed, and the open
-- dead letters, from dead_letters_open_idx. So the cost follows the backlog
-- and the last five minutes, never the history; skipped deliveries count
-- nowhere. A queued event's deliveries are its endpoints' waiting ones and
-- are counted as queued too. Lag is the age of the oldest event with a
-- delivery not finished, so a dead letter waiting for an operator keeps it
-- growing, as it should.
WITH pending AS (
    SELECT d.endpoint_id,
           count(*) FILTER (WHERE e.state = 'queued') AS queued,
           count(*) FILTER (WHERE d.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE d.state = 'delivering') AS delivering,
           min(e.accepted_at) AS oldest
    FROM deliveries d
    CROSS JOIN LATERAL (SELECT state, accepted_at FROM events WHERE tenant_id = d.tenant_id AND id = d.event_id OFFSET 0) e
    WHERE d.state NOT IN ('delivered', 'skipped') AND (sqlc.narg(tenant_id)::text IS NULL OR d.tenant_id = sqlc.narg(tenant_id))
    GROUP BY d.endpoint_id
), recent AS (
    SELECT endpoint_id, count(*) AS delivered FROM deliveries
    WHERE state = 'delivered' AND delivered_at > now() - interval '5 minutes' AND (sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id))
    GROUP BY endpoint_id
), open AS (
    SELECT endpoint_id, count(*) AS open FROM dead_letters WHERE status = 'open' AND (sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)) GROUP BY endpoint_id
)
SELECT COALESCE(p.endpoint_id, r.endpoint_id, o.endpoint_id)::text AS endpoint_id,
       COALESCE(p.queued, 0), COALESCE(p.waiting, 0), COALESCE(p.delivering, 0), COALESCE(r.delivered, 0),
       COALESCE(o.open, 0), COALESCE(EXTRACT(EPOCH FROM now() - p.oldest), 0)::float8 AS lag_seconds
FROM pending p
FULL JOIN recent r ON r.endpoint_id = p.endpoint_id
FULL JOIN open o ON o.endpoint_id = COALESCE(p.endpoint_id, r.endpoint_id)
ORDER BY 1;

-- name: StatsBlockedCorrelations :many
-- A lane (correlation, endpoint) is blocked when a delivery waits behind
-- its head: the correlation's cursor when that sequence has not arrived
-- (it holds every lane), else the lane's lowest delivery not finished
-- (waiting, delivering or dead-lettered). Oldest first; $1 bounds the list,
-- a column counts them all. Of one tenant, or (tenant_id NULL) of all;
-- of the endpoints only_endpoints names (a limited portal session), or
-- (NULL) of every endpoint.
-- The unfinished deliveries come from deliveries_pending_idx, each with its
-- event's acceptance time (a primary-key probe, fenced by OFFSET 0 as in
-- StatsSummary); each lane's cursor is a primary-key lookup, because
-- correlations keeps a row for every correlation ever seen and a join was
-- planned as a scan of it.
WITH open AS (
    SELECT d.tenant_id, d.correlation_id, d.endpoint_id, d.sequence, d.event_id, d.state, a.accepted_at,
           row_number() OVER (PARTITION BY d.tenant_id, d.correlation_id, d.endpoint_id ORDER BY d.sequence) AS rn
    FROM deliveries d
    CROSS JOIN LATERAL (SELECT accepted_at FROM events WHERE tenant_id = d.tenant_id AND id = d.event_id OFFSET 0) a
    WHERE d.state NOT IN ('delivered', 'skipped') AND (sqlc.narg(tenant_id)::text IS NULL OR d.tenant_id = sqlc.narg(tenant_id))
      AND (sqlc.narg(only_endpoints)::text[] IS NULL OR d.endpoint_id = ANY(sqlc.narg(only_endpoints)::text[]))
), lanes AS (
    SELECT tenant_id, correlation_id, endpoint_id, count(*) AS open,
           min(sequence) AS low, min(event_id) FILTER (WHERE rn = 1) AS low_id, min(state) FILTER (WHERE rn = 1) AS low_state,
           min(accepted_at) AS since_all, min(accepted_at) FILTER (WHERE rn > 1) AS since_behind
    FROM open
    GROUP BY tenant_id, correlation_id, endpoint_id
), placed AS (
    SELECT l.*, n.next_sequence,
           NOT EXISTS (SELECT 1 FROM events h WHERE h.tenant_id = l.tenant_id AND h.correlation_id = l.correlation_id AND h.sequence = n.next_sequence) AS missing
    FROM lanes l
    CROSS JOIN LATERAL (
        SELECT COALESCE((SELECT c.next_sequence FROM correlations c WHERE c.tenant_id = l.tenant_id AND c.correlation_id = l.correlation_id), 1) AS next_sequence
    ) n
), blocked AS (
    SELECT tenant_id, correlation_id, endpoint_id,
           CASE WHEN missing THEN next_sequence ELSE low END AS head,
           CASE WHEN missing THEN 'missing' ELSE low_state END AS blocked_by,
           CASE WHEN missing THEN NULL ELSE low_id END AS head_id,
           CASE WHEN missing THEN open ELSE open - 1 END AS parked,
           CASE WHEN missing THEN since_all ELSE since_behind END AS since
    FROM placed
)
SELECT correlation_id, endpoint_id, head, blocked_by, head_id, parked,
       EXTRACT(EPOCH FROM now() - since)::float8, count(*) OVER (), tenant_id
FROM blocked
WHERE parked > 0
ORDER BY since, tenant_id, correlation_id, endpoint_id
LIMIT $1;

-- name: EndpointHealth :many
-- The health of endpoint $1, or when $1 is NULL of a page of the endpoints
-- not deleted: the first $5 with an id after $4 (''  from the start), one
-- row each in id order (an $1 that names no endpoint reads as idle, with
-- its threshold NULL), of the tenant's endpoints: one of another tenant's
-- has no row, nor one outside only_endpoints when it is not NULL.
--
-- Its attempts are those of the last $2 seconds, at most the last $3 of
-- them: a bounded sample read backwards from the end of its range of
-- delivery_attempts_endpoint_started_idx (migration 011; the columns read
-- are in the index), so the cost is the sample's, however many attempts
-- the window holds (docs/performance.md has the plan at a million). One
-- row past the sample is read to tell whether the window held more
-- (sampled). By outcome, with the median and 99th percentile of their
-- latency (NULL when there were none). Attempts recorded as 'disabled'
-- made no request and are left out: they say nothing of how the receiver
-- answers.
--
-- Its deliveries not finished come from one pass over
-- deliveries_pending_idx, each with its event (a primary-key probe, fenced
-- by OFFSET 0 as in StatsSummary), for every endpoint at once: so the cost
-- follows the backlog, once, whatever the number of endpoints; with the
-- oldest of them by its event's acceptance (NULL columns when there is
-- none). Its open dead letters, from dead_letters_open_idx; the attempts
-- its rate limit has held back since its first rate-limited attempt
-- (endpoint_rate_slots, migration 012; 0 when it never had one); and its
-- circuit (closed with no failure when it has no row).
WITH eps AS (
    (SELECT x.id, x.circuit_failure_threshold FROM endpoints x
     WHERE $1::text IS NULL AND x.tenant_id = sqlc.arg(tenant_id) AND x.deleted_at IS NULL AND x.id > $4::text
       AND (sqlc.narg(only_endpoints)::text[] IS NULL OR x.id = ANY(sqlc.narg(only_endpoints)::text[]))
     ORDER BY x.id LIMIT $5)
    UNION ALL
    SELECT y.id, y.circuit_failure_threshold FROM endpoints y
    WHERE $1::text IS NOT NULL AND y.tenant_id = sqlc.arg(tenant_id) AND y.id = $1::text
      AND (sqlc.narg(only_endpoints)::text[] IS NULL OR y.id = ANY(sqlc.narg(only_endpoints)::text[]))
), pending AS (
    SELECT d.endpoint_id, d.event_id, d.correlation_id, d.sequence, d.state, e.accepted_at
    FROM deliveries d
    CROSS JOIN LATERAL (SELECT accepted_at FROM events WHERE tenant_id = d.tenant_id AND id = d.event_id OFFSET 0) e
    WHERE d.state NOT IN ('delivered', 'skipped') AND d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id IN (SELECT id FROM eps)
), counts AS (
    SELECT endpoint_id,
           count(*) FILTER (WHERE state = 'waiting') AS waiting,
           count(*) FILTER (WHERE state = 'delivering') AS delivering
    FROM pending
    GROUP BY endpoint_id
), oldest AS (
    SELECT DISTINCT ON (endpoint_id) endpoint_id, event_id, correlation_id, sequence, state,
           EXTRACT(EPOCH FROM now() - accepted_at)::float8 AS age
    FROM pending
    ORDER BY endpoint_id, accepted_at, event_id
), open AS (
    SELECT endpoint_id, count(*) AS open FROM dead_letters
    WHERE status = 'open' AND tenant_id = sqlc.arg(tenant_id) AND endpoint_id IN (SELECT id FROM eps)
    GROUP BY endpoint_id
)
SELECT ep.id, ep.circuit_failure_threshold,
       a.total, a.delivered, a.retry, a.permanent, a.gone, a.p50, a.p99, a.sampled,
       COALESCE(c.waiting, 0), COALESCE(c.delivering, 0), COALESCE(dl.open, 0),
       o.event_id, o.correlation_id, o.sequence, o.state, o.age,
       COALESCE((SELECT throttled FROM endpoint_rate_slots WHERE endpoint_id = ep.id), 0),
       COALESCE(cb.state, 'closed'), COALESCE(cb.consecutive_failures, 0), cb.failing_since, cb.opened_at, cb.next_probe_at,
       cb.auto_replay_pending_since
FROM eps ep
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE rn <= $3::int) AS total,
           count(*) FILTER (WHERE rn <= $3::int AND outcome = 'delivered') AS delivered,
           count(*) FILTER (WHERE rn <= $3::int AND outcome = 'retry') AS retry,
           count(*) FILTER (WHERE rn <= $3::int AND outcome = 'permanent') AS permanent,
           count(*) FILTER (WHERE rn <= $3::int AND outcome = 'gone') AS gone,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE rn <= $3::int) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE rn <= $3::int) AS p99,
           count(*) > $3::int AS sampled
    FROM (
        SELECT outcome, latency_ms, row_number() OVER (ORDER BY started_at DESC) AS rn
        FROM (
            SELECT outcome, latency_ms, started_at FROM delivery_attempts
            WHERE endpoint_id = ep.id AND started_at > now() - make_interval(secs => $2) AND outcome <> 'disabled'
            -- endpoint_id is fixed: ordering by it too is the index's own
            -- order, so the planner takes the endpoint's range and stops
            -- at the LIMIT rather than walk every endpoint's window by
            -- started_at alone.
            ORDER BY endpoint_id DESC, started_at DESC
            LIMIT $3::int + 1
        ) newest
    ) numbered
) a
LEFT JOIN counts c ON c.endpoint_id = ep.id
LEFT JOIN open dl ON dl.endpoint_id = ep.id
LEFT JOIN oldest o ON o.endpoint_id = ep.id
LEFT JOIN endpoint_circuits cb ON cb.endpoint_id = ep.id
ORDER BY ep.id;

-- name: StatsTenants :many
-- The tenants ranked worst first, a page of them (GET /v1/stats/tenants,
-- and the metrics' tenant series): every tenant with a delivery not
-- finished, an open dead letter or an endpoint whose circuit is not closed,
-- ordered by open dead letters (each holds its lane until an operator
-- acts), then failing endpoints (nothing is sent to them), then the oldest
-- undelivered event, then the id. The figures come from the backlog alone,
-- as StatsSummary's across tenants do: deliveries_pending_idx with each
-- event probed by primary key (fenced by OFFSET 0), dead_letters_open_idx,
-- and the circuits (one row per endpoint that ever failed) with their
-- endpoint's tenant. So a page costs the backlog's pass, never the
-- history's, and the answer is at most page_limit rows; total counts the
-- ranked tenants. The ranking is taken afresh for each page (page_offset
-- rows into it).
WITH pending AS (
    SELECT d.tenant_id,
           count(*) FILTER (WHERE d.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE d.state = 'delivering') AS delivering,
           min(e.accepted_at) AS oldest
    FROM deliveries d
    CROSS JOIN LATERAL (SELECT accepted_at FROM events WHERE tenant_id = d.tenant_id AND id = d.event_id OFFSET 0) e
    WHERE d.state NOT IN ('delivered', 'skipped')
    GROUP BY d.tenant_id
), open AS (
    SELECT tenant_id, count(*) AS open FROM dead_letters WHERE status = 'open' GROUP BY tenant_id
), failing AS (
    SELECT ep.tenant_id, count(*) AS failing
    FROM endpoint_circuits cb
    JOIN endpoints ep ON ep.id = cb.endpoint_id
    WHERE cb.state <> 'closed' AND ep.deleted_at IS NULL
    GROUP BY ep.tenant_id
), ranked AS (
    SELECT COALESCE(p.tenant_id, o.tenant_id, f.tenant_id) AS tenant_id,
           COALESCE(o.open, 0) AS open, COALESCE(f.failing, 0) AS failing,
           COALESCE(p.waiting, 0) AS waiting, COALESCE(p.delivering, 0) AS delivering, p.oldest
    FROM pending p
    FULL JOIN open o ON o.tenant_id = p.tenant_id
    FULL JOIN failing f ON f.tenant_id = COALESCE(p.tenant_id, o.tenant_id)
)
SELECT r.tenant_id::text AS tenant_id, t.disabled, r.open::bigint AS dead_letters_open, r.failing::bigint AS failing_endpoints,
       r.waiting::bigint AS waiting, r.delivering::bigint AS delivering,
       COALESCE(EXTRACT(EPOCH FROM now() - r.oldest), 0)::float8 AS lag_seconds,
       count(*) OVER () AS total
FROM ranked r
JOIN tenants t ON t.id = r.tenant_id
ORDER BY r.open DESC, r.failing DESC, r.oldest ASC NULLS LAST, r.tenant_id
LIMIT sqlc.arg(page_limit) OFFSET sqlc.arg(page_offset);

-- name: EndpointOutcomesHourly :many
-- Endpoint $1's attempts by outcome in each of the last 24 hours (the
-- current one last, so far), one row per hour, empty hours included: the
-- portal's 24-hour chart. Unlike EndpointHealth's sample it counts every
-- attempt of the day, an index-only range of
-- delivery_attempts_endpoint_started_idx (outcome is in it), so its cost
-- follows the endpoint's attempts in those 24 hours, which
-- HOOKFLOW_ATTEMPT_RETENTION bounds. 'disabled' attempts made no request.
SELECT h.hour::timestamptz AS hour,
       count(a.outcome) FILTER (WHERE a.outcome = 'delivered') AS delivered,
       count(a.outcome) FILTER (WHERE a.outcome = 'retry') AS retry,
       count(a.outcome) FILTER (WHERE a.outcome = 'permanent') AS permanent,
       count(a.outcome) FILTER (WHERE a.outcome = 'gone') AS gone
FROM generate_series(date_trunc('hour', now()) - interval '23 hours', date_trunc('hour', now()), interval '1 hour') AS h(hour)
LEFT JOIN delivery_attempts a
       ON a.endpoint_id = $1 AND a.tenant_id = sqlc.arg(tenant_id) AND a.outcome <> 'disabled'
      AND a.started_at >= h.hour AND a.started_at < h.hour + interval '1 hour'
GROUP BY h.hour
ORDER BY h.hour;
