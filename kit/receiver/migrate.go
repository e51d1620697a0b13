package receiver

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/migrate"
	"github.com/hookflow/hookflow/kit/receiver/internal/dbsqlc"
)

// migrationFiles holds the kit's schema as numbered NNN_name.up.sql and
// NNN_name.down.sql files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationsTable creates the table the applied migrations are recorded in.
//
//go:embed migrations_table.sql
var migrationsTable string

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

// ledger is where the migrations are recorded, and the lock that serialises
// migrators.
func ledger() (migrate.Ledger, []migrate.Migration, error) {
	ms, err := migrate.Migrations(Migrations(), ".")
	if err != nil {
		return migrate.Ledger{}, nil, err
	}
	return migrate.Ledger{
		Lock: dbsqlc.MigrationLock, CreateTable: migrationsTable, TableExists: dbsqlc.MigrationTableExists,
		Applied: dbsqlc.MigrationList, Record: dbsqlc.MigrationInsert,
	}, ms, nil
}

// Migrate applies the kit's pending migrations in one transaction, recording
// them in the receiver_schema_migrations table. It is idempotent and safe to
// call from several processes at once: an advisory lock serialises them, and
// a failed migration leaves the schema as it was.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	l, ms, err := ledger()
	if err != nil {
		return err
	}
	if _, err := l.Apply(ctx, pool, ms); err != nil {
		return fmt.Errorf("receiver migrations: %w", err)
	}
	return nil
}

// CheckMigrations returns nil when every kit migration is applied, and an
// error wrapping ErrMigrationsPending naming the missing ones otherwise.
// Servers call it at start-up and refuse to serve on error rather than
// migrate silently.
func CheckMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	l, ms, err := ledger()
	if err != nil {
		return err
	}
	return l.Check(ctx, pool, ms, ErrMigrationsPending)
}
