package receiver

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"strings"
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

	qProcessedEventInsert         = "ProcessedEventInsert"
	qProcessedEventExists         = "ProcessedEventExists"
	qProcessedEventDelete         = "ProcessedEventDelete"
	qCorrelationCursorEnsure      = "CorrelationCursorEnsure"
	qCorrelationCursorLock        = "CorrelationCursorLock"
	qCorrelationCursorAdvance     = "CorrelationCursorAdvance"
	qCorrelationCursorGet         = "CorrelationCursorGet"
	qParkedEventInsert            = "ParkedEventInsert"
	qParkedEventExists            = "ParkedEventExists"
	qParkedEventGetBySequence     = "ParkedEventGetBySequence"
	qParkedEventDeleteBySequence  = "ParkedEventDeleteBySequence"
	qParkedEventListByCorrelation = "ParkedEventListByCorrelation"
)

// queryBook maps query names to SQL text.
type queryBook map[string]string

// loadQueries parses the embedded query files.
func loadQueries() (queryBook, error) {
	sub, err := fs.Sub(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("open queries: %w", err)
	}
	book, err := parseQueryFiles(sub)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{
		qMigrationLock, qMigrationTableCreate, qMigrationTableExists, qMigrationList, qMigrationInsert,
		qProcessedEventInsert, qProcessedEventExists, qProcessedEventDelete,
		qCorrelationCursorEnsure, qCorrelationCursorLock, qCorrelationCursorAdvance, qCorrelationCursorGet,
		qParkedEventInsert, qParkedEventExists, qParkedEventGetBySequence, qParkedEventDeleteBySequence,
		qParkedEventListByCorrelation,
	} {
		if book[name] == "" {
			return nil, fmt.Errorf("load queries: %s is missing", name)
		}
	}
	return book, nil
}

// parseQueryFiles reads every *.sql file at the root of fsys. A line
// "-- name: X" starts query X, which runs to the next such line or the end of
// the file; anything before the first one is a file comment.
func parseQueryFiles(fsys fs.FS) (queryBook, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list queries: %w", err)
	}
	book := queryBook{}
	for _, file := range files {
		src, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		var name string
		var body strings.Builder
		flush := func() error {
			if name == "" {
				return nil
			}
			if _, dup := book[name]; dup {
				return fmt.Errorf("parse %s: query %s defined twice", file, name)
			}
			book[name] = strings.TrimSpace(body.String())
			body.Reset()
			return nil
		}
		sc := bufio.NewScanner(strings.NewReader(string(src)))
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
				if err := flush(); err != nil {
					return nil, err
				}
				name = strings.TrimSpace(rest)
				continue
			}
			if name != "" {
				body.WriteString(line)
				body.WriteByte('\n')
			}
		}
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return book, nil
}
