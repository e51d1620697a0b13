-- Per-endpoint delivery settings. Each NULL means "as the server
-- is configured" (HOOKFLOW_RECOVERY_WINDOW, HOOKFLOW_DELIVERY_TIMEOUT,
-- unlimited), which is what every endpoint registered before keeps.
--
-- headers: custom headers sent with every attempt, a JSON object of
-- name → value. The values are secrets (an API key the receiver checks),
-- kept as the signing secret is, in this row alone: they are read by the
-- delivery attempt, never copied into an event, a delivery, an attempt, a
-- dead letter or a workflow's input. The API refuses the names hookflow
-- sets itself and the hop-by-hop ones (api/endpoint_settings.go).
-- recovery_window_ms, timeout_ms: milliseconds, bounded as the API bounds
-- them (1 s to 72 h; 1 s to 60 s). rate_limit: deliveries per second to the
-- endpoint across all its lanes.
ALTER TABLE endpoints
    ADD COLUMN headers jsonb
        CONSTRAINT endpoints_headers_object CHECK (jsonb_typeof(headers) = 'object'),
    ADD COLUMN recovery_window_ms bigint
        CONSTRAINT endpoints_recovery_window_range CHECK (recovery_window_ms BETWEEN 1000 AND 259200000),
    ADD COLUMN timeout_ms bigint
        CONSTRAINT endpoints_timeout_range CHECK (timeout_ms BETWEEN 1000 AND 60000),
    ADD COLUMN rate_limit double precision
        CONSTRAINT endpoints_rate_limit_positive CHECK (rate_limit > 0 AND rate_limit <= 10000);

-- The window and timeout are fixed per delivery when the event is routed,
-- like the routing itself: an event accepted under a 5-minute window keeps
-- it through a PATCH of its endpoint, and a workflow started again from the
-- ledger (the sweep's restart) gets the same schedule back. NULL: the
-- server's. The headers and the rate limit are not copied: an attempt reads
-- them from the endpoint as it reads its URL and secret, so a PATCH applies
-- at the next attempt.
ALTER TABLE deliveries
    ADD COLUMN recovery_window_ms bigint,
    ADD COLUMN timeout_ms bigint;

-- The rate limiter's state: per endpoint, the next free send slot. An
-- attempt to a rate-limited endpoint reserves the slot it sends in by
-- moving next_slot one interval (1 / rate_limit) past max(next_slot, now)
-- in a single UPDATE ... RETURNING (EndpointRateReserve), so every worker
-- shares it and a crash loses at most a reserved slot. Its own table keeps
-- this hot row out of the endpoints row that every attempt reads.
CREATE TABLE endpoint_rate_slots (
    endpoint_id text PRIMARY KEY REFERENCES endpoints (id),
    next_slot   timestamptz NOT NULL
);

-- The deliveries' settings in the JSON that EventGet, the queued sweep and
-- the heads sweep read (the starter builds each lane's input from it).
CREATE OR REPLACE VIEW events_routed AS
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
