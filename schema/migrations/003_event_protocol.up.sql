-- Which ordering protocol each event's workflow runs. 1: its correlation's
-- sequencer workflow releases it (every event accepted before this
-- migration; upgrade workers before APIs, see README). 2: the ledger
-- does: the event is released when the correlation's next_sequence reaches
-- it; until then it is only stored, and the event before it starts its
-- workflow when it finishes.
--
-- An API stores a new event with protocol 2 only when its correlation has no
-- unfinished protocol-1 event (under a per-correlation lock), so a
-- correlation never has both kinds in play: a sequencer never waits for an
-- event it will not hear of.
ALTER TABLE events ADD COLUMN protocol smallint NOT NULL DEFAULT 1;

-- The unfinished protocol-1 events: what that check reads. Empty once every
-- event from before the upgrade is delivered or skipped.
CREATE INDEX IF NOT EXISTS events_sequencer_open_idx ON events (correlation_id)
    WHERE protocol < 2 AND state NOT IN ('delivered', 'skipped');
