// An example receiver, run as a process: every applied event is a row of
// example_ledger (lane, sequence, event id, data.amount), written in the
// kit's transaction, so what was applied, and in what order, can be read
// back. The same program exists for the Python and Go kits.
//
//   DATABASE_URL=postgres://… RECEIVER_SECRETS="whsec_new whsec_old" PORT=8090 node dist/examples/ledger.js
//
// RECEIVER_START=mid-stream takes up never-seen lanes wherever they stand.
// RECEIVER_MUTANT=no-dedup or no-cursor takes the dedup record or the
// cursor check out of the kit: a broken receiver, which the conformance
// tests run to show that `hookflow conformance` fails it.
import { createServer } from "node:http";
import pg from "pg";
import { createReceiver, migrate } from "../src/index.js";

const mutant = process.env.RECEIVER_MUTANT ?? "";
if (!["", "no-dedup", "no-cursor"].includes(mutant)) throw new Error(`RECEIVER_MUTANT=${mutant}: want no-dedup or no-cursor`);

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
await migrate(pool);
await pool.query(`CREATE TABLE IF NOT EXISTS example_ledger (
  position bigserial PRIMARY KEY, endpoint_id text NOT NULL, correlation_id text NOT NULL,
  sequence bigint NOT NULL, event_id text NOT NULL, amount numeric NOT NULL)`);

const receiver = createReceiver({
  pool,
  secrets: (process.env.RECEIVER_SECRETS ?? "").split(" ").filter(Boolean),
  startPosition: process.env.RECEIVER_START === "mid-stream" ? "mid-stream" : "beginning",
  apply: async (tx, ev) => {
    const amount = Number((ev.data as { amount?: unknown } | null)?.amount ?? 0);
    await tx.query("INSERT INTO example_ledger (endpoint_id, correlation_id, sequence, event_id, amount) VALUES ($1, $2, $3, $4, $5)",
      [ev.endpoint_id, ev.correlation_id, ev.sequence, ev.id, amount]);
  },
  checks: { dedup: mutant !== "no-dedup", cursor: mutant !== "no-cursor" },
});

const server = createServer(receiver.listener());
server.listen(Number(process.env.PORT ?? 8090), "127.0.0.1", () => {
  const addr = server.address();
  console.log(`listening on http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : ""}/webhook`);
});
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => server.close(() => void pool.end()));
}
