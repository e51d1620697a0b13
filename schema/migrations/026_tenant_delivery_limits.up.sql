-- The two limits a tenant's deliveries answer to:
--   deliveries_per_second: sends a second across all of the tenant's
--     endpoints, so one customer's burst holds back its own lanes and no
--     one else's; NULL is no limit beyond each endpoint's rate_limit.
--   allow_private_targets: whether HOOKFLOW_PRIVATE_TARGET_ALLOWLIST
--     applies to the tenant's endpoints. A customer must not aim at an
--     internal address the operator allowlisted for itself. NULL is the
--     default: the allowlist applies to `default` (the operator's own) and
--     to no other tenant.
ALTER TABLE tenants
    ADD COLUMN deliveries_per_second double precision CHECK (deliveries_per_second > 0 AND deliveries_per_second <= 100000),
    ADD COLUMN allow_private_targets boolean;

-- A tenant's next send slot under its deliveries_per_second, shared by
-- every worker, as endpoint_rate_slots is an endpoint's (migration 010):
-- its own hot row, kept out of the tenants row the API reads.
CREATE TABLE tenant_rate_slots (
    tenant_id  text PRIMARY KEY REFERENCES tenants (id),
    next_slot  timestamptz NOT NULL,
    throttled  bigint NOT NULL DEFAULT 0
);
