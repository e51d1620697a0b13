-- Back to one tenant: refused while any row belongs to another than
-- `default`. Dropping the column would put those rows under `default`, the
-- one place an outbox row of another tenant must never land, and their ids
-- and sequences may collide with the default's.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox WHERE tenant_id <> 'default') THEN
        RAISE EXCEPTION 'outbox rows of tenants other than default exist: relay or delete them before going below outbox migration 002';
    END IF;
END $$;

DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_pending_idx ON outbox (correlation_id, sequence) WHERE state = 'pending';

ALTER TABLE outbox DROP CONSTRAINT outbox_tenant_correlation_sequence_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_correlation_id_sequence_key UNIQUE (correlation_id, sequence);
ALTER TABLE outbox DROP CONSTRAINT outbox_tenant_id_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_id_key UNIQUE (id);

ALTER TABLE outbox DROP COLUMN tenant_id;
