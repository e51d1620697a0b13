package receiver

import (
	"embed"
	"fmt"

	"github.com/hookflow/hookflow/kit/sqlfile"
)

// queryFiles holds the kit's SQL, one "-- name: X" block per query.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// Query names, entity first. Each must have a block in queries/*.sql;
// loadQueries refuses to return a book missing one.
const (
	qMigrationLock        = "MigrationLock"
	qMigrationTableCreate = "MigrationTableCreate"
	qMigrationTableExists = "MigrationTableExists"
	qMigrationList        = "MigrationList"
	qMigrationInsert      = "MigrationInsert"

	qProcessedEventInsert           = "ProcessedEventInsert"
	qProcessedEventExists           = "ProcessedEventExists"
	qProcessedEventDelete           = "ProcessedEventDelete"
	qCorrelationCursorEnsure        = "CorrelationCursorEnsure"
	qCorrelationCursorLock          = "CorrelationCursorLock"
	qCorrelationCursorAdvance       = "CorrelationCursorAdvance"
	qCorrelationCursorGet           = "CorrelationCursorGet"
	qCorrelationCursorListEndpoints = "CorrelationCursorListEndpoints"
	qParkedEventInsert              = "ParkedEventInsert"
	qParkedEventExists              = "ParkedEventExists"
	qParkedEventGetByPrevious       = "ParkedEventGetByPrevious"
	qParkedEventDeleteSuperseded    = "ParkedEventDeleteSuperseded"
	qParkedEventListByLane          = "ParkedEventListByLane"

	qProcessedEventPruneLock   = "ProcessedEventPruneLock"
	qProcessedEventPruneUnlock = "ProcessedEventPruneUnlock"
	qProcessedEventPrune       = "ProcessedEventPrune"
)

// queryBook maps query names to SQL text.
type queryBook map[string]string

// loadQueries parses the embedded query files.
func loadQueries() (queryBook, error) {
	book, err := sqlfile.Parse(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("load queries: %w", err)
	}
	for _, name := range []string{
		qMigrationLock, qMigrationTableCreate, qMigrationTableExists, qMigrationList, qMigrationInsert,
		qProcessedEventInsert, qProcessedEventExists, qProcessedEventDelete,
		qCorrelationCursorEnsure, qCorrelationCursorLock, qCorrelationCursorAdvance, qCorrelationCursorGet, qCorrelationCursorListEndpoints,
		qParkedEventInsert, qParkedEventExists, qParkedEventGetByPrevious, qParkedEventDeleteSuperseded,
		qParkedEventListByLane,
		qProcessedEventPruneLock, qProcessedEventPruneUnlock, qProcessedEventPrune,
	} {
		if book[name] == "" {
			return nil, fmt.Errorf("load queries: %s is missing", name)
		}
	}
	return book, nil
}
