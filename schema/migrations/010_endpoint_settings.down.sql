CREATE OR REPLACE VIEW events_routed AS
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
DROP TABLE endpoint_rate_slots;
ALTER TABLE deliveries DROP COLUMN timeout_ms, DROP COLUMN recovery_window_ms;
ALTER TABLE endpoints DROP COLUMN rate_limit, DROP COLUMN timeout_ms, DROP COLUMN recovery_window_ms, DROP COLUMN headers;
