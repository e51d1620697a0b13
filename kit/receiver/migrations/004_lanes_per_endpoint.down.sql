-- Back to one lane per correlation. Lanes cannot be merged, so only the
-- rows of one endpoint per correlation could stay; rather than pick one,
-- every lane that names an endpoint is dropped, and what was kept from
-- before 004 (endpoint_id '') is what remains. Parked rows go, as on the
-- way up: their senders retry them.
DELETE FROM parked_events;
DELETE FROM processed_events WHERE endpoint_id <> '';
DELETE FROM correlation_cursors WHERE endpoint_id <> '';

ALTER TABLE parked_events
    DROP CONSTRAINT parked_events_pkey,
    DROP CONSTRAINT parked_events_lane_sequence,
    DROP CONSTRAINT parked_events_lane_previous,
    DROP COLUMN endpoint_id,
    ADD PRIMARY KEY (event_id),
    ADD CONSTRAINT parked_events_correlation_id_sequence_key UNIQUE (correlation_id, sequence),
    ADD CONSTRAINT parked_events_correlation_previous UNIQUE (correlation_id, previous_sequence);

ALTER TABLE correlation_cursors DROP CONSTRAINT correlation_cursors_pkey;
ALTER TABLE correlation_cursors DROP COLUMN endpoint_id;
ALTER TABLE correlation_cursors ADD PRIMARY KEY (correlation_id);

DROP INDEX processed_events_lane_sequence;
ALTER TABLE processed_events DROP CONSTRAINT processed_events_pkey;
ALTER TABLE processed_events DROP COLUMN endpoint_id;
ALTER TABLE processed_events ADD PRIMARY KEY (event_id);
CREATE UNIQUE INDEX processed_events_correlation_sequence
    ON processed_events (correlation_id, sequence);
