package receiver

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

// migrationFiles holds the kit's schema as numbered NNN_name.up.sql and
// NNN_name.down.sql files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrMigrationsPending is returned by CheckMigrations when the database lacks
// some of the kit's migrations.
var ErrMigrationsPending = errors.New("receiver migrations pending")

// Migrations returns the kit's schema migrations: NNN_name.up.sql and
// NNN_name.down.sql files at the root of the returned FS, the layout
// golang-migrate and similar tools read. Use it to apply the schema with your
// own migration tool instead of Migrate.
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

// upMigrations returns the up migrations of fsys in version order.
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
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// Migrate applies the kit's pending migrations in one transaction, recording
// them in the receiver_schema_migrations table. It is idempotent and safe to
// call from several processes at once: an advisory lock serialises them, and
// a failed migration leaves the schema as it was.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	q, err := loadQueries()
	if err != nil {
		return err
	}
	all, err := upMigrations(Migrations())
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if _, err := tx.Exec(ctx, q[qMigrationLock]); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	if _, err := tx.Exec(ctx, q[qMigrationTableCreate]); err != nil {
		return fmt.Errorf("create migration table: %w", err)
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
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, q[qMigrationInsert], m.version, m.name); err != nil {
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

// CheckMigrations returns nil when every kit migration is applied, and an
// error wrapping ErrMigrationsPending naming the missing ones otherwise.
// Servers call it at start-up and refuse to serve on error rather than
// migrate silently.
func CheckMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	q, err := loadQueries()
	if err != nil {
		return err
	}
	all, err := upMigrations(Migrations())
	if err != nil {
		return err
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin migration check: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var exists bool
	if err := tx.QueryRow(ctx, q[qMigrationTableExists]).Scan(&exists); err != nil {
		return fmt.Errorf("look up migration table: %w", err)
	}
	applied := map[int64]bool{}
	if exists {
		if applied, err = appliedVersions(ctx, tx, q); err != nil {
			return err
		}
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

func appliedVersions(ctx context.Context, tx pgx.Tx, q queryBook) (map[int64]bool, error) {
	rows, err := tx.Query(ctx, q[qMigrationList])
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	applied := make(map[int64]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}
