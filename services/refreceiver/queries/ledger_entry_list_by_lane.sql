-- name: LedgerEntryListByLane :many
SELECT event_id FROM ledger_entries WHERE endpoint_id = $1 AND correlation_id = $2 ORDER BY sequence;
