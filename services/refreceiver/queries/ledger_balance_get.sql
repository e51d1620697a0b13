-- name: LedgerBalanceGet :one
SELECT balance::text, last_sequence FROM ledger_balances WHERE endpoint_id = $1 AND correlation_id = $2;
