ALTER TABLE dead_letters DROP COLUMN last_attempt_id;
ALTER TABLE endpoint_circuits DROP COLUMN auto_replay_turn_at, DROP COLUMN wake_turn_at, DROP COLUMN wake_after_stamp, DROP COLUMN wake_after;
DROP INDEX IF EXISTS endpoint_circuits_event_catch_up_idx;
ALTER TABLE endpoint_circuits
    DROP COLUMN events_coalesced,
    DROP COLUMN event_at,
    DROP COLUMN event_state,
    DROP COLUMN outage_backoff_ms,
    DROP COLUMN outage_failing_since,
    DROP COLUMN probe_successes;
UPDATE endpoint_circuits SET state = 'open' WHERE state = 'half_open';
ALTER TABLE endpoint_circuits DROP CONSTRAINT endpoint_circuits_state_check;
ALTER TABLE endpoint_circuits ADD CONSTRAINT endpoint_circuits_state_check CHECK (state IN ('closed', 'open'));
