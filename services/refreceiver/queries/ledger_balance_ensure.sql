-- name: LedgerBalanceEnsure :exec
INSERT INTO ledger_balances (endpoint_id, correlation_id) VALUES ($1, $2)
ON CONFLICT (endpoint_id, correlation_id) DO NOTHING;
