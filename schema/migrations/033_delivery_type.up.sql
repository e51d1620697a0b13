-- The event types a portal session limited to some endpoints sees
-- (GET /v1/event-types): each type of the events routed to one of its
-- endpoints, with the latest of them. Read along the tenant's events of
-- each type, probing each for a delivery there, it walked a type's whole
-- history when the session's endpoints got none or few of it. A delivery
-- keeps its event's type (which never changes) so the types are walked
-- along each endpoint's deliveries instead, one index probe a type. The
-- operational events (hookflow: correlations) a session sees are only
-- those about its endpoints, so theirs are indexed by correlation too, in
-- an index of their own: in the producers' index they would sit between
-- the latest the session may see and the latest there is, without bound.
-- The event insert sets the type; the backfill reads it from the event
-- every delivery references (deliveries_event_fkey), so none stays NULL.
-- A plain CREATE INDEX holds writes to deliveries while it builds: a
-- deployment with a large deliveries table builds these CONCURRENTLY by
-- hand first (after adding and filling the column), and IF NOT EXISTS
-- then leaves the column and them be, and the fill skips filled rows.
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS type text;
UPDATE deliveries d SET type = e.type FROM events e WHERE e.tenant_id = d.tenant_id AND e.id = d.event_id AND d.type IS NULL;
ALTER TABLE deliveries ALTER COLUMN type SET NOT NULL;
CREATE INDEX IF NOT EXISTS deliveries_type_idx ON deliveries (tenant_id, endpoint_id, type, accepted_at, event_id)
    WHERE NOT starts_with(correlation_id, 'hookflow:');
CREATE INDEX IF NOT EXISTS deliveries_operational_type_idx ON deliveries (tenant_id, endpoint_id, correlation_id, type, accepted_at, event_id)
    WHERE starts_with(correlation_id, 'hookflow:');
