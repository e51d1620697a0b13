-- Back to one endpoint per event: possible only while every event has
-- exactly one delivery, so a fanned-out ledger is refused rather than cut.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM events e WHERE (SELECT count(*) FROM deliveries d WHERE d.event_id = e.id) <> 1) THEN
        RAISE EXCEPTION 'cannot undo 009_fanout: some events have no delivery or more than one';
    END IF;
END $$;

DROP VIEW events_routed;

ALTER TABLE events ADD COLUMN endpoint_id text REFERENCES endpoints (id);
UPDATE events e SET endpoint_id = d.endpoint_id FROM deliveries d WHERE d.event_id = e.id;
ALTER TABLE events ALTER COLUMN endpoint_id SET NOT NULL;
CREATE INDEX events_pending_idx ON events (correlation_id, sequence) WHERE state NOT IN ('delivered', 'skipped');
CREATE INDEX events_delivered_at_idx ON events (delivered_at) WHERE state = 'delivered';

DROP INDEX delivery_attempts_delivery_idx;
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_event_id_endpoint_id_fkey;
ALTER TABLE delivery_attempts DROP COLUMN endpoint_id;
ALTER TABLE delivery_attempts ADD FOREIGN KEY (event_id) REFERENCES events (id);
CREATE INDEX delivery_attempts_event_idx ON delivery_attempts (event_id, id);

DROP INDEX dead_letters_lane_idx;
CREATE INDEX dead_letters_correlation_idx ON dead_letters (correlation_id, sequence);
DROP INDEX dead_letters_open_idx;
CREATE INDEX dead_letters_open_idx ON dead_letters (dead_lettered_at, event_id) WHERE status = 'open';
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_event_id_endpoint_id_fkey;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey;
ALTER TABLE dead_letters ADD PRIMARY KEY (event_id);
ALTER TABLE dead_letters ADD FOREIGN KEY (event_id) REFERENCES events (id);

-- The correlation's tail: the skips of all its lanes after the last
-- delivered sequence of any.
ALTER TABLE correlations ADD COLUMN skipped_tail bigint[] NOT NULL DEFAULT '{}';
UPDATE correlations c SET skipped_tail = ARRAY(
    SELECT t FROM lanes l, unnest(l.skipped_tail) t
    WHERE l.correlation_id = c.correlation_id
      AND t > (SELECT max(previous) FROM lanes p WHERE p.correlation_id = c.correlation_id)
    ORDER BY t)
WHERE EXISTS (SELECT 1 FROM lanes l WHERE l.correlation_id = c.correlation_id);

DROP TABLE lanes;
DROP TABLE deliveries;
