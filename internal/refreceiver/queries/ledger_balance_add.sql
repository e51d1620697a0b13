-- The balance only moves forward: an entry at or behind the ledger's
-- sequence matches no row and the application refuses it. (The kit has
-- already checked order on previous_sequence; sequences this endpoint never
-- gets leave gaps here.)
UPDATE ledger_balances
SET balance = balance + $3::numeric, last_sequence = $2, updated_at = now()
WHERE correlation_id = $1 AND last_sequence < $2;
