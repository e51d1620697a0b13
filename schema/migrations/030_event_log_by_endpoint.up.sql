-- The event log by endpoint (GET /v1/events?endpoint_id=, and a portal
-- session limited to one endpoint): newest first, paged by (accepted_at,
-- id), read along one endpoint's deliveries rather than along the tenant's
-- whole log probing each event for a delivery there, which reads the whole
-- log for an endpoint that gets few of the tenant's events. A delivery
-- keeps its event's accepted_at for that order; it never changes. The
-- event insert sets it; the default is the same instant for a delivery
-- stored in its event's statement.
ALTER TABLE deliveries ADD COLUMN accepted_at timestamptz;
UPDATE deliveries d SET accepted_at = e.accepted_at FROM events e WHERE e.tenant_id = d.tenant_id AND e.id = d.event_id;
ALTER TABLE deliveries ALTER COLUMN accepted_at SET NOT NULL, ALTER COLUMN accepted_at SET DEFAULT now();
CREATE INDEX deliveries_log_idx ON deliveries (tenant_id, endpoint_id, accepted_at, event_id);

-- The dead letters' list (GET /v1/dead-letters) is paged on
-- (dead_lettered_at, event_id, endpoint_id) whatever their status, alone
-- or by endpoint: dead_letters_tenant_open_idx serves only status=open,
-- and every other page sorted all of the tenant's dead letters, which are
-- never pruned.
CREATE INDEX dead_letters_log_idx ON dead_letters (tenant_id, dead_lettered_at, event_id, endpoint_id);
CREATE INDEX dead_letters_endpoint_log_idx ON dead_letters (tenant_id, endpoint_id, dead_lettered_at, event_id);
