-- One receiver database may serve several hookflow endpoints (two
-- endpoints with different event_types pointed at one URL, or at two
-- receivers sharing a database). Each endpoint is its own lane of a
-- correlation: it sees only the events meant for it, and each envelope's
-- previous_sequence is the last one sent to that endpoint. A cursor shared
-- by the correlation's lanes made the second endpoint's first event
-- (previous_sequence 0) a permanent 409 once the first had applied
-- anything. So dedup, cursor and parking lot are keyed by the envelope's
-- endpoint_id as well. The same event (one webhook-id) fanned out to two
-- endpoints is then applied once per endpoint, as each lane expects.
--
-- Rows from before this migration came from envelopes that named no
-- endpoint. They are kept under endpoint_id '' (no envelope names it), as
-- a record only: a lane of a real endpoint starts afresh. Parked rows are
-- dropped, as 003 did: they were answered 202, not applied, and their
-- sender retries them.
DELETE FROM parked_events;

ALTER TABLE processed_events ADD COLUMN endpoint_id text NOT NULL DEFAULT '';
ALTER TABLE processed_events ALTER COLUMN endpoint_id DROP DEFAULT;
ALTER TABLE processed_events DROP CONSTRAINT processed_events_pkey;
ALTER TABLE processed_events ADD PRIMARY KEY (endpoint_id, event_id);
DROP INDEX processed_events_correlation_sequence;
CREATE UNIQUE INDEX processed_events_lane_sequence
    ON processed_events (endpoint_id, correlation_id, sequence);

ALTER TABLE correlation_cursors ADD COLUMN endpoint_id text NOT NULL DEFAULT '';
ALTER TABLE correlation_cursors ALTER COLUMN endpoint_id DROP DEFAULT;
ALTER TABLE correlation_cursors DROP CONSTRAINT correlation_cursors_pkey;
ALTER TABLE correlation_cursors ADD PRIMARY KEY (endpoint_id, correlation_id);

ALTER TABLE parked_events ADD COLUMN endpoint_id text NOT NULL;
ALTER TABLE parked_events
    DROP CONSTRAINT parked_events_pkey,
    DROP CONSTRAINT parked_events_correlation_id_sequence_key,
    DROP CONSTRAINT parked_events_correlation_previous,
    ADD PRIMARY KEY (endpoint_id, event_id),
    ADD CONSTRAINT parked_events_lane_sequence UNIQUE (endpoint_id, correlation_id, sequence),
    ADD CONSTRAINT parked_events_lane_previous UNIQUE (endpoint_id, correlation_id, previous_sequence);
