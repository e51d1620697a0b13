-- Operational events: hookflow publishes its own events
-- about an endpoint (hookflow.endpoint.*, hookflow.dead_letter.*) as
-- ordinary events whose correlation ID is the endpoint's ID. Their sequence
-- numbers must be contiguous per endpoint, as every correlation's are, or
-- the sequencer would wait forever on a gap. One counter row per endpoint,
-- moved (INSERT ... ON CONFLICT DO UPDATE, which locks the row) in the very
-- transaction that inserts the event: a rollback takes the number back with
-- the event, and two publishers about one endpoint take turns on the row
-- rather than reading the same number. Never pruned: the numbers go on for
-- the endpoint's lifetime, as its correlation's cursor does.
CREATE TABLE operational_sequences (
    endpoint_id   text PRIMARY KEY REFERENCES endpoints (id),
    last_sequence bigint NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
