DROP INDEX IF EXISTS events_delivered_at_idx;
DROP INDEX IF EXISTS events_undelivered_idx;
