-- Fan-out: an accepted event is routed, when it is accepted, to
-- every endpoint subscribed to it; each (event, endpoint) is a delivery, and
-- order is kept per (correlation, endpoint), a lane. The event's own state
-- becomes the aggregate of its deliveries' (store.EventAggregate), so what
-- reads events alone (the dedup answers, the queued sweep, the cleaner's
-- pruning indexes of migration 003) keeps working unchanged.
--
-- Existing rows are single-endpoint: each event becomes one delivery to the
-- endpoint it named.

-- One row per (event, endpoint) the event was routed to at acceptance:
-- waiting → delivering → delivered | dead_lettered | skipped, and
-- dead_lettered → delivering on a claimed replay. correlation_id and
-- sequence are the event's, copied so that a lane is one index range.
CREATE TABLE deliveries (
    event_id       text NOT NULL REFERENCES events (id),
    endpoint_id    text NOT NULL REFERENCES endpoints (id),
    correlation_id text NOT NULL,
    sequence       bigint NOT NULL,
    state          text NOT NULL DEFAULT 'waiting',
    released_at    timestamptz,
    delivered_at   timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, endpoint_id)
);

-- A queued event's delivery waits: "queued" is the event's (its workflow is
-- not started), not the delivery's.
INSERT INTO deliveries (event_id, endpoint_id, correlation_id, sequence, state, released_at, delivered_at, updated_at)
SELECT id, endpoint_id, correlation_id, sequence, CASE WHEN state = 'queued' THEN 'waiting' ELSE state END,
       released_at, delivered_at, updated_at
FROM events;

-- Deliveries not finished, by lane in sequence order: the heads sweep, the
-- blocked-lanes list and the stats summary go through it. Like
-- events_pending_idx before it, it stays as small as the backlog, however
-- long the history.
CREATE INDEX deliveries_pending_idx ON deliveries (correlation_id, endpoint_id, sequence)
    WHERE state NOT IN ('delivered', 'skipped');

-- Delivered deliveries by delivery time: the summary's "delivered in the
-- last 5 minutes" reads a range at the end of it.
CREATE INDEX deliveries_delivered_at_idx ON deliveries (delivered_at) WHERE state = 'delivered';

-- One row per (correlation, endpoint) something finished in: the last
-- sequence delivered or skipped in the lane, the last delivered (the
-- envelope's previous_sequence) and the sequences skipped since, in order
-- (the envelope's skipped_sequences). Kept here, moved forward only in the
-- transaction that finishes the delivery, rather than read from the
-- deliveries rows: the cleaner deletes those. Never pruned, like
-- correlations.
CREATE TABLE lanes (
    correlation_id text NOT NULL,
    endpoint_id    text NOT NULL,
    last_finished  bigint NOT NULL DEFAULT 0,
    previous       bigint NOT NULL DEFAULT 0,
    skipped_tail   bigint[] NOT NULL DEFAULT '{}',
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (correlation_id, endpoint_id)
);

-- Existing lanes, from the finished events still stored. A delivered event
-- the cleaner deleted is below its correlation's cursor, but its endpoint is
-- gone with it; where every stored event of a correlation went to one
-- endpoint (the single-endpoint world this comes from), the lane is taken to
-- be the whole correlation, so the cursor and the correlation's skipped tail
-- (kept on its row since migration 004 for this very reason) give the lane's
-- last finished and last delivered sequences exactly. Elsewhere the lane
-- keeps the skips of the correlation's tail that were its own: skipped rows
-- are never pruned (they have dead letters).
INSERT INTO lanes (correlation_id, endpoint_id, last_finished, previous, skipped_tail)
SELECT l.correlation_id, l.endpoint_id,
       CASE WHEN l.single THEN GREATEST(l.last_finished, c.next_sequence - 1) ELSE l.last_finished END,
       CASE WHEN l.single THEN GREATEST(l.previous, c.next_sequence - 1 - cardinality(c.skipped_tail)) ELSE l.previous END,
       ARRAY(SELECT t FROM unnest(c.skipped_tail) t
             WHERE EXISTS (SELECT 1 FROM events e
                           WHERE e.correlation_id = l.correlation_id AND e.sequence = t AND e.endpoint_id = l.endpoint_id)
             ORDER BY t)
FROM (
    SELECT correlation_id, endpoint_id,
           COALESCE(max(sequence) FILTER (WHERE state IN ('delivered', 'skipped')), 0) AS last_finished,
           COALESCE(max(sequence) FILTER (WHERE state = 'delivered'), 0) AS previous,
           count(*) OVER (PARTITION BY correlation_id) = 1 AS single
    FROM events
    GROUP BY correlation_id, endpoint_id
) l
JOIN correlations c ON c.correlation_id = l.correlation_id
WHERE l.last_finished > 0 OR (l.single AND c.next_sequence > 1);

-- The lanes hold the skipped tails now, each its own.
ALTER TABLE correlations DROP COLUMN skipped_tail;

-- A dead letter is one delivery's: two endpoints of one event are
-- dead-lettered, replayed and skipped independently, each with its own
-- generations and window.
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_event_id_fkey;
ALTER TABLE dead_letters ADD PRIMARY KEY (event_id, endpoint_id);
ALTER TABLE dead_letters ADD FOREIGN KEY (event_id, endpoint_id) REFERENCES deliveries (event_id, endpoint_id);

-- The listing's keyset is (dead_lettered_at, event_id, endpoint_id) now that
-- an event has several; the batch replay reads each lane in sequence order.
DROP INDEX dead_letters_open_idx;
CREATE INDEX dead_letters_open_idx ON dead_letters (dead_lettered_at, event_id, endpoint_id) WHERE status = 'open';
DROP INDEX dead_letters_correlation_idx;
CREATE INDEX dead_letters_lane_idx ON dead_letters (correlation_id, endpoint_id, sequence, event_id);

-- An attempt is one delivery's.
ALTER TABLE delivery_attempts ADD COLUMN endpoint_id text;
UPDATE delivery_attempts a SET endpoint_id = e.endpoint_id FROM events e WHERE e.id = a.event_id;
ALTER TABLE delivery_attempts ALTER COLUMN endpoint_id SET NOT NULL;
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_event_id_fkey;
ALTER TABLE delivery_attempts ADD FOREIGN KEY (event_id, endpoint_id) REFERENCES deliveries (event_id, endpoint_id);
DROP INDEX delivery_attempts_event_idx;
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (event_id, endpoint_id, id);

-- The routing is the deliveries. The backlog and the recent deliveries are
-- read from the deliveries' own indexes above.
DROP INDEX events_pending_idx;
DROP INDEX events_delivered_at_idx;
ALTER TABLE events DROP COLUMN endpoint_id;

-- An event with its deliveries, each with its attempt count and its dead
-- letter's generation and status, sorted by endpoint: what EventGet, the
-- queued sweep and the heads sweep return, read in the same round trip as
-- the event. One definition for the three queries; the sub-selects run only
-- for the rows a query returns.
CREATE VIEW events_routed AS
SELECT e.id, e.correlation_id, e.sequence, e.type, e.data, e.payload_hash, e.state, e.accepted_at,
       e.released_at, e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason,
       COALESCE((
           SELECT json_agg(json_build_object(
                      'endpoint_id', d.endpoint_id, 'state', d.state, 'released_at', d.released_at,
                      'delivered_at', d.delivered_at, 'updated_at', d.updated_at,
                      'attempts', (SELECT count(*) FROM delivery_attempts a
                                   WHERE a.event_id = d.event_id AND a.endpoint_id = d.endpoint_id),
                      'dead_letter_generation', dl.generation, 'dead_letter_status', dl.status)
                  ORDER BY d.endpoint_id)
           FROM deliveries d
           LEFT JOIN dead_letters dl ON dl.event_id = d.event_id AND dl.endpoint_id = d.endpoint_id
           WHERE d.event_id = e.id), '[]') AS deliveries
FROM events e;
