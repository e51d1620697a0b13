-- The stuck-heads sweep (EventsStuckHeadsClaim), which every API process
-- runs every second, read every event not finished (the whole backlog,
-- events_pending_idx) and sorted the heads it found, to take 100: at 100,000
-- pending events that was seconds of work per call. It now reads the
-- correlations, one head each, in the order it is due to look at them, off
-- an index that holds only the correlations with an event not finished, and
-- stops at its LIMIT.
--
-- high_water: the highest sequence accepted, moved by EventInsert in the
-- statement that stores the event (GREATEST, under the row's lock, so it
-- never goes back). Every sequence below the cursor is finished and none at
-- or above it is, so high_water >= next_sequence says "something is not
-- finished" without reading the events.
--
-- swept_at: when the sweep last took the correlation's head in hand: its
-- lease, on the correlation rather than on the event, so that the due
-- order below is one index. A correlation is due once both its cursor's
-- last move (updated_at) and its lease are older than HOOKFLOW_REPAIR_AFTER;
-- a head whose repair failed is stamped again, which puts it at the back.
ALTER TABLE correlations
    ADD COLUMN high_water bigint NOT NULL DEFAULT 0,
    ADD COLUMN swept_at timestamptz;

-- A correlation now has its row from its first accepted event on (it had
-- one from its first finished event); those with none yet are nothing
-- finished, so their cursor is on 1. One pass over events, once.
INSERT INTO correlations AS c (correlation_id, high_water)
SELECT correlation_id, max(sequence) FROM events GROUP BY correlation_id
ON CONFLICT (correlation_id) DO UPDATE SET high_water = EXCLUDED.high_water;

-- Only correlations with an event not finished: idle ones, however many
-- (correlations keeps a row for every correlation ever seen), are not in it.
CREATE INDEX correlations_due_idx ON correlations ((GREATEST(updated_at, swept_at)))
    WHERE high_water >= next_sequence;
