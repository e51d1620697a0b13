-- The rows stay parked for the code before 003, which drains them by
-- sequence.
ALTER TABLE parked_events
    DROP CONSTRAINT IF EXISTS parked_events_correlation_previous,
    DROP COLUMN IF EXISTS previous_sequence;
