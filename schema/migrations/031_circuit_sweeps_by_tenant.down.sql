DROP INDEX IF EXISTS endpoint_circuits_probe_due_idx;
DROP INDEX IF EXISTS endpoint_circuits_event_catch_up_idx;
CREATE INDEX endpoint_circuits_event_catch_up_idx ON endpoint_circuits (event_at)
    WHERE events_coalesced > 0;
DROP INDEX IF EXISTS endpoint_circuits_wake_idx;
CREATE INDEX endpoint_circuits_wake_idx ON endpoint_circuits (wake_requested_at)
    WHERE wake_requested_at IS NOT NULL;
DROP INDEX IF EXISTS endpoint_circuits_auto_replay_idx;
CREATE INDEX endpoint_circuits_auto_replay_idx ON endpoint_circuits (auto_replay_pending_since)
    WHERE auto_replay_pending_since IS NOT NULL;
ALTER TABLE endpoint_circuits DROP COLUMN tenant_id;
