// Copies the Go kit's migrations and request-path queries into sql/, which
// the package ships: kit/receiver is the one source of the receiver's
// schema, so the TypeScript, Python and Go kits share one database layout
// (and one migration ledger) and cannot drift apart.
import { cpSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const src = join(root, "..", "receiver");
const out = join(root, "sql");
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "migrations"), { recursive: true });
mkdirSync(join(out, "queries"), { recursive: true });
for (const f of readdirSync(join(src, "migrations"))) {
  if (f.endsWith(".sql")) cpSync(join(src, "migrations", f), join(out, "migrations", f));
}
cpSync(join(src, "migrations_table.sql"), join(out, "migrations_table.sql"));
for (const f of ["events.sql", "migrations.sql"]) {
  cpSync(join(src, "queries", f), join(out, "queries", f));
}
