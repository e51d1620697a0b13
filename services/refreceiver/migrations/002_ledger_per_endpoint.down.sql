-- Back to one ledger per correlation: only the rows from before 002
-- (endpoint_id '') fit it, so the lanes of named endpoints are dropped.
DELETE FROM ledger_entries WHERE endpoint_id <> '';
DELETE FROM ledger_balances WHERE endpoint_id <> '';
ALTER TABLE ledger_balances
    DROP CONSTRAINT ledger_balances_pkey,
    DROP COLUMN endpoint_id,
    ADD PRIMARY KEY (correlation_id);
ALTER TABLE ledger_entries
    DROP CONSTRAINT ledger_entries_pkey,
    DROP CONSTRAINT ledger_entries_lane_sequence,
    DROP COLUMN endpoint_id,
    ADD PRIMARY KEY (event_id),
    ADD CONSTRAINT ledger_entries_correlation_id_sequence_key UNIQUE (correlation_id, sequence);
