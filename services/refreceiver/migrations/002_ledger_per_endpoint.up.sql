-- The ledger is kept per lane, as the receiver kit's cursor is (its
-- migration 004): one reference receiver may serve several endpoints, and
-- an event fanned out to two of them is one entry in each endpoint's
-- ledger. Rows from before name no endpoint; they stay under endpoint_id ''.
ALTER TABLE ledger_entries ADD COLUMN endpoint_id text NOT NULL DEFAULT '';
ALTER TABLE ledger_entries ALTER COLUMN endpoint_id DROP DEFAULT;
ALTER TABLE ledger_entries
    DROP CONSTRAINT ledger_entries_pkey,
    DROP CONSTRAINT ledger_entries_correlation_id_sequence_key,
    ADD PRIMARY KEY (endpoint_id, event_id),
    ADD CONSTRAINT ledger_entries_lane_sequence UNIQUE (endpoint_id, correlation_id, sequence);

ALTER TABLE ledger_balances ADD COLUMN endpoint_id text NOT NULL DEFAULT '';
ALTER TABLE ledger_balances ALTER COLUMN endpoint_id DROP DEFAULT;
ALTER TABLE ledger_balances
    DROP CONSTRAINT ledger_balances_pkey,
    ADD PRIMARY KEY (endpoint_id, correlation_id);
