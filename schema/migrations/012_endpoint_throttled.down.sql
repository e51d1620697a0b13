ALTER TABLE endpoint_rate_slots DROP COLUMN IF EXISTS throttled;
