-- event_types: the event types an endpoint is subscribed to (package
-- internal/eventtypes): exact names, "prefix.*" for every type below
-- "prefix.", or "*". NULL is every type, which is what every endpoint
-- registered before this column keeps. An empty list, or a NULL item, is
-- refused: an endpoint subscribed to nothing is a mistake the API answers
-- 400 to, and the store reads the items as strings.
--
-- No index: a type's subscribers are found among every enabled endpoint (a
-- prefix pattern cannot use one), and endpoints are few.
ALTER TABLE endpoints ADD COLUMN event_types text[]
    CONSTRAINT endpoints_event_types_valid
    CHECK (cardinality(event_types) > 0 AND array_position(event_types, NULL) IS NULL);
