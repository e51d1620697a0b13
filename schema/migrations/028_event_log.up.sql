-- The event log (GET /v1/events): a tenant's events newest first,
-- paged by (accepted_at, id), alone or by type. A correlation's are found
-- by events_correlation_sequence_key, and an endpoint's by the deliveries'
-- key. A plain CREATE INDEX holds writes to events while it builds: a
-- deployment with a large events table builds these CONCURRENTLY by hand
-- first, and IF NOT EXISTS then leaves them be.
CREATE INDEX IF NOT EXISTS events_log_idx ON events (tenant_id, accepted_at, id);
CREATE INDEX IF NOT EXISTS events_log_type_idx ON events (tenant_id, type, accepted_at, id);
