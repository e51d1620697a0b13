-- Endpoint health (GET /v1/endpoints/{id}/stats): one endpoint's attempts
-- of the last hour, for its success rate and latency percentiles. Without
-- this index that is a range of delivery_attempts_started_idx holding every
-- endpoint's attempts of the hour, each row fetched to be filtered; with it,
-- the endpoint's own hour is one range, and the columns the figures read are
-- in the index (INCLUDE), so a vacuumed table answers from the index alone.
--
-- Built in the migration's transaction, not CONCURRENTLY (the runner applies
-- every migration in one transaction): writes of attempts wait while it is
-- built, which on a table kept short by HOOKFLOW_ATTEMPT_RETENTION takes
-- moments. An operator with a long attempt history can build it beforehand
-- with CREATE INDEX CONCURRENTLY under this name; IF NOT EXISTS then keeps
-- this migration from failing on it.
CREATE INDEX IF NOT EXISTS delivery_attempts_endpoint_started_idx
    ON delivery_attempts (endpoint_id, started_at) INCLUDE (latency_ms, outcome);
