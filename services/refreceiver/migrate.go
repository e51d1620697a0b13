package refreceiver

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/migrate"
	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/services/refreceiver/internal/dbsqlc"
)

// migrationFiles holds the ledger's schema as numbered NNN_name.up.sql and
// NNN_name.down.sql files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationsTable creates the table the applied migrations are recorded in.
//
//go:embed migrations_table.sql
var migrationsTable string

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

// Migrate applies the receiver kit's migrations, then the ledger's, each set
// in its own transaction and recorded in its own version table. It is
// idempotent and safe to run from several processes at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := receiver.Migrate(ctx, pool); err != nil {
		return err
	}
	l, ms, err := ledger()
	if err != nil {
		return err
	}
	if _, err := l.Apply(ctx, pool, ms); err != nil {
		return fmt.Errorf("reference receiver migrations: %w", err)
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
	l, ms, err := ledger()
	if err != nil {
		return err
	}
	return l.Check(ctx, pool, ms, ErrMigrationsPending)
}
