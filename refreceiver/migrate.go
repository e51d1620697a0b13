package refreceiver

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

	"github.com/hookflow/hookflow/receiver"
)

// migrationFiles holds the ledger's schema as numbered NNN_name.up.sql and
// NNN_name.down.sql files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrMigrationsPending is returned by CheckMigrations when the database lacks
// some of the ledger's migrations.
var ErrMigrationsPending = errors.New("reference receiver migrations pending")

// Migrations returns the ledger's own migrations (the receiver kit's are
// receiver.Migrations), in the NNN_name.up.sql / .down.sql layout.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		// fs.Sub fails only for an invalid path, and "migrations" is valid.
		panic(err)
	}
	return sub
}

// Migrate applies the receiver kit's migrations, then the ledger's, each set
// in its own transaction and recorded in its own version table. It is
// idempotent and safe to run from several processes at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := receiver.Migrate(ctx, pool); err != nil {
		return err
	}
	q, err := loadQueries()
	if err != nil {
		return err
	}
	all, err := upMigrations()
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

// CheckMigrations returns nil when the kit's and the ledger's migrations are
// all applied, and an error wrapping receiver.ErrMigrationsPending or
// ErrMigrationsPending otherwise.
func CheckMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	if err := receiver.CheckMigrations(ctx, pool); err != nil {
		return err
	}
	q, err := loadQueries()
	if err != nil {
		return err
	}
	all, err := upMigrations()
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

type migration struct {
	version int64
	name    string
	up      string
}

func upMigrations() ([]migration, error) {
	fsys := Migrations()
	files, err := fs.Glob(fsys, "*.up.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := make([]migration, 0, len(files))
	for _, file := range files {
		name := strings.TrimSuffix(path.Base(file), ".up.sql")
		num, _, _ := strings.Cut(name, "_")
		version, err := strconv.ParseInt(num, 10, 64)
		if err != nil || version <= 0 {
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
