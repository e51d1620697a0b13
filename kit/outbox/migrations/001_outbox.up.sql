-- The transactional outbox: a producer writes its events here in the same
-- transaction as its own state change (outbox.Enqueue), so an event exists
-- exactly when the change it describes committed. `hookflow relay` moves the
-- rows into hookflow's ledger and starts their workflows.

CREATE TABLE outbox (
    -- position is only a stable row handle; order within a correlation is
    -- the producer's sequence, never the insert order.
    position       bigserial PRIMARY KEY,
    id             text NOT NULL UNIQUE,
    correlation_id text NOT NULL,
    sequence       bigint NOT NULL CHECK (sequence >= 1),
    endpoint_id    text NOT NULL,
    type           text NOT NULL,
    -- json, not jsonb: the canonical text Enqueue wrote comes back byte for
    -- byte, so the relay judges exactly what the producer hashed.
    data           json NOT NULL,
    -- intake.PayloadHash of the canonical event: "same id, same content" is
    -- a no-op, "same id, other content" a conflict.
    payload_hash   bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    -- pending: not in hookflow yet; relayed: in the ledger with its workflow
    -- started; failed: hookflow refused it (failure says why). A failed row
    -- is terminal until an operator sets it back to pending.
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'relayed', 'failed')),
    relayed_at     timestamptz,
    failure        text,
    -- Transient trouble (Temporal or hookflow's database unavailable) leaves
    -- the row pending; the last error is kept here for operators.
    attempts       integer NOT NULL DEFAULT 0,
    last_error     text,
    -- A sequence belongs to one event: a second id claiming it is refused in
    -- the producer's transaction, where the producer can still react.
    UNIQUE (correlation_id, sequence)
);

-- The relay's work list: pending rows per correlation, in sequence order.
CREATE INDEX outbox_pending_idx ON outbox (correlation_id, sequence) WHERE state = 'pending';

-- Relayed rows are pruned after a retention period; hookflow's ledger, not
-- this table, is the dedup of record.
CREATE INDEX outbox_relayed_idx ON outbox (relayed_at) WHERE state = 'relayed';

-- One notification per committing transaction (Postgres folds identical
-- notifications of a transaction into one), sent only if it commits: a relay
-- listening wakes at once instead of at its next poll.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookflow_outbox', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
