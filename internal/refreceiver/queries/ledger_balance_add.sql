-- The balance only moves forward: an entry at or behind the lane's
-- sequence matches no row and the application refuses it. (The kit has
-- already checked order on previous_sequence; sequences this endpoint never
-- gets leave gaps here.)
UPDATE ledger_balances
SET balance = balance + $4::numeric, last_sequence = $3, updated_at = now()
WHERE endpoint_id = $1 AND correlation_id = $2 AND last_sequence < $3;
