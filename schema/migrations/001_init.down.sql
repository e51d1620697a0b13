DROP TABLE IF EXISTS dead_letters;
DROP TABLE IF EXISTS delivery_attempts;
DROP TABLE IF EXISTS events;
DROP TABLE IF EXISTS correlations;
DROP TABLE IF EXISTS endpoints;
