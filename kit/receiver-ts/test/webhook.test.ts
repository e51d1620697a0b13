// Unit tests of what needs no database: signatures (rotation included),
// the envelope's checks and the order rule.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { VerificationError, decodeEvent, follows, sign, verify } from "../src/index.js";

const secret = () => "whsec_" + randomBytes(32).toString("base64");

test("a signature made with any listed secret verifies; others do not", () => {
  const [oldS, newS, other] = [secret(), secret(), secret()];
  const body = Buffer.from('{"id":"e1"}');
  const ts = Math.floor(Date.now() / 1000);
  // A sender mid-rotation signs with both; a receiver holding either verifies.
  const both = sign([newS, oldS], "e1", ts, body);
  verify([oldS], { id: "e1", timestamp: String(ts), signature: both }, body);
  verify([newS], { id: "e1", timestamp: String(ts), signature: both }, body);
  const code = (fn: () => void) => {
    try {
      fn();
    } catch (err) {
      return (err as VerificationError).code;
    }
    return "ok";
  };
  assert.equal(code(() => verify([other], { id: "e1", timestamp: String(ts), signature: both }, body)), "signature_mismatch");
  assert.equal(code(() => verify([oldS], { id: "e1", timestamp: String(ts), signature: both }, Buffer.from('{"id":"e2"}'))), "signature_mismatch");
  assert.equal(code(() => verify([oldS], { id: "e1", timestamp: String(ts - 600), signature: sign([oldS], "e1", ts - 600, body) }, body)), "timestamp_expired");
  assert.equal(code(() => verify([oldS], { id: "e1", timestamp: "soon", signature: both }, body)), "timestamp_invalid");
  assert.equal(code(() => verify([oldS], { id: "e1", timestamp: String(ts) }, body)), "missing_headers");
  assert.throws(() => verify(["whsec_short"], { id: "e1", timestamp: String(ts), signature: both }, body), /invalid webhook secret/);
});

test("the envelope's checks are the Go kit's", () => {
  const ok = { id: "e1", type: "t", endpoint_id: "ep", correlation_id: "c", sequence: 3, previous_sequence: 1, skipped_sequences: [2], data: {} };
  assert.equal(decodeEvent(Buffer.from(JSON.stringify(ok))).sequence, 3);
  for (const bad of [{ previous_sequence: 3 }, { sequence: 0 }, { skipped_sequences: [1] }, { correlation_id: "a b" }, { type: "" }, { endpoint_id: "" }]) {
    assert.throws(() => decodeEvent(Buffer.from(JSON.stringify({ ...ok, ...bad }))), JSON.stringify(bad));
  }
});

test("an event follows its previous_sequence or a skipped sequence after it", () => {
  const ev = { id: "e", type: "t", timestamp: "", endpoint_id: "ep", correlation_id: "c", sequence: 5, previous_sequence: 1, skipped_sequences: [3], data: null };
  assert.equal(follows(ev, 1), true);
  assert.equal(follows(ev, 3), true);
  assert.equal(follows(ev, 2), false);
  assert.equal(follows(ev, 0), false);
});
