// Package schema holds hookflow's SQL: numbered migrations applied by
// `hookflow migrate` (embedded in the binary), and the named queries the rest
// of the code runs, which sqlc turns into package dbsqlc (make generate-sql).
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/migrate"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationsTable creates the table the applied migrations are recorded in.
//
//go:embed migrations_table.sql
var migrationsTable string

// ErrPending is returned by CheckCurrent while migrations wait to be applied.
var ErrPending = errors.New("database schema is not current: run `hookflow migrate` first")

// Migration is one numbered up-migration.
type Migration = migrate.Migration

// Migrations returns the embedded up-migrations in version order.
func Migrations() ([]Migration, error) {
	return migrate.Migrations(migrationFiles, "migrations")
}

// ledger records applied migrations in schema_migrations.
func ledger() migrate.Ledger {
	return migrate.Ledger{
		Lock: dbsqlc.MigrationsLock, CreateTable: migrationsTable, TableExists: dbsqlc.MigrationsTableExists,
		Applied: dbsqlc.MigrationsApplied, Record: dbsqlc.MigrationsRecord,
	}
}

// Migrate applies every pending migration in one transaction, under an
// advisory lock, so concurrent `hookflow migrate` runs are safe and idempotent.
// It returns the names it applied; none when the schema is current.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	return ledger().Apply(ctx, pool, ms)
}

// Pending returns the names of migrations not applied yet.
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	return ledger().Pending(ctx, pool, ms)
}

// CheckCurrent returns ErrPending (wrapped, naming them) while any migration
// is not applied; the api and worker refuse to start then.
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
