DROP INDEX IF EXISTS events_queued_idx;
CREATE INDEX events_queued_idx ON events (accepted_at) WHERE state = 'queued';
