DROP INDEX IF EXISTS events_sequencer_open_idx;
ALTER TABLE events DROP COLUMN IF EXISTS protocol;
