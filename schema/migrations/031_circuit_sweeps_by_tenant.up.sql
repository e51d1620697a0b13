-- The circuits' sweeps (auto-replay, probe replays, lane wakes, event
-- catch-up) serve tenants in turn, as the queued and repair sweeps do
-- since 029: each pass takes every tenant's first due circuit before
-- anyone's second, so a tenant with more endpoints due than a batch (one
-- enabled again after a pause wakes every endpoint it has) delays only
-- itself. A circuit carries its endpoint's tenant, which never changes,
-- so that a turn reads one tenant's range of these indexes, in the order
-- the sweep serves it, and no more than a batch of it.
ALTER TABLE endpoint_circuits ADD COLUMN tenant_id text;
UPDATE endpoint_circuits c SET tenant_id = e.tenant_id FROM endpoints e WHERE e.id = c.endpoint_id;
ALTER TABLE endpoint_circuits ALTER COLUMN tenant_id SET NOT NULL;

DROP INDEX IF EXISTS endpoint_circuits_auto_replay_idx;
CREATE INDEX endpoint_circuits_auto_replay_idx
    ON endpoint_circuits (tenant_id, auto_replay_turn_at NULLS FIRST, auto_replay_pending_since, endpoint_id)
    WHERE auto_replay_pending_since IS NOT NULL;
DROP INDEX IF EXISTS endpoint_circuits_wake_idx;
CREATE INDEX endpoint_circuits_wake_idx
    ON endpoint_circuits (tenant_id, wake_turn_at NULLS FIRST, wake_requested_at, endpoint_id)
    WHERE wake_requested_at IS NOT NULL;
DROP INDEX IF EXISTS endpoint_circuits_event_catch_up_idx;
CREATE INDEX endpoint_circuits_event_catch_up_idx ON endpoint_circuits (tenant_id, event_at, endpoint_id)
    WHERE events_coalesced > 0;
-- The probe replays read open circuits by when their probe is due; before
-- this they read every circuit.
CREATE INDEX endpoint_circuits_probe_due_idx ON endpoint_circuits (tenant_id, next_probe_at, endpoint_id)
    WHERE state IN ('open', 'half_open');
