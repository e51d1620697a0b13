-- The queued sweep takes events in the order they became due: accepted, or
-- last taken in hand (swept_at). It took them by accepted_at alone, so an
-- event it could never start (its sequencer never answers) was the oldest
-- and took the front of every batch once its lease ran out.
DROP INDEX IF EXISTS events_queued_idx;
CREATE INDEX events_queued_idx ON events ((GREATEST(accepted_at, swept_at))) WHERE state = 'queued';
