-- The producer's metadata about an event (region, plan, source), as POST
-- /v1/events takes it: endpoints' filters may match on it beside data.
-- NULL when the producer sent none. Part of the event's content, so the
-- payload hash covers it (intake.MetadataHash).
ALTER TABLE outbox ADD COLUMN metadata jsonb
    CONSTRAINT outbox_metadata_object CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object');
