-- Every endpoint is subscribed to every type again.
ALTER TABLE endpoints DROP COLUMN IF EXISTS event_types;
