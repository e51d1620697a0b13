// Package schema holds hookflow's SQL: numbered migrations applied by
// `hookflow migrate`, and the named queries the rest of the code runs. Both
// are embedded in the binary.
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/sqlfile"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed queries/*.sql
var queryFiles embed.FS

// ErrPending is returned by CheckCurrent while migrations wait to be applied.
var ErrPending = errors.New("database schema is not current: run `hookflow migrate` first")

// Migration is one numbered up-migration.
type Migration = sqlfile.Migration

// Migrations returns the embedded up-migrations in version order.
func Migrations() ([]Migration, error) {
	return sqlfile.Migrations(migrationFiles, "migrations")
}

// ledger records applied migrations in schema_migrations.
func ledger() (sqlfile.Ledger, error) {
	var q struct {
		MigrationsTableCreate string
		MigrationsLock        string
		MigrationsApplied     string
		MigrationsRecord      string
		MigrationsTableExists string
	}
	if err := Load(&q); err != nil {
		return sqlfile.Ledger{}, err
	}
	return sqlfile.Ledger{
		Lock: q.MigrationsLock, CreateTable: q.MigrationsTableCreate, TableExists: q.MigrationsTableExists,
		Applied: q.MigrationsApplied, Record: q.MigrationsRecord,
	}, nil
}

// Migrate applies every pending migration in one transaction, under an
// advisory lock, so concurrent `hookflow migrate` runs are safe and idempotent.
// It returns the names it applied; none when the schema is current.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	l, ms, err := ledgerAndMigrations()
	if err != nil {
		return nil, err
	}
	return l.Apply(ctx, pool, ms)
}

// Pending returns the names of migrations not applied yet.
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	l, ms, err := ledgerAndMigrations()
	if err != nil {
		return nil, err
	}
	return l.Pending(ctx, pool, ms)
}

func ledgerAndMigrations() (sqlfile.Ledger, []Migration, error) {
	l, err := ledger()
	if err != nil {
		return sqlfile.Ledger{}, nil, err
	}
	ms, err := Migrations()
	return l, ms, err
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

// Load fills every string field of the struct dst points to with the
// embedded query of the same name ("-- name: EventInsert" blocks in
// queries/*.sql). A field without a query is an error, so a typo fails at
// start-up rather than at the first call.
func Load(dst any) error {
	book, err := sqlfile.Parse(queryFiles, "queries")
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if err := sqlfile.Fill(dst, book); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}
