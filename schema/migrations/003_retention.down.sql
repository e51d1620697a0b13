DROP TABLE IF EXISTS cleaner_runs;
DROP INDEX IF EXISTS delivery_attempts_started_idx;
DROP INDEX IF EXISTS events_key_prunable_idx;
DROP INDEX IF EXISTS events_payload_prunable_idx;
UPDATE events SET data = '{}'::jsonb WHERE data IS NULL;
ALTER TABLE events ALTER COLUMN data SET NOT NULL;
ALTER TABLE events DROP COLUMN IF EXISTS has_dead_letter;
