-- The queued sweep and the repair (heads) sweep serve tenants in turn: each
-- pass takes every tenant's first due rows before anyone's second, so one
-- tenant's backlog (a million parked correlations, an outage's queue) no
-- longer stands in front of every other tenant's repairs. A turn reads one
-- tenant's range of these indexes, in due order, and no more than a batch
-- of it.
DROP INDEX IF EXISTS events_queued_idx;
CREATE INDEX events_queued_idx ON events (tenant_id, (GREATEST(accepted_at, swept_at))) WHERE state = 'queued';
DROP INDEX IF EXISTS correlations_due_idx;
CREATE INDEX correlations_due_idx ON correlations (tenant_id, (GREATEST(updated_at, swept_at)))
    WHERE high_water >= next_sequence;
