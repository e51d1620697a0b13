-- A close keeps when the outage it ended opened (outage_opened_at, beside
-- 021's outage_failing_since): a close left out of its interval
-- (store.CircuitEventEvery) and published late by the sweep
-- (CircuitsEventCatchUp) names the outage's opened_at as a close published
-- at once does. A close before this migration has none; its late event
-- goes without, as before.
ALTER TABLE endpoint_circuits ADD COLUMN outage_opened_at timestamptz;
