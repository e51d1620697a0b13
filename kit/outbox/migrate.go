package outbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/sqlfile"
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

// ledger is where the migrations are recorded, and the lock that serialises
// migrators.
func ledger() (sqlfile.Ledger, []sqlfile.Migration, error) {
	q, err := loadQueries()
	if err != nil {
		return sqlfile.Ledger{}, nil, err
	}
	ms, err := sqlfile.Migrations(Migrations(), ".")
	if err != nil {
		return sqlfile.Ledger{}, nil, err
	}
	return sqlfile.Ledger{
		Lock: q.MigrationLock, CreateTable: q.MigrationTableCreate, TableExists: q.MigrationTableExists,
		Applied: q.MigrationList, Record: q.MigrationInsert,
	}, ms, nil
}

// Migrate applies the pending outbox migrations in one transaction and
// records them in outbox_schema_migrations, apart from the producer's own
// migration table. It is idempotent and safe to run from several processes at
// once: an advisory lock serialises them.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	l, ms, err := ledger()
	if err != nil {
		return err
	}
	if _, err := l.Apply(ctx, pool, ms); err != nil {
		return fmt.Errorf("outbox migrations: %w", err)
	}
	return nil
}

// CheckMigrations returns nil when every outbox migration is applied, and an
// error wrapping ErrMigrationsPending naming the missing ones otherwise. The
// relay calls it at start and refuses to run on an old schema.
func CheckMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	l, ms, err := ledger()
	if err != nil {
		return err
	}
	return l.Check(ctx, pool, ms, ErrMigrationsPending)
}
