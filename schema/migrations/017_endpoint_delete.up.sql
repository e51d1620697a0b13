-- Deleting an endpoint (DELETE /v1/endpoints/{id}): for an
-- endpoint no one will enable again. The row stays, stamped, because its
-- deliveries, attempts and dead letters refer to it and are kept for the
-- audit; every query that finds, lists or routes endpoints leaves a deleted
-- one out, so it answers 404 afterwards. Its deliveries still open end
-- skipped: a released one at its next attempt, which finds it deleted and
-- sends nothing; a dead-lettered one by a skip that the API (and the sweep,
-- after a crash or a dead letter written during the delete) claims and
-- signals, recorded as deleted_by's.
ALTER TABLE endpoints ADD COLUMN deleted_at timestamptz;
ALTER TABLE endpoints ADD COLUMN deleted_by text;

-- The deleted endpoints whose open dead letters the sweep still has to skip:
-- a handful at any time.
CREATE INDEX endpoints_deleted_idx ON endpoints (id) WHERE deleted_at IS NOT NULL;
