SELECT event_id FROM ledger_entries WHERE correlation_id = $1 ORDER BY sequence;
