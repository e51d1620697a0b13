// Standard Webhooks signatures, as hookflow sends them: secrets are
// "whsec_" + base64 key bytes; a delivery carries webhook-id,
// webhook-timestamp and webhook-signature, the signature being one or more
// space-separated "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body))
// (several while the endpoint's secret is rotated).
import { createHmac, timingSafeEqual } from "node:crypto";

/** How far webhook-timestamp may lie from this clock, in seconds, by default. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** Why a delivery failed verification; `code` says which check. */
export class VerificationError extends Error {
  readonly code: "missing_headers" | "timestamp_invalid" | "timestamp_expired" | "signature_mismatch";
  constructor(code: VerificationError["code"], message: string) {
    super(message);
    this.name = "VerificationError";
    this.code = code;
  }
}

/** The key bytes of a whsec_ secret; throws for anything else. */
export function decodeSecret(secret: string): Buffer {
  if (!secret.startsWith("whsec_")) {
    throw new Error("invalid webhook secret: want whsec_ followed by base64 of at least 24 bytes");
  }
  const b64 = secret.slice("whsec_".length);
  const key = Buffer.from(b64, "base64");
  // Node decodes leniently; a round trip tells real base64 apart.
  if (key.length < 24 || key.toString("base64").replace(/=+$/, "") !== b64.replace(/=+$/, "")) {
    throw new Error("invalid webhook secret: want whsec_ followed by base64 of at least 24 bytes");
  }
  return key;
}

function mac(key: Buffer, id: string, timestamp: number, body: Buffer): Buffer {
  return createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest();
}

/** The webhook-signature value for one delivery: one "v1,…" per secret. */
export function sign(secrets: string[], id: string, timestamp: number, body: Buffer): string {
  return secrets.map((s) => "v1," + mac(decodeSecret(s), id, timestamp, body).toString("base64")).join(" ");
}

/**
 * Checks one delivery: the timestamp within toleranceSeconds of now, and any
 * v1 signature of the header made with any of secrets (list the new and the
 * old secret during a rotation). Throws a {@link VerificationError}.
 */
export function verify(
  secrets: string[],
  headers: { id?: string; timestamp?: string; signature?: string },
  body: Buffer,
  now: Date = new Date(),
  toleranceSeconds: number = DEFAULT_TOLERANCE_SECONDS,
): void {
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature) {
    throw new VerificationError("missing_headers", "missing webhook headers");
  }
  if (!/^\s*-?\d+\s*$/.test(timestamp)) {
    throw new VerificationError("timestamp_invalid", "invalid webhook timestamp");
  }
  const ts = Number(timestamp.trim());
  if (Math.abs(now.getTime() / 1000 - ts) > toleranceSeconds) {
    throw new VerificationError("timestamp_expired", "webhook timestamp outside tolerance");
  }
  const given: Buffer[] = [];
  for (const entry of signature.split(" ")) {
    if (entry.startsWith("v1,")) {
      given.push(Buffer.from(entry.slice(3), "base64"));
    }
  }
  for (const s of secrets) {
    const want = mac(decodeSecret(s), id, ts, body);
    for (const g of given) {
      if (g.length === want.length && timingSafeEqual(g, want)) {
        return;
      }
    }
  }
  throw new VerificationError("signature_mismatch", "webhook signature mismatch");
}
