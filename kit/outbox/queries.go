package outbox

import (
	"embed"
	"fmt"
	"sync"

	"github.com/hookflow/hookflow/kit/sqlfile"
)

// queryFiles holds the package's SQL, one "-- name: X" block per query.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// queries is every statement the package runs, filled by name from
// queries/*.sql.
type queries struct {
	OutboxInsert              string
	OutboxHashGet             string
	OutboxListen              string
	OutboxCorrelationsPending string
	OutboxCorrelationLock     string
	OutboxPendingList         string
	OutboxMarkRelayed         string
	OutboxMarkFailed          string
	OutboxNoteError           string
	OutboxLag                 string
	OutboxFailedCount         string
	OutboxPruneRelayed        string
	MigrationLock             string
	MigrationTableCreate      string
	MigrationTableExists      string
	MigrationList             string
	MigrationInsert           string
}

// loadQueries parses the embedded SQL once; the result never changes, so
// sharing it is not shared mutable state.
var loadQueries = sync.OnceValues(func() (*queries, error) {
	book, err := sqlfile.Parse(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var q queries
	if err := sqlfile.Fill(&q, book); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &q, nil
})
