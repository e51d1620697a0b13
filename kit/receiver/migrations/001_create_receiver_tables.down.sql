DROP TABLE IF EXISTS parked_events;
DROP TABLE IF EXISTS correlation_cursors;
DROP TABLE IF EXISTS processed_events;
