DROP TABLE IF EXISTS ledger_balances;
DROP TABLE IF EXISTS ledger_entries;
