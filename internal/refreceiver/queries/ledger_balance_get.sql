SELECT balance::text, last_sequence FROM ledger_balances WHERE correlation_id = $1;
