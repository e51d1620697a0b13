package outbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles holds the outbox schema as numbered NNN_name.up.sql and
// NNN_name.down.sql files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrMigrationsPending is returned by CheckMigrations when the database lacks
// some of the outbox migrations.
var ErrMigrationsPending = errors.New("outbox migrations pending")

// Migrations returns the outbox schema: NNN_name.up.sql and NNN_name.down.sql
// at the root of the returned FS, the layout golang-migrate and similar tools
// read. Use it to apply the schema with the producer's own migration tool
// instead of Migrate.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		// fs.Sub fails only for an invalid path, and "migrations" is valid.
		panic(err)
	}
	return sub
}

type migration struct {
	version int64
	name    string
	up      string
}

func upMigrations(fsys fs.FS) ([]migration, error) {
	files, err := fs.Glob(fsys, "*.up.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := make([]migration, 0, len(files))
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
		out = append(out, migration{version: version, name: name, up: string(src)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Migrate applies the pending outbox migrations in one transaction and
// records them in outbox_schema_migrations, apart from the producer's own
// migration table. It is idempotent and safe to run from several processes at
// once: an advisory lock serialises them.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	q, err := loadQueries()
	if err != nil {
		return err
	}
	all, err := upMigrations(Migrations())
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q.MigrationLock); err != nil {
			return fmt.Errorf("lock outbox migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, q.MigrationTableCreate); err != nil {
			return fmt.Errorf("create outbox migration table: %w", err)
		}
		applied, err := appliedVersions(ctx, tx, q)
		if err != nil {
			return err
		}
		for _, m := range all {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.up); err != nil {
				return fmt.Errorf("apply outbox migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, q.MigrationInsert, m.version, m.name); err != nil {
				return fmt.Errorf("record outbox migration %s: %w", m.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// CheckMigrations returns nil when every outbox migration is applied, and an
// error wrapping ErrMigrationsPending naming the missing ones otherwise. The
// relay calls it at start and refuses to run on an old schema.
func CheckMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	q, err := loadQueries()
	if err != nil {
		return err
	}
	all, err := upMigrations(Migrations())
	if err != nil {
		return err
	}
	applied := map[int64]bool{}
	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, q.MigrationTableExists).Scan(&exists); err != nil {
			return fmt.Errorf("look up outbox migration table: %w", err)
		}
		if !exists {
			return nil
		}
		applied, err = appliedVersions(ctx, tx, q)
		return err
	})
	if err != nil {
		return err
	}
	var pending []string
	for _, m := range all {
		if !applied[m.version] {
			pending = append(pending, m.name)
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w: %s", ErrMigrationsPending, strings.Join(pending, ", "))
	}
	return nil
}

func appliedVersions(ctx context.Context, tx pgx.Tx, q *queries) (map[int64]bool, error) {
	rows, err := tx.Query(ctx, q.MigrationList)
	if err != nil {
		return nil, fmt.Errorf("list applied outbox migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list applied outbox migrations: %w", err)
	}
	applied := make(map[int64]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}
