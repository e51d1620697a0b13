DROP INDEX IF EXISTS dead_letters_endpoint_log_idx;
DROP INDEX IF EXISTS dead_letters_log_idx;
DROP INDEX IF EXISTS deliveries_log_idx;
ALTER TABLE deliveries DROP COLUMN accepted_at;
