// @hookflow/receiver: the receiving half of hookflow's exactly-once,
// in-order delivery for Node.js on PostgreSQL (see README.md).
import { Receiver, type ReceiverOptions } from "./receiver.js";

export { Receiver, RejectedError, decodeEvent, follows } from "./receiver.js";
export type { Answer, Event, Logger, ReceiverOptions } from "./receiver.js";
export { migrate, pendingMigrations } from "./sql.js";
export { DEFAULT_TOLERANCE_SECONDS, VerificationError, decodeSecret, sign, verify } from "./webhook.js";

/** A receiver: `http.createServer(createReceiver({ pool, secrets, apply }).listener())`. */
export function createReceiver(opts: ReceiverOptions): Receiver {
  return new Receiver(opts);
}
