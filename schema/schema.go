// Package schema holds hookflow's SQL: numbered migrations applied by
// `hookflow migrate`, and the named queries the rest of the code runs. Both
// are embedded in the binary.
package schema

import (
	"bufio"
	"context"
	"embed"
	"errors"
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

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed queries/*.sql
var queryFiles embed.FS

// ErrPending is returned by CheckCurrent while migrations wait to be applied.
var ErrPending = errors.New("database schema is not current: run `hookflow migrate` first")

// Migration is one numbered up-migration.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded up-migrations in version order.
func Migrations() ([]Migration, error) {
	return readMigrations(migrationFiles, "migrations")
}

func readMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".up.sql")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

type migrateQueries struct {
	MigrationsTableCreate string
	MigrationsLock        string
	MigrationsApplied     string
	MigrationsRecord      string
	MigrationsTableExists string
}

// Migrate applies every pending migration in one transaction, under an
// advisory lock so concurrent `hookflow migrate` runs wait for each other.
// It returns the names it applied; none when the schema is current.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var q migrateQueries
	if err := Load(&q); err != nil {
		return nil, err
	}
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []string
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q.MigrationsLock); err != nil {
			return fmt.Errorf("lock migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, q.MigrationsTableCreate); err != nil {
			return fmt.Errorf("create migrations table: %w", err)
		}
		done, err := appliedVersions(ctx, tx, q.MigrationsApplied)
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
			if _, err := tx.Exec(ctx, q.MigrationsRecord, m.Version, m.Name); err != nil {
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

// Pending returns the names of migrations not applied yet.
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var q migrateQueries
	if err := Load(&q); err != nil {
		return nil, err
	}
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, q.MigrationsTableExists).Scan(&exists); err != nil {
		return nil, fmt.Errorf("check migrations table: %w", err)
	}
	done := map[int]bool{}
	if exists {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("acquire connection: %w", err)
		}
		defer conn.Release()
		if done, err = appliedVersions(ctx, conn.Conn(), q.MigrationsApplied); err != nil {
			return nil, err
		}
	}
	var pending []string
	for _, m := range ms {
		if !done[m.Version] {
			pending = append(pending, m.Name)
		}
	}
	return pending, nil
}

// CheckCurrent returns ErrPending (wrapped, naming them) while any migration
// is pending. Services call it at start and refuse to run on an old schema.
func CheckCurrent(ctx context.Context, pool *pgxpool.Pool) error {
	pending, err := Pending(ctx, pool)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w (pending: %s)", ErrPending, strings.Join(pending, ", "))
	}
	return nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func appliedVersions(ctx context.Context, q querier, sql string) (map[int]bool, error) {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	done := make(map[int]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}

// Load fills every string field of the struct dst points to with the
// embedded query of the same name ("-- name: EventInsert" blocks in
// queries/*.sql). A field without a query is an error, so a typo fails at
// start-up rather than at the first call.
func Load(dst any) error {
	all, err := parseQueries(queryFiles, "queries")
	if err != nil {
		return err
	}
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() != reflect.String {
			continue
		}
		q, ok := all[f.Name]
		if !ok {
			return fmt.Errorf("schema: no query named %s", f.Name)
		}
		v.Field(i).SetString(q)
	}
	return nil
}

func parseQueries(fsys fs.FS, dir string) (map[string]string, error) {
	files, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, file := range files {
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		var name string
		var body strings.Builder
		flush := func() error {
			if name == "" {
				return nil
			}
			if _, dup := out[name]; dup {
				return fmt.Errorf("schema: query %s defined twice", name)
			}
			out[name] = strings.TrimSpace(body.String())
			body.Reset()
			return nil
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
				if err := flush(); err != nil {
					return nil, err
				}
				name = strings.TrimSpace(n)
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
	return out, nil
}
