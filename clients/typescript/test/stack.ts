// Against the real stack (e2e/typescript_test.go starts it): publishes two
// events to an endpoint whose receiver refuses them, reads them back
// dead-lettered, heals the receiver, replays one and skips the other, and
// checks a refused request comes back as a typed problem. It prints one
// JSON line of what it saw, and exits non-zero on the first thing that is
// not as it should be.
import { createHookflowClient, must, ProblemError, send, type Event } from "@hookflow/client";

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
};
const hf = createHookflowClient({ baseUrl: env("HOOKFLOW_URL"), token: env("HOOKFLOW_API_KEY") });
const endpointId = env("HOOKFLOW_ENDPOINT_ID");
const prefix = env("HOOKFLOW_PREFIX");

function check(ok: boolean, what: string): void {
  if (!ok) {
    throw new Error(what);
  }
}

async function eventIn(id: string, state: Event["state"]): Promise<Event> {
  const until = Date.now() + 60_000;
  for (;;) {
    const ev = must(await hf.GET("/v1/events/{id}", { params: { path: { id } } }));
    if (ev.state === state) {
      return ev;
    }
    check(Date.now() < until, `event ${id} is ${ev.state} after 60 s, not ${state}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const replayed = `${prefix}-replayed`;
const skipped = `${prefix}-skipped`;
for (const [id, corr] of [[replayed, `${prefix}-a`], [skipped, `${prefix}-b`]]) {
  const answer = await send(hf, { id, correlation_id: corr, sequence: 1, type: "order.paid", endpoint_id: endpointId, data: { id } });
  check(answer.id === id, `accepted ${answer.id}, not ${id}`);
}
// The same event again is answered with the one stored (200), not a second.
const again = await send(hf, { id: replayed, correlation_id: `${prefix}-a`, sequence: 1, type: "order.paid", endpoint_id: endpointId, data: { id: replayed } });
check(again.id === replayed, "the same event again was not answered with itself");

await eventIn(replayed, "dead_lettered");
await eventIn(skipped, "dead_lettered");
const page = must(await hf.GET("/v1/dead-letters", { params: { query: { endpoint_id: endpointId, status: "open" } } }));
const open = page.items.map((d) => d.event_id).sort();
check(open.join(",") === [replayed, skipped].sort().join(","), `open dead letters ${open}, want both events`);

const healed = await fetch(env("HOOKFLOW_HEAL_URL"), { method: "POST" });
check(healed.ok, `healing the receiver answered ${healed.status}`);

must(await hf.POST("/v1/dead-letters/{id}/replay", { params: { path: { id: replayed } }, body: { endpoint_id: endpointId } }));
must(await hf.POST("/v1/dead-letters/{id}/skip", { params: { path: { id: skipped } }, body: { endpoint_id: endpointId, note: "refunded by hand" } }));
const delivered = await eventIn(replayed, "delivered");
const skip = await eventIn(skipped, "skipped");

// A second replay of what was replayed already is a problem, typed.
let conflict: ProblemError | undefined;
try {
  must(await hf.POST("/v1/dead-letters/{id}/replay", { params: { path: { id: replayed } }, body: { endpoint_id: endpointId } }));
} catch (e) {
  conflict = e instanceof ProblemError ? e : undefined;
}
check(conflict !== undefined && conflict.status === 409, `a second replay threw ${conflict?.status}, want a 409 ProblemError`);

// A refused request: the problem names its field.
let invalid: ProblemError | undefined;
try {
  await send(hf, { id: "has spaces", correlation_id: `${prefix}-c`, sequence: 1, type: "order.paid", data: {} });
} catch (e) {
  invalid = e instanceof ProblemError ? e : undefined;
}
check(invalid !== undefined && invalid.status === 400 && invalid.problem.field === "id", `an invalid id threw ${JSON.stringify(invalid?.problem)}, want a 400 naming id`);

console.log(JSON.stringify({
  delivered: delivered.id, skipped: skip.id, conflict: conflict!.type, invalid: invalid!.type,
}));
