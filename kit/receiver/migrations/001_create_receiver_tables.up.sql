-- Receiver kit tables: the dedup ledger, the per-correlation cursor and the
-- parking lot for events that arrived ahead of their predecessors. Every
-- request touches them in one transaction, in this order: processed_events,
-- then correlation_cursors, then parked_events. Keeping that order everywhere
-- is what keeps concurrent requests free of deadlocks.

-- processed_events holds one row per applied event, written in the same
-- transaction as the application's own state change. Its primary key is the
-- dedup: a retried delivery finds its row and is answered "already processed".
-- Rows are kept forever on purpose: the sender may retry an event long after
-- it was applied (a lost acknowledgement, an operator replay), and a pruned
-- row would turn that retry into a sequence conflict.
CREATE TABLE processed_events (
    event_id       text        PRIMARY KEY,
    correlation_id text        NOT NULL,
    sequence       bigint      NOT NULL CHECK (sequence >= 1),
    processed_at   timestamptz NOT NULL DEFAULT now()
);

-- A sequence is applied once per correlation, whatever event ID claims it.
-- The cursor's compare-and-swap already guarantees this; the index makes the
-- database refuse it too.
CREATE UNIQUE INDEX processed_events_correlation_sequence
    ON processed_events (correlation_id, sequence);

-- correlation_cursors holds the last applied sequence per correlation. A
-- request locks its row (SELECT ... FOR UPDATE), so events of one correlation
-- are applied one at a time while other correlations proceed in parallel.
CREATE TABLE correlation_cursors (
    correlation_id text        PRIMARY KEY,
    last_sequence  bigint      NOT NULL DEFAULT 0 CHECK (last_sequence >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- parked_events holds events that arrived before their predecessor. The raw
-- body is kept byte for byte (it is what the signature covered) together with
-- the webhook headers, so an operator can see exactly what arrived; read it
-- as JSON with convert_from(body, 'UTF8')::jsonb. A row leaves when its event
-- is applied, either by the drain that follows its predecessor or by the
-- sender's retry.
CREATE TABLE parked_events (
    event_id       text        PRIMARY KEY,
    correlation_id text        NOT NULL,
    sequence       bigint      NOT NULL CHECK (sequence >= 1),
    body           bytea       NOT NULL,
    headers        jsonb       NOT NULL,
    parked_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (correlation_id, sequence)
);
