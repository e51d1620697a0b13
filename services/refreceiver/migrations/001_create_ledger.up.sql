-- The reference receiver's application state: a ledger per correlation ID.
-- Apply writes both tables inside the receiver kit's transaction, so an
-- entry exists exactly when the kit's processed_events row does.

-- ledger_entries holds one row per applied event. entry_no records the
-- order of application, which must equal sequence order per correlation.
CREATE TABLE ledger_entries (
    entry_no       bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    event_id       text        PRIMARY KEY,
    correlation_id text        NOT NULL,
    sequence       bigint      NOT NULL CHECK (sequence >= 1),
    amount         numeric     NOT NULL,
    applied_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (correlation_id, sequence)
);

-- ledger_balances keeps the running balance. Its own last_sequence lets the
-- ledger check, independently of the kit, that entries arrive in order.
CREATE TABLE ledger_balances (
    correlation_id text        PRIMARY KEY,
    balance        numeric     NOT NULL DEFAULT 0,
    last_sequence  bigint      NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
