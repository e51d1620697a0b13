-- Dropping the watermark forgets which sequences were pruned: a retry of a
-- pruned event is then answered 409 (sequence conflict) instead of "already
-- processed". Still nothing is applied twice.
DROP INDEX IF EXISTS processed_events_processed_at;
ALTER TABLE correlation_cursors
    DROP CONSTRAINT IF EXISTS correlation_cursors_pruned_below_cursor,
    DROP COLUMN IF EXISTS pruned_through;
