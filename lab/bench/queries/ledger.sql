-- The ledger bench (hookflow bench --ledger-rows) synthesises history in
-- hookflow's own tables, shaped as hookflow writes them: delivered events in
-- time order, interleaved over many correlations, each routed to the bench's
-- one endpoint (one delivery), with one attempt (one in ten with two: a 503,
-- then the delivery), and each correlation's cursor, and its one lane's,
-- past its last event. Event i of n belongs to correlation i % $corrs with
-- sequence i / $corrs + 1 and was accepted at oldest + (i + 0.5) * span / n,
-- so ids and times grow together, as they do in production. The statements
-- run with session_replication_role = replica, which skips the foreign-key
-- triggers (the rows are consistent by construction); every index and
-- constraint stays and is maintained row by row.

-- name: LedgerTruncate :exec
-- Every size starts from an empty ledger (the bench's endpoints stay).
TRUNCATE delivery_attempts, dead_letters, deliveries, lanes, events, correlations, cleaner_runs;

-- name: LedgerReplicaRole :exec
SET LOCAL session_replication_role = replica;

-- name: LedgerEventsInsert :exec
-- Events $1 ≤ i < $2 of $3, over $4 correlations, each with its delivery to
-- endpoint $5 (the same states and times: one endpoint, so the event's
-- aggregate is its delivery's; the delivery keeps its event's accepted_at,
-- which orders a portal session's log, and its type), the oldest accepted at $6, spread
-- over $7 seconds. The payload is about 330 bytes of JSON, like a small business
-- event. One statement, so a batch's events never stand without their
-- routing, as EventInsertRouted writes them. All of it is the default
-- tenant's, where the bench's endpoint is.
WITH ev AS (
    INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state,
                        accepted_at, released_at, delivered_at, updated_at, run_id)
    SELECT 'default', k.id, k.corr, k.seq, 'bench.event', p.data, sha256(convert_to(p.data::text, 'UTF8')), 'delivered',
           t.at, t.at + interval '4 milliseconds', t.done, t.done, md5(k.id)::uuid::text
    FROM generate_series($1::bigint, $2::bigint - 1) AS g(i)
    CROSS JOIN LATERAL (SELECT
        'evt_' || lpad(g.i::text, 20, '0') AS id,
        'acct_' || lpad((g.i % $4::bigint)::text, 12, '0') AS corr,
        g.i / $4::bigint + 1 AS seq) k
    CROSS JOIN LATERAL (SELECT
        $6::timestamptz + make_interval(secs => (g.i::float8 + 0.5) * $7::float8 / $3::float8) AS at) t0
    CROSS JOIN LATERAL (SELECT t0.at,
        t0.at + CASE WHEN g.i % 10 = 0 THEN interval '1030 milliseconds' ELSE interval '30 milliseconds' END AS done) t
    CROSS JOIN LATERAL (SELECT jsonb_build_object(
        'amount', g.i % 997 + 1,
        'currency', 'EUR',
        'account', k.corr,
        'sequence', k.seq,
        'reference', md5(g.i::text),
        'customer', 'cus_' || left(md5(k.corr), 20),
        'description', 'invoice ' || left(md5((g.i * 7)::text), 16) || ' paid in full by bank transfer, thank you',
        'metadata', jsonb_build_object('source', 'hookflow-bench', 'batch', g.i / 1000, 'region', 'eu-west-1')) AS data) p
    RETURNING tenant_id, id, correlation_id, sequence, type, state, accepted_at, released_at, delivered_at, updated_at
)
INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, state, accepted_at, released_at, delivered_at, updated_at)
SELECT tenant_id, id, $5::text, correlation_id, sequence, type, state, accepted_at, released_at, delivered_at, updated_at FROM ev;

-- name: LedgerAttemptsInsert :exec
-- The attempts of events $1 ≤ i < $2 of $3 to endpoint $6, the oldest
-- accepted at $4, spread over $5 seconds: every tenth event was answered
-- 503 once, then delivered a second later.
INSERT INTO delivery_attempts (tenant_id, event_id, endpoint_id, attempt, started_at, latency_ms, status_code, error, outcome)
SELECT 'default', 'evt_' || lpad(g.i::text, 20, '0'), $6::text, a.n,
       $4::timestamptz + make_interval(secs => (g.i::float8 + 0.5) * $5::float8 / $3::float8)
           + CASE WHEN a.n = 1 THEN interval '8 milliseconds' ELSE interval '1008 milliseconds' END,
       CASE WHEN a.retried AND a.n = 1 THEN 15 ELSE 18 END,
       CASE WHEN a.retried AND a.n = 1 THEN 503 ELSE 200 END,
       CASE WHEN a.retried AND a.n = 1 THEN 'receiver answered 503' END,
       CASE WHEN a.retried AND a.n = 1 THEN 'retry' ELSE 'delivered' END
FROM generate_series($1::bigint, $2::bigint - 1) AS g(i)
CROSS JOIN LATERAL (VALUES (1, g.i % 10 = 0), (2, g.i % 10 = 0)) AS a(n, retried)
WHERE a.n = 1 OR a.retried;

-- name: LedgerCorrelationsInsert :exec
-- The cursors of correlations $1 ≤ c < $2 of $4, over $3 events, the
-- oldest accepted at $5, spread over $6 seconds: each one's next sequence
-- is past its last event, moved when that event was delivered, its
-- high-water mark that event (so none is due for the heads sweep), and its
-- one lane, to endpoint $7, finished there with nothing skipped.
WITH c AS (
    INSERT INTO correlations (tenant_id, correlation_id, next_sequence, high_water, updated_at)
    SELECT 'default', 'acct_' || lpad(c.c::text, 12, '0'), l.k + 2, l.k + 1,
           $5::timestamptz + make_interval(secs => (l.last_i::float8 + 0.5) * $6::float8 / $3::float8)
               + CASE WHEN l.last_i % 10 = 0 THEN interval '1030 milliseconds' ELSE interval '30 milliseconds' END
    FROM generate_series($1::bigint, $2::bigint - 1) AS c(c)
    CROSS JOIN LATERAL (SELECT ($3::bigint - 1 - c.c) / $4::bigint AS k) q
    CROSS JOIN LATERAL (SELECT q.k, c.c + q.k * $4::bigint AS last_i) l
    RETURNING tenant_id, correlation_id, high_water, updated_at
)
INSERT INTO lanes (tenant_id, correlation_id, endpoint_id, last_finished, previous, updated_at)
SELECT tenant_id, correlation_id, $7::text, high_water, high_water, updated_at FROM c;

-- name: LedgerVacuumAnalyze :exec
VACUUM (ANALYZE) events, deliveries, delivery_attempts, correlations, lanes;

-- name: LedgerVacuumFull :exec
VACUUM (FULL, ANALYZE) events, deliveries, delivery_attempts, correlations, lanes;

-- name: LedgerCheckpoint :exec
CHECKPOINT;

-- name: LedgerSizes :one
-- Bytes on disk: the events heap (TOAST, free space and visibility maps
-- included), its indexes, and deliveries, attempts and cursors (the
-- correlations' and the lanes') with theirs.
SELECT pg_table_size('events'), pg_indexes_size('events'), pg_total_relation_size('deliveries'),
       pg_total_relation_size('delivery_attempts'), pg_total_relation_size('correlations') + pg_total_relation_size('lanes');

-- name: LedgerCounts :one
-- What is left of the synthetic history (ids evt_…): events, those whose
-- payload the cleaner emptied, the mean stored size of a payload still
-- there, and their attempts.
SELECT count(*), count(*) FILTER (WHERE data IS NULL), COALESCE(avg(pg_column_size(data)), 0)::float8,
       (SELECT count(*) FROM delivery_attempts WHERE left(event_id, 4) = 'evt_')
FROM events WHERE left(id, 4) = 'evt_';
