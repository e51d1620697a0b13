-- Retention: the cleaner (package services/cleaner, run by every API process,
-- one at a time) prunes finished events by age. Nothing else is pruned: an
-- event still waiting, delivering or dead-lettered keeps everything, and so
-- does a dead letter however old.
--
-- A delivered or skipped event loses its payload after
-- HOOKFLOW_PAYLOAD_RETENTION; data is NULL from then on, while the key, the
-- payload hash, correlation, sequence, state and times stay, so a repost is
-- answered exactly as before (200 same content, 422 other content, 409 a
-- passed sequence).
ALTER TABLE events ALTER COLUMN data DROP NOT NULL;

-- has_dead_letter: a dead letter was written for the event (in the same
-- transaction). Such an event is never pruned, even once delivered or
-- skipped, since its dead letters are kept for ever; the flag keeps it out of
-- the key pruner's index, which would otherwise read it again on every run.
ALTER TABLE events ADD COLUMN has_dead_letter boolean NOT NULL DEFAULT false;

-- The two indexes below are disjoint, so each pruner reads only its own
-- candidates and each empties as it prunes (one index for both kept the rows
-- the payload pruner had done with in front of its next batch).

-- The finished events that still carry a payload, oldest finish first: what
-- the payload pruner reads.
CREATE INDEX events_payload_prunable_idx ON events (updated_at)
    WHERE state IN ('delivered', 'skipped') AND data IS NOT NULL;

-- The finished events whose payload is gone and that have no dead letter,
-- by finish time: what the key pruner reads (HOOKFLOW_KEY_RETENTION is at
-- least the payload retention, so every key it may delete is here).
CREATE INDEX events_key_prunable_idx ON events (updated_at)
    WHERE state IN ('delivered', 'skipped') AND data IS NULL AND NOT has_dead_letter;

-- Attempts by age: what the attempt pruner reads.
CREATE INDEX delivery_attempts_started_idx ON delivery_attempts (started_at);

-- What the cleaner did last, for GET /v1/stats and hookflow status: one row.
CREATE TABLE cleaner_runs (
    id               smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    payloads_pruned  bigint NOT NULL,
    attempts_deleted bigint NOT NULL,
    keys_deleted     bigint NOT NULL,
    error            text
);
