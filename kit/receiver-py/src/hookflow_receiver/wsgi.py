"""The receiver as WSGI middleware (Flask, Django, any WSGI server)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .receiver import Receiver, problem

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _not_found(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found\n"]


class WSGIMiddleware:
    """Answers deliveries to path with the receiver and hands every other
    request to app (none: 404).

    Flask: ``app.wsgi_app = WSGIMiddleware(app.wsgi_app, receiver)``.
    Django: ``application = WSGIMiddleware(get_wsgi_application(), receiver)``.
    """

    def __init__(self, app: WSGIApp | None, receiver: Receiver, path: str = "/webhook") -> None:
        self.app = app or _not_found
        self.receiver = receiver
        self.path = path

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != self.path:
            return self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") != "POST":
            answer = problem(405, "deliveries are POST requests")
            start_response("405 Method Not Allowed", answer.headers + [("Allow", "POST")])
            return [answer.body]
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > self.receiver.max_body_bytes:
            answer = problem(413, f"body exceeds {self.receiver.max_body_bytes} bytes")
        else:
            body = environ["wsgi.input"].read(length) if length else b""
            headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
            answer = self.receiver.handle(body, headers)
        start_response(f"{answer.status} {_REASONS.get(answer.status, '')}".strip(), answer.headers)
        return [answer.body]


_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed", 409: "Conflict",
            413: "Content Too Large", 422: "Unprocessable Content", 500: "Internal Server Error"}
