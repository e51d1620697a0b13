INSERT INTO ledger_balances (correlation_id) VALUES ($1)
ON CONFLICT (correlation_id) DO NOTHING;
