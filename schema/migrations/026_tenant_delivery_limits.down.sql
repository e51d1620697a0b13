DROP TABLE tenant_rate_slots;
ALTER TABLE tenants DROP COLUMN allow_private_targets, DROP COLUMN deliveries_per_second;
