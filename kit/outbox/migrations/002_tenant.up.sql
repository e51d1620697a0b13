-- An outbox row carries its tenant: a SaaS's backend writes the
-- events of all its customers to one outbox, and `hookflow relay` puts each
-- into its own tenant's ledger. Event IDs and sequences are unique per
-- tenant there, and so they are here: two tenants may both write evt-1 in
-- order-42.
--
-- The rows written before it are the default tenant's: a producer that
-- names no tenant means `default`, as an operator key naming none does in
-- the API. The column keeps no default once filled: outbox.Enqueue binds
-- the tenant (DefaultTenant when the event names none), and a write that
-- does not is refused rather than put under `default` by accident.
ALTER TABLE outbox ADD COLUMN tenant_id text NOT NULL DEFAULT 'default'
    -- intake.TenantIDPattern, as the API and the ledger's tenants.id say.
    CHECK (tenant_id ~ '^[A-Za-z0-9_:-]{1,200}$');
ALTER TABLE outbox ALTER COLUMN tenant_id DROP DEFAULT;

ALTER TABLE outbox DROP CONSTRAINT outbox_id_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_tenant_id_key UNIQUE (tenant_id, id);
ALTER TABLE outbox DROP CONSTRAINT outbox_correlation_id_sequence_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_tenant_correlation_sequence_key UNIQUE (tenant_id, correlation_id, sequence);

-- The relay claims a (tenant, correlation): its work list leads with both.
DROP INDEX outbox_pending_idx;
CREATE INDEX outbox_pending_idx ON outbox (tenant_id, correlation_id, sequence) WHERE state = 'pending';
