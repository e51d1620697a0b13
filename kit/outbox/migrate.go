package outbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/migrate"
	"github.com/hookflow/hookflow/kit/outbox/internal/dbsqlc"
)

// migrationFiles holds the outbox schema as numbered NNN_name.up.sql and
// NNN_name.down.sql files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationsTable creates the table the applied migrations are recorded in.
//
//go:embed migrations_table.sql
var migrationsTable string

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
