// The receiving half of hookflow's delivery guarantee, as kit/receiver
// keeps it in Go, on the same tables: verify the signature on the raw body,
// then in one transaction record the event in the dedup table, lock the
// lane's cursor, apply (the caller's function, on the same transaction) and
// compare-and-swap the cursor; answer only after COMMIT.
//
// A lane is (endpoint_id, correlation_id). An event applies when the lane's
// cursor stands at its previous_sequence, or at one of its
// skipped_sequences (an event an operator skipped that had applied here
// after all); an event whose previous_sequence the cursor has not reached
// is parked (202) and applied once its predecessor is; a retry of an
// applied event is answered 200 already_processed.
import type { IncomingMessage, ServerResponse } from "node:http";
import type pg from "pg";
import { q } from "./sql.js";
import { DEFAULT_TOLERANCE_SECONDS, VerificationError, decodeSecret, verify } from "./webhook.js";

/** The signed envelope a delivery carries. */
export interface Event {
  id: string;
  type: string;
  timestamp: string;
  /** With correlation_id, the lane whose cursor orders the event. */
  endpoint_id: string;
  correlation_id: string;
  sequence: number;
  /** The last earlier sequence of the correlation sent to this endpoint (0: none). */
  previous_sequence: number;
  /** Sequences after previous_sequence an operator skipped: they will never arrive. */
  skipped_sequences?: number[];
  data: unknown;
}

/** Thrown by apply for an event refused for good: rolled back, answered 422, dead-lettered by the sender. */
export class RejectedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RejectedError";
  }
}

export interface Logger {
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
}

export interface ReceiverOptions {
  /** Reaches the database holding the kit's tables (see migrate). */
  pool: pg.Pool;
  /** The endpoint's whsec_ secrets; during a rotation the new and the old. */
  secrets: string[];
  /**
   * Makes the event's state change through tx, inside the receiver's
   * transaction: it commits or rolls back with the dedup and cursor rows.
   * Do not COMMIT or ROLLBACK tx. Throw to roll back and answer 500 (the
   * sender retries), or a RejectedError to answer 422. Calls for one lane
   * never overlap and come in order.
   */
  apply(tx: pg.PoolClient, event: Event): Promise<void>;
  /**
   * Where a lane never seen here starts: "beginning" (default) expects its
   * first event (previous_sequence 0) and parks a later one; "mid-stream"
   * applies the first event to arrive, for a receiver an endpoint with
   * history was re-pointed at.
   */
  startPosition?: "beginning" | "mid-stream";
  /** Accepted skew of webhook-timestamp, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Largest body accepted (default 1 MiB); larger ones get 413. */
  maxBodyBytes?: number;
  /** Default: warnings and errors to the console. */
  logger?: Logger;
  /**
   * @internal Mutation testing only: false takes out the dedup record or
   * the cursor check, which breaks the contract. The conformance tests turn
   * each off to show that the conformance run catches it.
   */
  checks?: { dedup?: boolean; cursor?: boolean };
}

/** What to answer: status, headers and body. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

type Outcome = "applied" | "already_processed" | "parked" | "sequence_conflict" | "previous_passed";

const consoleLogger: Logger = {
  info: () => undefined,
  warn: (msg, attrs) => console.warn(msg, attrs ?? ""),
  error: (msg, attrs) => console.error(msg, attrs ?? ""),
};

const KEY = /^[A-Za-z0-9_:-]{1,255}$/;

function status(code: number, s: string, eventId: string): Answer {
  return { status: code, headers: { "content-type": "application/json" }, body: JSON.stringify({ status: s, event_id: eventId }) };
}

const titles: Record<number, string> = {
  400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed", 409: "Conflict",
  413: "Content Too Large", 422: "Unprocessable Content", 500: "Internal Server Error",
};

/** An RFC 9457 problem answer. */
function problem(code: number, detail: string): Answer {
  return {
    status: code,
    headers: { "content-type": "application/problem+json" },
    body: JSON.stringify({ type: "about:blank", title: titles[code] ?? "Error", status: code, detail }),
  };
}

/** Parses and validates the envelope, as the Go kit's decodeEvent does. */
export function decodeEvent(body: Buffer): Event {
  let ev: Event;
  try {
    ev = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new Error(`envelope is not valid JSON: ${(err as Error).message}`);
  }
  const int = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v);
  if (typeof ev !== "object" || ev === null) throw new Error("envelope is not a JSON object");
  if (!KEY.test(String(ev.id ?? ""))) throw new Error("envelope id must be 1-255 characters of [A-Za-z0-9_:-]");
  if (!KEY.test(String(ev.endpoint_id ?? ""))) throw new Error("envelope endpoint_id must be 1-255 characters of [A-Za-z0-9_:-]");
  if (!KEY.test(String(ev.correlation_id ?? ""))) throw new Error("envelope correlation_id must be 1-255 characters of [A-Za-z0-9_:-]");
  if (!int(ev.sequence) || ev.sequence < 1) throw new Error("envelope sequence must be an integer >= 1");
  ev.previous_sequence ??= 0;
  if (!int(ev.previous_sequence) || ev.previous_sequence < 0 || ev.previous_sequence >= ev.sequence) {
    throw new Error("envelope previous_sequence must be at least 0 and below sequence");
  }
  const skipped = ev.skipped_sequences ?? [];
  if (!Array.isArray(skipped) || skipped.some((s) => !int(s) || s <= ev.previous_sequence || s >= ev.sequence)) {
    throw new Error("envelope skipped_sequences must lie between previous_sequence and sequence");
  }
  if (typeof ev.type !== "string" || ev.type === "") throw new Error("envelope type is required");
  return ev;
}

/**
 * Whether ev applies on a lane whose cursor stands at last: at its
 * previous_sequence, or at a sequence the sender skipped after it.
 */
export function follows(ev: Event, last: number): boolean {
  return last === ev.previous_sequence || (last > ev.previous_sequence && (ev.skipped_sequences ?? []).includes(last));
}

function header(h: IncomingMessage["headers"] | Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The webhook endpoint. One per process; safe for concurrent requests. */
export class Receiver {
  private readonly pool: pg.Pool;
  private readonly secrets: string[];
  private readonly applyFn: ReceiverOptions["apply"];
  private readonly midStream: boolean;
  private readonly tolerance: number;
  private readonly maxBody: number;
  private readonly log: Logger;
  private readonly dedup: boolean;
  private readonly cursor: boolean;

  constructor(opts: ReceiverOptions) {
    if (!opts.pool) throw new Error("receiver: pool is required");
    if (typeof opts.apply !== "function") throw new Error("receiver: apply is required");
    if (!opts.secrets?.length) throw new Error("receiver: at least one secret is required");
    opts.secrets.forEach((s, i) => {
      try {
        decodeSecret(s);
      } catch (err) {
        throw new Error(`receiver: secret ${i}: ${(err as Error).message}`);
      }
    });
    const start = opts.startPosition ?? "beginning";
    if (start !== "beginning" && start !== "mid-stream") throw new Error(`receiver: start position ${start}: want beginning or mid-stream`);
    this.pool = opts.pool;
    this.secrets = [...opts.secrets];
    this.applyFn = opts.apply;
    this.midStream = start === "mid-stream";
    this.tolerance = opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
    this.maxBody = opts.maxBodyBytes ?? 1 << 20;
    this.log = opts.logger ?? consoleLogger;
    this.dedup = opts.checks?.dedup ?? true;
    this.cursor = opts.checks?.cursor ?? true;
  }

  /**
   * Handles one delivery given its raw body (the exact bytes: the signature
   * covers them) and its headers; resolves to the answer to send. Use it
   * from any framework (see the README for Fastify).
   */
  async handle(body: Buffer, headers: Record<string, string | string[] | undefined>): Promise<Answer> {
    if (body.length > this.maxBody) return problem(413, `body exceeds ${this.maxBody} bytes`);
    const id = header(headers, "webhook-id");
    try {
      verify(this.secrets, { id, timestamp: header(headers, "webhook-timestamp"), signature: header(headers, "webhook-signature") }, body, new Date(), this.tolerance);
    } catch (err) {
      if (err instanceof VerificationError) {
        this.log.warn("webhook rejected", { event_id: id, reason: err.message });
        return problem(401, err.message);
      }
      throw err;
    }
    let ev: Event;
    try {
      ev = decodeEvent(body);
    } catch (err) {
      this.log.warn("webhook rejected", { event_id: id, reason: (err as Error).message });
      return problem(400, (err as Error).message);
    }
    if (ev.id !== id) return problem(400, "envelope id differs from the webhook-id header");

    let out: Outcome;
    try {
      out = await this.process(ev, body, headers);
    } catch (err) {
      if (err instanceof RejectedError) {
        this.log.warn("event rejected by apply", { event_id: ev.id, error: err.message });
        return problem(422, err.message);
      }
      this.log.error("process event", { event_id: ev.id, error: (err as Error).message });
      return problem(500, "event not applied; retry later");
    }
    switch (out) {
      case "applied":
        await this.drain(ev.endpoint_id, ev.correlation_id, ev.sequence);
        return status(200, "applied", ev.id);
      case "already_processed":
        return status(200, "already_processed", ev.id);
      case "parked":
        this.log.info("event parked until its previous sequence is applied", { event_id: ev.id, previous_sequence: ev.previous_sequence });
        return status(202, "parked", ev.id);
      case "sequence_conflict":
        return problem(409, `sequence ${ev.sequence} of correlation ${ev.correlation_id} at endpoint ${ev.endpoint_id} belongs to another event id`);
      case "previous_passed":
        return problem(409, `correlation ${ev.correlation_id} at endpoint ${ev.endpoint_id} has applied past previous_sequence ${ev.previous_sequence}, to a sequence this event does not list as skipped: it can never apply`);
    }
  }

  /**
   * A request listener for node:http, and Express middleware alike
   * (`app.post("/webhook", receiver.listener())`): it reads the raw body
   * itself, or takes req.body when express.raw() read it as a Buffer.
   */
  listener(): (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => void {
    return (req, res) => {
      const send = (a: Answer) => {
        if (!res.headersSent) res.writeHead(a.status, a.headers).end(a.body);
      };
      if (req.method !== "POST") {
        res.setHeader("allow", "POST");
        return send(problem(405, "deliveries are POST requests"));
      }
      this.readBody(req)
        .then((body) => (body === undefined ? problem(413, `body exceeds ${this.maxBody} bytes`) : this.handle(body, req.headers)))
        .catch((err: Error) => {
          this.log.error("handle delivery", { error: err.message });
          return problem(500, "event not applied; retry later");
        })
        .then(send);
    };
  }

  private async readBody(req: IncomingMessage & { body?: unknown }): Promise<Buffer | undefined> {
    if (Buffer.isBuffer(req.body)) return req.body;
    if (req.body !== undefined) {
      throw new Error("the request body was parsed before the receiver saw it: mount the receiver before any JSON body parser (the signature covers the raw bytes)");
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > this.maxBody) {
        req.resume();
        return undefined;
      }
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  // Lock order, the same in every transaction (and in the Go kit): the
  // processed_events row, then the lane's cursor, then parked_events.
  private async process(ev: Event, body: Buffer, headers: Record<string, string | string[] | undefined>): Promise<Outcome> {
    return this.tx(async (tx, commit) => {
      // A concurrent copy of this event blocks here until the first one
      // commits (then it is a duplicate) or rolls back (then it proceeds).
      if (this.dedup) {
        const ins = await tx.query(q.ProcessedEventInsert, [ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence]);
        if (ins.rowCount === 0) {
          const r = await tx.query({ text: q.ProcessedEventExists, values: [ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence], rowMode: "array" });
          return r.rows[0][0] === true ? "already_processed" : "sequence_conflict";
        }
      }
      const { last, prunedThrough } = await this.lockCursor(tx, ev.endpoint_id, ev.correlation_id);
      if (last === 0 && this.midStream && ev.previous_sequence > 0) {
        // Nothing of this lane applied here yet, and the event follows
        // events that went elsewhere: the lane starts at it.
        await this.applyLocked(tx, ev, last);
        await commit();
        this.log.info("lane started mid-stream", { event_id: ev.id, endpoint_id: ev.endpoint_id, correlation_id: ev.correlation_id, sequence: ev.sequence });
        return "applied";
      }
      // Prune (Go kit) deleted this sequence's row: a retry of the event applied there.
      if (ev.sequence <= prunedThrough) return "already_processed";
      if (this.cursor && ev.sequence <= last) return "sequence_conflict";
      if (!this.cursor || follows(ev, last)) {
        await this.applyLocked(tx, ev, last);
        await commit();
        return "applied";
      }
      if (ev.previous_sequence > last) {
        const out = await this.park(tx, ev, body, headers);
        if (out === "parked") await commit();
        return out;
      }
      return "previous_passed";
    });
  }

  /** Runs fn in a transaction on one pooled client; rolled back unless fn committed. */
  private async tx<T>(fn: (tx: pg.PoolClient, commit: () => Promise<void>) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let done = false;
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      return await fn(client, async () => {
        await client.query("COMMIT");
        done = true;
      });
    } finally {
      if (!done) {
        await client.query("ROLLBACK").catch((err: Error) => {
          broken = err;
        });
      }
      // A client whose rollback failed is closed, not reused.
      client.release(broken);
    }
  }

  private async lockCursor(tx: pg.PoolClient, endpointId: string, correlationId: string): Promise<{ last: number; prunedThrough: number }> {
    await tx.query(q.CorrelationCursorEnsure, [endpointId, correlationId]);
    const r = await tx.query(q.CorrelationCursorLock, [endpointId, correlationId]);
    return { last: Number(r.rows[0].last_sequence), prunedThrough: Number(r.rows[0].pruned_through) };
  }

  private async park(tx: pg.PoolClient, ev: Event, body: Buffer, headers: Record<string, string | string[] | undefined>): Promise<Outcome> {
    // Deleting this transaction's own insert keeps the cursor lock; a
    // savepoint rollback would release it.
    await tx.query(q.ProcessedEventDelete, [ev.endpoint_id, ev.id]);
    const hdrs = JSON.stringify({
      "webhook-id": header(headers, "webhook-id") ?? "",
      "webhook-timestamp": header(headers, "webhook-timestamp") ?? "",
      "webhook-signature": header(headers, "webhook-signature") ?? "",
    });
    const ins = await tx.query(q.ParkedEventInsert, [ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence, ev.previous_sequence, body, hdrs]);
    if (ins.rowCount === 1) return "parked";
    const r = await tx.query({ text: q.ParkedEventExists, values: [ev.endpoint_id, ev.id], rowMode: "array" });
    // A retry of a parked event is still waiting; another ID in its place never applies.
    return r.rows[0][0] === true ? "parked" : "sequence_conflict";
  }

  private async applyLocked(tx: pg.PoolClient, ev: Event, from: number): Promise<void> {
    await this.applyFn(tx, ev);
    const moved = await tx.query(q.CorrelationCursorAdvance, [ev.endpoint_id, ev.correlation_id, ev.sequence, from]);
    if (moved.rowCount !== 1) {
      // The row lock makes this impossible unless the table is edited by hand.
      throw new Error("correlation cursor moved concurrently");
    }
    const gone = await tx.query(q.ParkedEventDeleteSuperseded, [ev.endpoint_id, ev.correlation_id, ev.sequence, ev.previous_sequence]);
    for (const p of gone.rows) {
      if (p.event_id !== ev.id) {
        this.log.warn("discarded parked event that can no longer apply", { event_id: p.event_id, applied_event_id: ev.id, correlation_id: ev.correlation_id });
      }
    }
  }

  /**
   * Applies the lane's parked events that follow the cursor at from, each
   * in its own transaction, until none follows. What it leaves is applied by
   * the sender's retry, which the 202 asked for.
   */
  private async drain(endpointId: string, correlationId: string, from: number): Promise<void> {
    try {
      for (let cursor = from; cursor !== 0; ) {
        cursor = await this.drainOne(endpointId, correlationId, cursor);
      }
    } catch (err) {
      this.log.error("apply parked event", { endpoint_id: endpointId, correlation_id: correlationId, error: (err as Error).message });
    }
  }

  private async drainOne(endpointId: string, correlationId: string, cursor: number): Promise<number> {
    return this.tx(async (tx, commit) => {
      const parked = await tx.query(q.ParkedEventGetByPrevious, [endpointId, correlationId, cursor]);
      if (parked.rows.length === 0) return 0;
      // Verified when it was parked; its timestamp has aged since.
      const ev = decodeEvent(parked.rows[0].body);
      if (this.dedup) {
        const ins = await tx.query(q.ProcessedEventInsert, [ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence]);
        if (ins.rowCount === 0) return 0;
      }
      const { last } = await this.lockCursor(tx, endpointId, correlationId);
      if (last !== cursor) return 0;
      await this.applyLocked(tx, ev, cursor);
      await commit();
      return ev.sequence;
    });
  }
}
