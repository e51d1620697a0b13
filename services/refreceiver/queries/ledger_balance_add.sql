-- name: LedgerBalanceAdd :execrows
-- The balance only moves forward: an entry at or behind the lane's
-- sequence matches no row and the application refuses it. (The kit has
-- already checked order on previous_sequence; sequences this endpoint never
-- gets leave gaps here.)
UPDATE ledger_balances
SET balance = balance + sqlc.arg(amount)::numeric, last_sequence = sqlc.arg(sequence), updated_at = now()
WHERE endpoint_id = sqlc.arg(endpoint_id) AND correlation_id = sqlc.arg(correlation_id) AND last_sequence < sqlc.arg(sequence);
