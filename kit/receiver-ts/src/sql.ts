// The receiver's SQL, read from the files the build copies out of the Go
// kit (kit/receiver: migrations/, migrations_table.sql, queries/): one
// schema, one migration ledger and one set of request-path statements for
// every kit, so a database migrated by one is served by any.
import { readFileSync, readdirSync } from "node:fs";
import type pg from "pg";

const sqlDir = new URL("../../sql/", import.meta.url);

/** The named statements of a sqlc query file ("-- name: X :kind" blocks). */
function queries(file: string): Record<string, string> {
  const text = readFileSync(new URL("queries/" + file, sqlDir), "utf8");
  const out: Record<string, string> = {};
  for (const block of text.split(/^-- name: /m).slice(1)) {
    const name = block.slice(0, block.indexOf(" "));
    out[name] = block
      .split("\n")
      .slice(1)
      .filter((l) => !l.startsWith("--"))
      .join("\n")
      .trim();
  }
  return out;
}

/** The request path's statements, by their sqlc names. */
export const q = queries("events.sql");
const m = queries("migrations.sql");

interface Migration {
  version: number;
  name: string;
  sql: string;
}

function migrations(): Migration[] {
  const dir = new URL("migrations/", sqlDir);
  return readdirSync(dir)
    .filter((f) => f.endsWith(".up.sql"))
    .map((f) => {
      const name = f.slice(0, -".up.sql".length);
      return { version: Number(name.slice(0, name.indexOf("_"))), name, sql: readFileSync(new URL(f, dir), "utf8") };
    })
    .sort((a, b) => a.version - b.version);
}

/**
 * Applies the kit's pending migrations in one transaction, recorded in
 * receiver_schema_migrations under the advisory lock the Go kit takes: safe
 * from several processes at once, and idempotent.
 */
export async function migrate(pool: pg.Pool): Promise<string[]> {
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query("BEGIN");
    await client.query(m.MigrationLock);
    await client.query(readFileSync(new URL("migrations_table.sql", sqlDir), "utf8"));
    const done = new Set((await client.query(m.MigrationList)).rows.map((r) => Number(r.version)));
    for (const mig of migrations()) {
      if (done.has(mig.version)) continue;
      await client.query(mig.sql);
      await client.query(m.MigrationInsert, [mig.version, mig.name]);
      applied.push(mig.name);
    }
    await client.query("COMMIT");
    return applied;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** The names of the kit's migrations the database lacks (none: ready to serve). */
export async function pendingMigrations(pool: pg.Pool): Promise<string[]> {
  const exists = (await pool.query(m.MigrationTableExists)).rows[0];
  const done = new Set<number>();
  if (exists && Object.values(exists)[0] === true) {
    for (const r of (await pool.query(m.MigrationList)).rows) done.add(Number(r.version));
  }
  return migrations()
    .filter((mig) => !done.has(mig.version))
    .map((mig) => mig.name);
}
