-- name: StatsSummary
-- One pass over the ledger for the operator's summary and the scrape-time
-- gauges. Lag is the age of the oldest event not delivered or skipped, so a
-- dead letter waiting for an operator keeps it growing, as it should. The
-- WHERE is the two partial indexes' predicates, so the pass
-- reads only the rows it counts: skipped events count nowhere.
SELECT
    count(*) FILTER (WHERE state = 'queued'),
    count(*) FILTER (WHERE state IN ('waiting', 'delivering')),
    count(*) FILTER (WHERE state = 'delivered' AND delivered_at > now() - interval '5 minutes'),
    COALESCE(EXTRACT(EPOCH FROM now() - min(accepted_at) FILTER (WHERE state NOT IN ('delivered', 'skipped'))), 0)::float8,
    (SELECT count(*) FROM dead_letters WHERE status = 'open')
FROM events
WHERE state NOT IN ('delivered', 'skipped')
   OR (state = 'delivered' AND delivered_at > now() - interval '5 minutes');

-- name: StatsBlockedCorrelations
-- A correlation is blocked when an event waits behind its next sequence:
-- that sequence is not delivered yet (missing, waiting, delivering or
-- dead-lettered). Oldest first; $1 bounds the list, the last column counts
-- them all.
-- The undelivered events come from events_pending_idx;
-- each one's cursor is a primary-key lookup, because correlations keeps a
-- row for every correlation ever seen and a join was planned as a scan of it.
WITH parked AS (
    SELECT e.correlation_id, n.next_sequence, min(e.accepted_at) AS since, count(*) AS parked
    FROM events e
    CROSS JOIN LATERAL (
        SELECT COALESCE((SELECT c.next_sequence FROM correlations c WHERE c.correlation_id = e.correlation_id), 1) AS next_sequence
    ) n
    WHERE e.state NOT IN ('delivered', 'skipped')
      AND e.sequence > n.next_sequence
    GROUP BY e.correlation_id, n.next_sequence
)
SELECT p.correlation_id, p.next_sequence, COALESCE(h.state, 'missing'), h.id, p.parked,
       EXTRACT(EPOCH FROM now() - p.since)::float8, count(*) OVER ()
FROM parked p
LEFT JOIN events h ON h.correlation_id = p.correlation_id AND h.sequence = p.next_sequence
ORDER BY p.since, p.correlation_id
LIMIT $1;
