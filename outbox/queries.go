package outbox

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"
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
	book, err := parseQueryFiles(queryFiles, "queries")
	if err != nil {
		return nil, err
	}
	var q queries
	v := reflect.ValueOf(&q).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		sql, ok := book[name]
		if !ok {
			return nil, fmt.Errorf("outbox: no query named %s", name)
		}
		v.Field(i).SetString(sql)
	}
	return &q, nil
})

// parseQueryFiles reads every *.sql file in dir. A line "-- name: X" starts
// query X, which runs to the next such line or the end of the file.
func parseQueryFiles(fsys fs.FS, dir string) (map[string]string, error) {
	files, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list queries: %w", err)
	}
	book := map[string]string{}
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
