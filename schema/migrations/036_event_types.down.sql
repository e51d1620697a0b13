DROP TABLE IF EXISTS event_types;
