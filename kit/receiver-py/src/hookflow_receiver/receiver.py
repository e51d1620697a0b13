"""The receiving half of hookflow's delivery guarantee, as kit/receiver
keeps it in Go, on the same tables.

Per delivery: verify the signature on the raw body, then in one transaction
record the event in the dedup table, lock the lane's cursor, apply (the
caller's function, on the same connection and transaction) and
compare-and-swap the cursor; the answer is made only after COMMIT.

A lane is (endpoint_id, correlation_id). An event applies when the lane's
cursor stands at its previous_sequence, or at one of its skipped_sequences
(an event an operator skipped that had applied here after all); an event
whose previous_sequence the cursor has not reached is parked (202) and
applied once its predecessor is; a retry of an applied event is answered
200 already_processed.
"""

from __future__ import annotations

import json
import logging
import queue
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from .sql import Q, params
from .webhook import DEFAULT_TOLERANCE_SECONDS, VerificationError, decode_secret, verify

_KEY = re.compile(r"[A-Za-z0-9_:-]{1,255}")


class Rejected(Exception):
    """Raised by apply for an event refused for good: rolled back, answered
    422, dead-lettered by the sender at once."""


@dataclass(frozen=True)
class Event:
    """The signed envelope a delivery carries."""

    id: str
    type: str
    endpoint_id: str
    correlation_id: str
    sequence: int
    previous_sequence: int
    data: Any
    timestamp: str = ""
    skipped_sequences: tuple[int, ...] = field(default_factory=tuple)

    def follows(self, last: int) -> bool:
        """Whether the event applies on a lane whose cursor stands at last:
        at its previous_sequence, or at a sequence skipped after it."""
        return last == self.previous_sequence or (last > self.previous_sequence and last in self.skipped_sequences)


def decode_event(body: bytes) -> Event:
    """Parses and validates the envelope, as the Go kit's decodeEvent does."""
    try:
        raw = json.loads(body)
    except ValueError as e:
        raise ValueError(f"envelope is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError("envelope is not a JSON object")

    def key(name: str) -> str:
        v = raw.get(name)
        if not isinstance(v, str) or not _KEY.fullmatch(v):
            raise ValueError(f"envelope {name} must be 1-255 characters of [A-Za-z0-9_:-]")
        return v

    def integer(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    ev_id, endpoint_id, correlation_id = key("id"), key("endpoint_id"), key("correlation_id")
    seq, prev = raw.get("sequence"), raw.get("previous_sequence", 0)
    if not integer(seq) or seq < 1:
        raise ValueError("envelope sequence must be an integer >= 1")
    if not integer(prev) or prev < 0 or prev >= seq:
        raise ValueError("envelope previous_sequence must be at least 0 and below sequence")
    skipped = raw.get("skipped_sequences") or []
    if not isinstance(skipped, list) or any(not integer(s) or s <= prev or s >= seq for s in skipped):
        raise ValueError("envelope skipped_sequences must lie between previous_sequence and sequence")
    if not isinstance(raw.get("type"), str) or not raw["type"]:
        raise ValueError("envelope type is required")
    return Event(id=ev_id, type=raw["type"], endpoint_id=endpoint_id, correlation_id=correlation_id, sequence=seq,
                 previous_sequence=prev, data=raw.get("data"), timestamp=str(raw.get("timestamp", "")), skipped_sequences=tuple(skipped))


@dataclass(frozen=True)
class Answer:
    """What to answer: status, headers and body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


_TITLES = {400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large",
           422: "Unprocessable Content", 500: "Internal Server Error"}


def _status(code: int, status: str, event_id: str) -> Answer:
    return Answer(code, [("Content-Type", "application/json")], json.dumps({"status": status, "event_id": event_id}).encode())


def problem(code: int, detail: str) -> Answer:
    """An RFC 9457 problem answer."""
    body = {"type": "about:blank", "title": _TITLES.get(code, "Error"), "status": code, "detail": detail}
    return Answer(code, [("Content-Type", "application/problem+json")], json.dumps(body).encode())


class _Pool:
    """A few connections, each used by one request at a time."""

    def __init__(self, conninfo: str, size: int) -> None:
        self._conninfo = conninfo
        self._free: queue.LifoQueue[psycopg.Connection | None] = queue.LifoQueue()
        for _ in range(size):
            self._free.put(None)

    def get(self) -> psycopg.Connection:
        conn = self._free.get()
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(self._conninfo)
            except BaseException:
                self._free.put(None)
                raise
        return conn

    def put(self, conn: psycopg.Connection) -> None:
        self._free.put(None if conn.closed or conn.broken else conn)


class Receiver:
    """The webhook endpoint: ``handle(body, headers)`` answers one delivery.
    WSGIMiddleware and ASGIMiddleware put it in front of an application.
    Safe for concurrent use from threads."""

    def __init__(
        self,
        conninfo: str,
        secrets: Sequence[str],
        apply: Callable[[psycopg.Connection, Event], None],
        *,
        start_position: str = "beginning",
        tolerance: float = DEFAULT_TOLERANCE_SECONDS,
        max_body_bytes: int = 1 << 20,
        pool_size: int = 10,
        logger: logging.Logger | None = None,
        _checks: Mapping[str, bool] | None = None,
    ) -> None:
        """conninfo reaches the database holding the kit's tables (see
        migrate). secrets are the endpoint's whsec_ secrets, during a
        rotation the new and the old. apply(conn, event) makes the event's
        state change through conn, inside the receiver's transaction: it
        commits or rolls back with the dedup and cursor rows; it must not
        commit or roll back itself. Raise to roll back and answer 500 (the
        sender retries), or Rejected to answer 422. Calls for one lane never
        overlap and come in order. start_position is where a lane never
        seen here starts: "beginning" expects its first event and parks a
        later one; "mid-stream" applies the first to arrive (a receiver an
        endpoint with history was re-pointed at).

        _checks is for mutation testing only: {"dedup": False} or
        {"cursor": False} takes that check out and breaks the contract; the
        conformance tests do so to show the conformance run catches it."""
        if not secrets:
            raise ValueError("receiver: at least one secret is required")
        for i, s in enumerate(secrets):
            try:
                decode_secret(s)
            except ValueError as e:
                raise ValueError(f"receiver: secret {i}: {e}") from None
        if start_position not in ("beginning", "mid-stream"):
            raise ValueError(f"receiver: start position {start_position!r}: want beginning or mid-stream")
        self._pool = _Pool(conninfo, pool_size)
        self._secrets = list(secrets)
        self._apply = apply
        self._mid_stream = start_position == "mid-stream"
        self._tolerance = tolerance
        self.max_body_bytes = max_body_bytes
        self._log = logger or logging.getLogger("hookflow_receiver")
        checks = _checks or {}
        self._dedup = checks.get("dedup", True)
        self._cursor = checks.get("cursor", True)

    def handle(self, body: bytes, headers: Mapping[str, str]) -> Answer:
        """Answers one delivery given its raw body (the exact bytes: the
        signature covers them) and its headers (names in lower case)."""
        if len(body) > self.max_body_bytes:
            return problem(413, f"body exceeds {self.max_body_bytes} bytes")
        msg_id = headers.get("webhook-id")
        try:
            verify(self._secrets, msg_id, headers.get("webhook-timestamp"), headers.get("webhook-signature"), body,
                   tolerance=self._tolerance)
        except VerificationError as e:
            self._log.warning("webhook rejected: event_id=%s reason=%s", msg_id, e)
            return problem(401, str(e))
        try:
            ev = decode_event(body)
        except ValueError as e:
            return problem(400, str(e))
        if ev.id != msg_id:
            return problem(400, "envelope id differs from the webhook-id header")
        try:
            out = self._process(ev, body, headers)
        except Rejected as e:
            self._log.warning("event rejected by apply: event_id=%s error=%s", ev.id, e)
            return problem(422, str(e))
        except Exception:
            self._log.exception("process event: event_id=%s", ev.id)
            return problem(500, "event not applied; retry later")
        if out == "applied":
            self._drain(ev.endpoint_id, ev.correlation_id, ev.sequence)
            return _status(200, "applied", ev.id)
        if out == "already_processed":
            return _status(200, "already_processed", ev.id)
        if out == "parked":
            return _status(202, "parked", ev.id)
        if out == "sequence_conflict":
            return problem(409, f"sequence {ev.sequence} of correlation {ev.correlation_id} at endpoint {ev.endpoint_id} belongs to another event id")
        return problem(409, f"correlation {ev.correlation_id} at endpoint {ev.endpoint_id} has applied past previous_sequence "
                            f"{ev.previous_sequence}, to a sequence this event does not list as skipped: it can never apply")

    def _tx(self, fn: Callable[[psycopg.Connection], Any]) -> Any:
        """Runs fn(conn) in a transaction, rolled back unless fn committed."""
        conn = self._pool.get()
        try:
            return fn(conn)
        finally:
            try:
                conn.rollback()
            except psycopg.Error:
                conn.close()
            self._pool.put(conn)

    # Lock order, the same in every transaction (and in the Go kit): the
    # processed_events row, then the lane's cursor, then parked_events.
    def _process(self, ev: Event, body: bytes, headers: Mapping[str, str]) -> str:
        def run(conn: psycopg.Connection) -> str:
            # A concurrent copy of this event blocks here until the first
            # one commits (then it is a duplicate) or rolls back.
            if self._dedup:
                ins = conn.execute(Q["ProcessedEventInsert"], params(ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence))
                if ins.rowcount == 0:
                    exists = conn.execute(Q["ProcessedEventExists"], params(ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence)).fetchone()[0]
                    return "already_processed" if exists else "sequence_conflict"
            last, pruned_through = self._lock_cursor(conn, ev.endpoint_id, ev.correlation_id)
            if last == 0 and self._mid_stream and ev.previous_sequence > 0:
                # Nothing of this lane applied here yet, and the event follows
                # events that went elsewhere: the lane starts at it.
                self._apply_locked(conn, ev, last)
                conn.commit()
                return "applied"
            if ev.sequence <= pruned_through:
                # The Go kit's Prune deleted this sequence's row: a retry.
                return "already_processed"
            if self._cursor and ev.sequence <= last:
                return "sequence_conflict"
            if not self._cursor or ev.follows(last):
                self._apply_locked(conn, ev, last)
                conn.commit()
                return "applied"
            if ev.previous_sequence > last:
                out = self._park(conn, ev, body, headers)
                if out == "parked":
                    conn.commit()
                return out
            return "previous_passed"

        return self._tx(run)

    @staticmethod
    def _lock_cursor(conn: psycopg.Connection, endpoint_id: str, correlation_id: str) -> tuple[int, int]:
        conn.execute(Q["CorrelationCursorEnsure"], params(endpoint_id, correlation_id))
        row = conn.execute(Q["CorrelationCursorLock"], params(endpoint_id, correlation_id)).fetchone()
        return row[0], row[1]

    def _park(self, conn: psycopg.Connection, ev: Event, body: bytes, headers: Mapping[str, str]) -> str:
        # Deleting this transaction's own insert keeps the cursor lock; a
        # savepoint rollback would release it.
        conn.execute(Q["ProcessedEventDelete"], params(ev.endpoint_id, ev.id))
        hdrs = json.dumps({h: headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature")})
        ins = conn.execute(Q["ParkedEventInsert"], params(ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence, ev.previous_sequence, body, hdrs))
        if ins.rowcount == 1:
            return "parked"
        # A retry of a parked event is still waiting; another ID in its place never applies.
        exists = conn.execute(Q["ParkedEventExists"], params(ev.endpoint_id, ev.id)).fetchone()[0]
        return "parked" if exists else "sequence_conflict"

    def _apply_locked(self, conn: psycopg.Connection, ev: Event, start: int) -> None:
        self._apply(conn, ev)
        moved = conn.execute(Q["CorrelationCursorAdvance"], params(ev.endpoint_id, ev.correlation_id, ev.sequence, start))
        if moved.rowcount != 1:
            # The row lock makes this impossible unless the table is edited by hand.
            raise RuntimeError("correlation cursor moved concurrently")
        gone = conn.execute(Q["ParkedEventDeleteSuperseded"], params(ev.endpoint_id, ev.correlation_id, ev.sequence, ev.previous_sequence))
        for event_id, _ in gone.fetchall():
            if event_id != ev.id:
                self._log.warning("discarded parked event that can no longer apply: event_id=%s applied_event_id=%s", event_id, ev.id)

    def _drain(self, endpoint_id: str, correlation_id: str, start: int) -> None:
        """Applies the lane's parked events that follow the cursor at start,
        each in its own transaction, until none follows. What it leaves is
        applied by the sender's retry, which the 202 asked for."""
        cursor = start
        try:
            while cursor:
                cursor = self._tx(lambda conn, c=cursor: self._drain_one(conn, endpoint_id, correlation_id, c))
        except Exception:
            self._log.exception("apply parked event: endpoint_id=%s correlation_id=%s", endpoint_id, correlation_id)

    def _drain_one(self, conn: psycopg.Connection, endpoint_id: str, correlation_id: str, cursor: int) -> int:
        row = conn.execute(Q["ParkedEventGetByPrevious"], params(endpoint_id, correlation_id, cursor)).fetchone()
        if row is None:
            return 0
        # Verified when it was parked; its timestamp has aged since.
        ev = decode_event(bytes(row[1]))
        if self._dedup:
            if conn.execute(Q["ProcessedEventInsert"], params(ev.endpoint_id, ev.id, ev.correlation_id, ev.sequence)).rowcount == 0:
                return 0
        last, _ = self._lock_cursor(conn, endpoint_id, correlation_id)
        if last != cursor:
            return 0
        self._apply_locked(conn, ev, cursor)
        conn.commit()
        return ev.sequence
