-- The endpoint health figures fall back to delivery_attempts_started_idx.
DROP INDEX IF EXISTS delivery_attempts_endpoint_started_idx;
