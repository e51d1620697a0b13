-- name: LedgerEntryInsert :exec
INSERT INTO ledger_entries (endpoint_id, event_id, correlation_id, sequence, amount)
VALUES ($1, $2, $3, $4, sqlc.arg(amount)::numeric);
