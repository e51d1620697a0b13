-- Events of a correlation reach an endpoint sparse (only those meant for it),
-- so an event no longer waits for sequence-1 but for the previous_sequence
-- its envelope names. The drain after an apply looks the parked event up by
-- it, hence the column and its unique index: one event follows a given
-- sequence, and a second ID claiming the same place is refused (409) as a
-- second ID at the same sequence is.
--
-- Rows parked before this migration are dropped rather than guessed at: a
-- parked event was answered 202, not applied, and its sender retries it, so
-- it parks again with its previous_sequence (or applies) on that retry.
DELETE FROM parked_events;

ALTER TABLE parked_events
    ADD COLUMN previous_sequence bigint NOT NULL
        CONSTRAINT parked_events_previous_below_sequence CHECK (previous_sequence >= 0 AND previous_sequence < sequence),
    ADD CONSTRAINT parked_events_correlation_previous UNIQUE (correlation_id, previous_sequence);
