-- Pruning of processed_events (receiver.Prune). 001 kept every row for ever,
-- because a retry of an event whose row was gone would have been taken for
-- another event ID claiming its sequence (409). The watermark below closes
-- that hole: a row is deleted only when its sequence is strictly below its
-- correlation's cursor, in the same transaction that raises the watermark,
-- and an unknown ID at or below the watermark is answered "already
-- processed" without applying anything. Nothing can be applied there anyway:
-- the cursor's compare-and-swap refuses every sequence at or below it.
--
-- pruned_through is the highest sequence of the correlation whose
-- processed_events row was pruned (0: none). It stays below last_sequence:
-- the row at the cursor itself is never pruned.
ALTER TABLE correlation_cursors
    ADD COLUMN pruned_through bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT correlation_cursors_pruned_below_cursor
        CHECK (pruned_through >= 0 AND (pruned_through = 0 OR pruned_through < last_sequence));

-- What Prune reads: processed rows oldest first. Building it locks writes to
-- processed_events until it is done; on a large table, create it beforehand
-- with CREATE INDEX CONCURRENTLY under this name (IF NOT EXISTS then skips it).
CREATE INDEX IF NOT EXISTS processed_events_processed_at ON processed_events (processed_at);
