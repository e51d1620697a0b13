DROP INDEX IF EXISTS events_log_type_idx;
DROP INDEX IF EXISTS events_log_idx;
