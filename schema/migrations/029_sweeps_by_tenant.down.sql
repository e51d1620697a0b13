DROP INDEX IF EXISTS correlations_due_idx;
CREATE INDEX correlations_due_idx ON correlations ((GREATEST(updated_at, swept_at)))
    WHERE high_water >= next_sequence;
DROP INDEX IF EXISTS events_queued_idx;
CREATE INDEX events_queued_idx ON events ((GREATEST(accepted_at, swept_at))) WHERE state = 'queued';
