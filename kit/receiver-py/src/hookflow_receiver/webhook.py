"""Standard Webhooks signatures, as hookflow sends them.

Secrets are ``whsec_`` + base64 key bytes. A delivery carries webhook-id,
webhook-timestamp and webhook-signature; the signature is one or more
space-separated ``v1,`` + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)),
several while the endpoint's secret is rotated.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Sequence

DEFAULT_TOLERANCE_SECONDS = 300


class VerificationError(Exception):
    """A delivery that failed verification; ``code`` names the check."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def decode_secret(secret: str) -> bytes:
    """The key bytes of a whsec_ secret; ValueError for anything else."""
    if not secret.startswith("whsec_"):
        raise ValueError("invalid webhook secret: want whsec_ followed by base64 of at least 24 bytes")
    try:
        key = base64.b64decode(secret[len("whsec_"):], validate=True)
    except binascii.Error:
        key = b""
    if len(key) < 24:
        raise ValueError("invalid webhook secret: want whsec_ followed by base64 of at least 24 bytes")
    return key


def _mac(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    return hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()


def sign(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature value for one delivery: one ``v1,…`` per secret."""
    return " ".join("v1," + base64.b64encode(_mac(decode_secret(s), msg_id, timestamp, body)).decode() for s in secrets)


def verify(
    secrets: Sequence[str],
    msg_id: str | None,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
) -> None:
    """Checks one delivery: the timestamp within tolerance seconds of now,
    and any v1 signature of the header made with any of secrets (list the
    new and the old secret during a rotation). Raises VerificationError."""
    if not msg_id or not timestamp or not signature:
        raise VerificationError("missing_headers", "missing webhook headers")
    try:
        ts = int(timestamp.strip())
    except ValueError:
        raise VerificationError("timestamp_invalid", "invalid webhook timestamp") from None
    if abs((time.time() if now is None else now) - ts) > tolerance:
        raise VerificationError("timestamp_expired", "webhook timestamp outside tolerance")
    given = []
    for entry in signature.split(" "):
        if entry.startswith("v1,"):
            try:
                given.append(base64.b64decode(entry[3:], validate=True))
            except binascii.Error:
                continue
    for s in secrets:
        want = _mac(decode_secret(s), msg_id, ts, body)
        if any(hmac.compare_digest(want, g) for g in given):
            return
    raise VerificationError("signature_mismatch", "webhook signature mismatch")
