import { createServer } from "node:http";
import pg from "pg";
import { createReceiver, migrate } from "@hookflow/receiver";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await migrate(pool);
await pool.query("CREATE TABLE IF NOT EXISTS balances (account text PRIMARY KEY, amount numeric NOT NULL)");
const receiver = createReceiver({ pool, secrets: [process.env.WEBHOOK_SECRET!], apply: async (tx, ev) => {
  await tx.query("INSERT INTO balances VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET amount = balances.amount + $2",
    [ev.correlation_id, (ev.data as { amount: number }).amount]);
} });
createServer(receiver.listener()).listen(Number(process.env.PORT ?? 8090));
