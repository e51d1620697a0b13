DROP TABLE endpoint_circuits;
ALTER TABLE endpoints DROP COLUMN disable_after_ms, DROP COLUMN auto_replay, DROP COLUMN circuit_failure_threshold;
