-- Back to one tenant: refused while any row belongs to another than
-- `default` (the keys would collide); the default's rows stay.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM tenants WHERE id <> 'default') THEN
        RAISE EXCEPTION 'tenants other than default exist: delete them before going below migration 025';
    END IF;
END $$;

DROP VIEW events_routed;
DROP INDEX dead_letters_tenant_open_idx;
DROP INDEX endpoints_tenant_idx;

ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_delivery_fkey;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_delivery_fkey;
ALTER TABLE lanes DROP CONSTRAINT lanes_correlation_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_endpoint_fkey;

DROP INDEX delivery_attempts_delivery_idx;
ALTER TABLE delivery_attempts DROP COLUMN tenant_id;
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (event_id, endpoint_id, id);

DROP INDEX dead_letters_lane_idx;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey;
ALTER TABLE dead_letters DROP COLUMN tenant_id;
ALTER TABLE dead_letters ADD PRIMARY KEY (event_id, endpoint_id);
CREATE INDEX dead_letters_lane_idx ON dead_letters (correlation_id, endpoint_id, sequence, event_id);

ALTER TABLE lanes DROP CONSTRAINT lanes_pkey;
ALTER TABLE lanes DROP COLUMN tenant_id;
ALTER TABLE lanes ADD PRIMARY KEY (correlation_id, endpoint_id);

DROP INDEX deliveries_pending_idx;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey;
ALTER TABLE deliveries DROP COLUMN tenant_id;
ALTER TABLE deliveries ADD PRIMARY KEY (event_id, endpoint_id);
CREATE INDEX deliveries_pending_idx ON deliveries (correlation_id, endpoint_id, sequence) WHERE state NOT IN ('delivered', 'skipped');

ALTER TABLE correlations DROP CONSTRAINT correlations_pkey;
ALTER TABLE correlations DROP COLUMN tenant_id;
ALTER TABLE correlations ADD PRIMARY KEY (correlation_id);

DROP INDEX events_voided_idx;
ALTER TABLE events DROP CONSTRAINT events_correlation_sequence_key;
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events DROP COLUMN tenant_id;
ALTER TABLE events ADD PRIMARY KEY (id);
ALTER TABLE events ADD CONSTRAINT events_correlation_id_sequence_key UNIQUE (correlation_id, sequence);
CREATE INDEX events_voided_idx ON events (correlation_id, sequence) WHERE type = 'hookflow.voided';

ALTER TABLE endpoints DROP CONSTRAINT endpoints_tenant_id_key;
ALTER TABLE endpoints DROP COLUMN tenant_id;
ALTER TABLE api_keys DROP COLUMN tenant_id;

ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id);
ALTER TABLE deliveries ADD CONSTRAINT deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES endpoints (id);
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_event_id_endpoint_id_fkey FOREIGN KEY (event_id, endpoint_id) REFERENCES deliveries (event_id, endpoint_id);
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_event_id_endpoint_id_fkey FOREIGN KEY (event_id, endpoint_id) REFERENCES deliveries (event_id, endpoint_id);

DROP TABLE tenants;

CREATE VIEW events_routed AS
SELECT e.id, e.correlation_id, e.sequence, e.type, e.data, e.payload_hash, e.state, e.accepted_at,
       e.released_at, e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason,
       COALESCE((
           SELECT json_agg(json_build_object(
                      'endpoint_id', d.endpoint_id, 'state', d.state, 'released_at', d.released_at,
                      'delivered_at', d.delivered_at, 'updated_at', d.updated_at,
                      'attempts', (SELECT count(*) FROM delivery_attempts a
                                   WHERE a.event_id = d.event_id AND a.endpoint_id = d.endpoint_id),
                      'dead_letter_generation', dl.generation, 'dead_letter_status', dl.status,
                      'recovery_window_ms', d.recovery_window_ms, 'timeout_ms', d.timeout_ms)
                  ORDER BY d.endpoint_id)
           FROM deliveries d
           LEFT JOIN dead_letters dl ON dl.event_id = d.event_id AND dl.endpoint_id = d.endpoint_id
           WHERE d.event_id = e.id), '[]') AS deliveries
FROM events e;
