-- The producer's metadata about an event (region, plan, source), as POST
-- /v1/events takes it: endpoints' filters may match on it beside data.
-- NULL when the producer sent none. Part of the event's content, so the
-- payload hash covers it (intake.MetadataHash). json, as data is (001): the
-- relay hashes the text it reads back, which jsonb would rewrite (1e2 as
-- 100) and so refuse as a mismatch.
ALTER TABLE outbox ADD COLUMN metadata json
    CONSTRAINT outbox_metadata_object CHECK (metadata IS NULL OR json_typeof(metadata) = 'object');
