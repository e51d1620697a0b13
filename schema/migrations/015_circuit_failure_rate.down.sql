ALTER TABLE endpoint_circuits DROP COLUMN rate_counted_at;
ALTER TABLE endpoints DROP COLUMN circuit_min_attempts, DROP COLUMN circuit_window_ms, DROP COLUMN circuit_failure_rate;
