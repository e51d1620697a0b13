DROP INDEX IF EXISTS deliveries_operational_type_idx;
DROP INDEX IF EXISTS deliveries_type_idx;
ALTER TABLE deliveries DROP COLUMN type;
