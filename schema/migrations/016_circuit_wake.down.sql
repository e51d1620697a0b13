DROP INDEX deliveries_delivering_idx;
DROP INDEX endpoint_circuits_wake_idx;
ALTER TABLE endpoint_circuits DROP COLUMN wake_requested_at;
