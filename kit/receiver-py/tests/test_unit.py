"""Unit tests of what needs no database: signatures (rotation included),
the envelope's checks, the order rule, the SQL read from the Go kit's
files, and the WSGI and ASGI plumbing in front of a receiver."""

import asyncio
import base64
import io
import json
import os
import time

import pytest

from hookflow_receiver import ASGIMiddleware, Receiver, VerificationError, WSGIMiddleware, decode_event, sign, verify
from hookflow_receiver.sql import Q, params


def secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def code(fn) -> str:
    try:
        fn()
    except VerificationError as e:
        return e.code
    return "ok"


def test_rotation_and_forgeries():
    old, new, other = secret(), secret(), secret()
    body, ts = b'{"id":"e1"}', int(time.time())
    both = sign([new, old], "e1", ts, body)
    assert code(lambda: verify([old], "e1", str(ts), both, body)) == "ok"
    assert code(lambda: verify([new], "e1", str(ts), both, body)) == "ok"
    assert code(lambda: verify([other], "e1", str(ts), both, body)) == "signature_mismatch"
    assert code(lambda: verify([old], "e1", str(ts), both, b'{"id":"e2"}')) == "signature_mismatch"
    assert code(lambda: verify([old], "e1", str(ts - 600), sign([old], "e1", ts - 600, body), body)) == "timestamp_expired"
    assert code(lambda: verify([old], "e1", "soon", both, body)) == "timestamp_invalid"
    assert code(lambda: verify([old], "e1", str(ts), None, body)) == "missing_headers"
    with pytest.raises(ValueError):
        verify(["whsec_short"], "e1", str(ts), both, body)


def test_envelope_checks():
    ok = {"id": "e1", "type": "t", "endpoint_id": "ep", "correlation_id": "c", "sequence": 3, "previous_sequence": 1,
          "skipped_sequences": [2], "data": {}}
    assert decode_event(json.dumps(ok).encode()).skipped_sequences == (2,)
    for bad in ({"previous_sequence": 3}, {"sequence": 0}, {"skipped_sequences": [1]}, {"correlation_id": "a b"}, {"type": ""},
                {"endpoint_id": ""}, {"sequence": True}):
        with pytest.raises(ValueError):
            decode_event(json.dumps(ok | bad).encode())


def test_follows():
    ev = decode_event(json.dumps({"id": "e", "type": "t", "endpoint_id": "ep", "correlation_id": "c", "sequence": 5,
                                  "previous_sequence": 1, "skipped_sequences": [3]}).encode())
    assert [ev.follows(n) for n in (0, 1, 2, 3)] == [False, True, False, True]


def test_queries_come_from_the_go_kit():
    # sqlc's $n become named parameters, a repeated one passed once.
    assert "%(p1)s" in Q["ProcessedEventExists"] and "$" not in Q["ProcessedEventExists"]
    assert params("a", "b") == {"p1": "a", "p2": "b"}


def receiver() -> tuple[Receiver, str]:
    s = secret()
    # No connection is made before a delivery verifies.
    return Receiver("postgresql://invalid.invalid/none", [s], lambda conn, ev: None), s


def test_wsgi_refuses_forgeries_and_passes_other_paths():
    rc, _ = receiver()
    statuses = []

    def start(status, headers):
        statuses.append(status)

    app = WSGIMiddleware(lambda env, sr: (sr("200 OK", []), [b"app"])[1], rc)
    body = b'{"id":"e1"}'
    env = {"PATH_INFO": "/webhook", "REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
           "HTTP_WEBHOOK_ID": "e1", "HTTP_WEBHOOK_TIMESTAMP": str(int(time.time())), "HTTP_WEBHOOK_SIGNATURE": sign([secret()], "e1", 1, body)}
    out = b"".join(app(env, start))
    assert statuses[-1].startswith("401") and json.loads(out)["status"] == 401
    assert b"".join(app({"PATH_INFO": "/other", "REQUEST_METHOD": "GET"}, start)) == b"app"
    app({"PATH_INFO": "/webhook", "REQUEST_METHOD": "GET"}, start)
    assert statuses[-1].startswith("405")


def test_asgi_refuses_forgeries_and_passes_other_paths():
    rc, _ = receiver()

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def call(path, method, body=b"", headers=()):
        sent = []
        chunks = [{"type": "http.request", "body": body[:3], "more_body": True}, {"type": "http.request", "body": body[3:]}]

        async def receive():
            return chunks.pop(0)

        async def send(msg):
            sent.append(msg)

        await ASGIMiddleware(inner, rc)({"type": "http", "path": path, "method": method, "headers": list(headers)}, receive, send)
        return sent[0]["status"], sent[-1].get("body", b"")

    body = b'{"id":"e1"}'
    hdrs = [(b"webhook-id", b"e1"), (b"webhook-timestamp", str(int(time.time())).encode()),
            (b"webhook-signature", sign([secret()], "e1", int(time.time()), body).encode())]
    status, out = asyncio.run(call("/webhook", "POST", body, hdrs))
    assert status == 401 and json.loads(out)["detail"] == "webhook signature mismatch"
    assert asyncio.run(call("/other", "GET"))[0] == 204
    assert asyncio.run(call("/webhook", "GET"))[0] == 405
