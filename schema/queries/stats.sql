-- name: StatsSummary
-- One pass over the ledger for the operator's summary and the scrape-time
-- gauges. Lag is the age of the oldest event not delivered or skipped, so a
-- dead letter waiting for an operator keeps it growing, as it should.
SELECT
    count(*) FILTER (WHERE state = 'queued'),
    count(*) FILTER (WHERE state IN ('waiting', 'delivering')),
    count(*) FILTER (WHERE state = 'delivered' AND delivered_at > now() - interval '5 minutes'),
    COALESCE(EXTRACT(EPOCH FROM now() - min(accepted_at) FILTER (WHERE state NOT IN ('delivered', 'skipped'))), 0)::float8,
    (SELECT count(*) FROM dead_letters WHERE status = 'open')
FROM events
WHERE state <> 'delivered' OR delivered_at > now() - interval '5 minutes';

-- name: StatsBlockedCorrelations
-- A correlation is blocked when an event waits behind its next sequence:
-- that sequence is not delivered yet (missing, waiting, delivering or
-- dead-lettered). Oldest first; $1 bounds the list, the last column counts
-- them all.
WITH parked AS (
    SELECT e.correlation_id, COALESCE(c.next_sequence, 1) AS next_sequence,
           min(e.accepted_at) AS since, count(*) AS parked
    FROM events e
    LEFT JOIN correlations c ON c.correlation_id = e.correlation_id
    WHERE e.state NOT IN ('delivered', 'skipped')
      AND e.sequence > COALESCE(c.next_sequence, 1)
    GROUP BY e.correlation_id, COALESCE(c.next_sequence, 1)
)
SELECT p.correlation_id, p.next_sequence, COALESCE(h.state, 'missing'), h.id, p.parked,
       EXTRACT(EPOCH FROM now() - p.since)::float8, count(*) OVER ()
FROM parked p
LEFT JOIN events h ON h.correlation_id = p.correlation_id AND h.sequence = p.next_sequence
ORDER BY p.since, p.correlation_id
LIMIT $1;
