INSERT INTO ledger_entries (event_id, correlation_id, sequence, amount)
VALUES ($1, $2, $3, $4::numeric);
