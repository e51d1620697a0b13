"""The receiver as ASGI middleware (FastAPI, Starlette, Django's ASGI)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .receiver import Answer, Receiver, problem

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"not found\n"})


class ASGIMiddleware:
    """Answers deliveries to path with the receiver and hands every other
    request to app (none: 404).

    FastAPI: ``app.add_middleware(ASGIMiddleware, receiver=receiver)``.

    The receiver's transaction runs in a worker thread (psycopg's blocking
    API, the same code as under WSGI), and runs to its end even when the
    client goes away: once a signed event has arrived, finishing it is
    cheaper than redoing it.
    """

    def __init__(self, app: ASGIApp | None, receiver: Receiver, path: str = "/webhook") -> None:
        self.app = app or _not_found
        self.receiver = receiver
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        if scope.get("method") != "POST":
            await self._send(send, problem(405, "deliveries are POST requests"), [(b"allow", b"POST")])
            return
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if len(body) > self.receiver.max_body_bytes:
                await self._send(send, problem(413, f"body exceeds {self.receiver.max_body_bytes} bytes"))
                return
            if not msg.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        # Shielded: a cancelled request (the client hung up) still finishes
        # its transaction in the thread; only the answer is lost.
        answer = await asyncio.shield(asyncio.to_thread(self.receiver.handle, bytes(body), headers))
        await self._send(send, answer)

    @staticmethod
    async def _send(send: Send, answer: Answer, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers] + (extra or [])
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})
