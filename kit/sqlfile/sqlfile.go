// Package sqlfile is what every package with SQL of its own shares: named
// queries read from embedded *.sql files, and numbered migrations applied in
// one transaction and recorded in a table of the package's choosing. hookflow's
// schema, the receiver kit, the reference receiver and the outbox each keep
// their own files and migration table, and run them through this one runner.
package sqlfile

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Parse reads every *.sql file in dir of fsys. A line "-- name: X" starts
// query X, which runs to the next such line or the end of the file; anything
// before the first one is a file comment. A name defined twice is an error.
func Parse(fsys fs.FS, dir string) (map[string]string, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
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

// Fill sets every string field of the struct dst points to from the query
// of the same name in book; a field without a query is an error.
func Fill(dst any, book map[string]string) error {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() != reflect.String {
			continue
		}
		sql, ok := book[f.Name]
		if !ok {
			return fmt.Errorf("no query named %s", f.Name)
		}
		v.Field(i).SetString(sql)
	}
	return nil
}

// Migration is one NNN_name.up.sql file.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// Migrations returns the NNN_name.up.sql files in dir of fsys in version
// order; versions must be positive and distinct.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.up.sql"))
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := make([]Migration, 0, len(files))
	for _, file := range files {
		name := strings.TrimSuffix(path.Base(file), ".up.sql")
		num, _, ok := strings.Cut(name, "_")
		version, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and an underscore", file)
		}
		src, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", file, err)
		}
		out = append(out, Migration{Version: version, Name: name, SQL: string(src)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// Ledger is the SQL that records which migrations a database has: each
// package keeps its own table (and advisory lock key) in its query files.
type Ledger struct {
	Lock        string // takes the advisory lock that serialises migrators
	CreateTable string // creates the table if it does not exist
	TableExists string // one boolean: does the table exist
	Applied     string // the applied versions
	Record      string // records ($1 version, $2 name)
}

// Apply applies the migrations not yet recorded, in one transaction under
// the advisory lock, and returns their names. It is idempotent and safe to
// run from several processes at once; a failed migration leaves the schema
// as it was.
func (l Ledger) Apply(ctx context.Context, pool *pgxpool.Pool, ms []Migration) ([]string, error) {
	var applied []string
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, l.Lock); err != nil {
			return fmt.Errorf("lock migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, l.CreateTable); err != nil {
			return fmt.Errorf("create migration table: %w", err)
		}
		done, err := l.applied(ctx, tx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if done[m.Version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, l.Record, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, err)
			}
			applied = append(applied, m.Name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// Pending returns the names of the migrations the database has not
// recorded, reading in one read-only transaction.
func (l Ledger) Pending(ctx context.Context, pool *pgxpool.Pool, ms []Migration) ([]string, error) {
	var pending []string
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, l.TableExists).Scan(&exists); err != nil {
			return fmt.Errorf("look up migration table: %w", err)
		}
		done := map[int64]bool{}
		if exists {
			var err error
			if done, err = l.applied(ctx, tx); err != nil {
				return err
			}
		}
		for _, m := range ms {
			if !done[m.Version] {
				pending = append(pending, m.Name)
			}
		}
		return nil
	})
	return pending, err
}

func (l Ledger) applied(ctx context.Context, tx pgx.Tx) (map[int64]bool, error) {
	rows, err := tx.Query(ctx, l.Applied)
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	done := make(map[int64]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}

// Check returns nil when every migration is recorded, and an error wrapping
// pending (the caller's sentinel) naming the missing ones otherwise.
func (l Ledger) Check(ctx context.Context, pool *pgxpool.Pool, ms []Migration, pending error) error {
	names, err := l.Pending(ctx, pool, ms)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %s", pending, strings.Join(names, ", "))
	}
	return nil
}
