// The hookflow client for TypeScript: the operations and types are
// generated from hookflow's OpenAPI document (src/schema.ts, by
// openapi-typescript; `make generate` writes it) and called through
// openapi-fetch. What this file adds is what the generated client cannot
// give: a bearer token on every request, a retry of a 429 after its
// Retry-After, typed RFC 9457 problems, and the three-line send.
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

/** An RFC 9457 problem, as every error answer of the API carries it. */
export type Problem = components["schemas"]["Problem"];
export type EventCreate = components["schemas"]["EventCreate"];
export type Accepted = components["schemas"]["Accepted"];
export type Event = components["schemas"]["Event"];
export type DeadLetter = components["schemas"]["DeadLetter"];

/** The generated client: `hf.GET("/v1/events/{id}", { params: { path: { id } } })`. */
export type HookflowClient = Client<paths>;

export interface Options {
  /** The API's address, e.g. http://127.0.0.1:8080 (`hookflow dev`). */
  baseUrl: string;
  /** An API key (`hf_…`), or the deployment's HOOKFLOW_API_TOKEN. */
  token: string;
  /** How many times a 429 is retried after its Retry-After (default 3; 0: never). */
  retries?: number;
  /** The longest one wait for a 429 may be, in milliseconds (default 30,000): a longer Retry-After is answered, not waited. */
  maxRetryWaitMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof globalThis.fetch;
}

/** A problem answer, thrown by {@link must} and {@link send}. */
export class ProblemError extends Error {
  readonly status: number;
  /** The problem's type URI, e.g. https://hookflow.dev/problems/sequence-taken. */
  readonly type: string;
  readonly problem: Problem;
  /** The Retry-After of a 429, in seconds. */
  readonly retryAfter?: number;

  constructor(problem: Problem, status: number, retryAfter?: number) {
    super(problem.detail ? `${problem.title}: ${problem.detail}` : problem.title);
    this.name = "ProblemError";
    this.problem = problem;
    this.status = status;
    this.type = problem.type;
    this.retryAfter = retryAfter;
  }
}

/** A client of hookflow's API at opts.baseUrl, authenticated with opts.token. */
export function createHookflowClient(opts: Options): HookflowClient {
  const retries = opts.retries ?? 3;
  const maxWait = opts.maxRetryWaitMs ?? 30_000;
  const base = opts.fetch ?? globalThis.fetch;
  const fetchWithRetry = async (input: Request): Promise<Response> => {
    for (let attempt = 0; ; attempt++) {
      // A 429 stored nothing (the API says so), and an event's id is its
      // idempotency key: sending the same request again is safe.
      const req = input.clone();
      const res = await base(req);
      const wait = retryAfterSeconds(res);
      if (res.status !== 429 || attempt >= retries || wait === undefined || wait * 1000 > maxWait) {
        return res;
      }
      await res.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  };
  return createClient<paths>({
    baseUrl: opts.baseUrl.replace(/\/+$/, ""),
    headers: { Authorization: `Bearer ${opts.token}` },
    fetch: fetchWithRetry,
  });
}

/**
 * The answer's data, or a {@link ProblemError} thrown for its problem:
 * `const ev = must(await hf.GET("/v1/events/{id}", …))`.
 */
export function must<D>(result: { data?: D; error?: unknown; response: Response }): D {
  if (result.error !== undefined || !result.response.ok) {
    throw toProblemError(result.error, result.response);
  }
  return result.data as D;
}

/** Publishes one event: its answer (202 accepted, or 200 when the same event was sent before). */
export async function send(hf: HookflowClient, event: EventCreate): Promise<Accepted | Event> {
  return must(await hf.POST("/v1/events", { body: event }));
}

function toProblemError(error: unknown, res: Response): ProblemError {
  const p = error as Partial<Problem> | undefined;
  if (p && typeof p === "object" && typeof p.type === "string" && typeof p.title === "string") {
    return new ProblemError(p as Problem, res.status, retryAfterSeconds(res));
  }
  const title = res.statusText || `HTTP ${res.status}`;
  return new ProblemError({ type: "about:blank", title, status: res.status, detail: typeof error === "string" ? error : undefined }, res.status, retryAfterSeconds(res));
}

function retryAfterSeconds(res: Response): number | undefined {
  const v = res.headers.get("Retry-After");
  if (v === null || !/^\d+$/.test(v.trim())) {
    return undefined;
  }
  return Number(v.trim());
}
