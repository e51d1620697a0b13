package refreceiver

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// queryFiles holds one query per file, named for the query.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// Query names: the file names under queries/ without ".sql".
const (
	qMigrationLock         = "migration_lock"
	qMigrationTableCreate  = "migration_table_create"
	qMigrationTableExists  = "migration_table_exists"
	qMigrationList         = "migration_list"
	qMigrationInsert       = "migration_insert"
	qLedgerBalanceEnsure   = "ledger_balance_ensure"
	qLedgerBalanceAdd      = "ledger_balance_add"
	qLedgerBalanceGet      = "ledger_balance_get"
	qLedgerEntryInsert     = "ledger_entry_insert"
	qLedgerEntryListByLane = "ledger_entry_list_by_lane"
)

// queryBook maps query names to SQL text.
type queryBook map[string]string

// loadQueries reads the embedded queries and checks none is missing.
func loadQueries() (queryBook, error) {
	files, err := fs.Glob(queryFiles, "queries/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list queries: %w", err)
	}
	book := make(queryBook, len(files))
	for _, f := range files {
		src, err := fs.ReadFile(queryFiles, f)
		if err != nil {
			return nil, fmt.Errorf("read query %s: %w", f, err)
		}
		book[strings.TrimSuffix(path.Base(f), ".sql")] = string(src)
	}
	for _, name := range []string{
		qMigrationLock, qMigrationTableCreate, qMigrationTableExists, qMigrationList, qMigrationInsert,
		qLedgerBalanceEnsure, qLedgerBalanceAdd, qLedgerBalanceGet, qLedgerEntryInsert, qLedgerEntryListByLane,
	} {
		if book[name] == "" {
			return nil, fmt.Errorf("load queries: %s is missing", name)
		}
	}
	return book, nil
}
