"""What the generated operations cannot give, written by hand: the bearer
token on every request, a retry of a 429 after its Retry-After, RFC 9457
problems raised as ProblemError, and the one-line send."""

from __future__ import annotations

import time
from typing import Any

import httpx

from ._generated import Accepted, Event, EventCreate, Operations, Problem


class ProblemError(Exception):
    """A problem answer (RFC 9457): status, type URI, the problem itself and,
    for a 429, its Retry-After in seconds."""

    def __init__(self, problem: Problem, status: int, retry_after: int | None = None) -> None:
        detail = problem.get("detail")
        super().__init__(f"{problem['title']}: {detail}" if detail else problem["title"])
        self.problem = problem
        self.status = status
        self.type = problem["type"]
        self.retry_after = retry_after


def _retry_after(resp: httpx.Response) -> int | None:
    v = resp.headers.get("Retry-After", "").strip()
    return int(v) if v.isdigit() else None


class Client(Operations):
    """A client of hookflow's API at base_url (``hookflow dev``:
    http://127.0.0.1:8080), authenticated with token (an API key ``hf_…``
    or the deployment's HOOKFLOW_API_TOKEN).

    A 429 is retried after its Retry-After, up to retries times, unless
    the wait would exceed max_retry_wait seconds: a 429 stored nothing, and
    an event's id is its idempotency key, so sending again is safe. Every
    other error answer raises ProblemError. Use as a context manager, or
    call close()."""

    def __init__(self, base_url: str, token: str, *, retries: int = 3, max_retry_wait: float = 30.0,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
                                  timeout=timeout, transport=transport)
        self._retries = retries
        self._max_wait = max_retry_wait

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, event: EventCreate) -> Accepted | Event:
        """Publishes one event: its answer (202 accepted, or 200 with its
        current state when the same event was sent before)."""
        return self.event_create(event)

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        for attempt in range(self._retries + 1):
            resp = self._http.request(method, path, params=query, json=body)
            wait = _retry_after(resp)
            if resp.status_code == 429 and attempt < self._retries and wait is not None and wait <= self._max_wait:
                time.sleep(wait)
                continue
            break
        if resp.is_success:
            return resp.json() if resp.content else None
        raise _problem_error(resp)


def _problem_error(resp: httpx.Response) -> ProblemError:
    try:
        p = resp.json()
    except ValueError:
        p = None
    if not (isinstance(p, dict) and isinstance(p.get("type"), str) and isinstance(p.get("title"), str)):
        p = {"type": "about:blank", "title": resp.reason_phrase or f"HTTP {resp.status_code}", "status": resp.status_code}
        if resp.text:
            p["detail"] = resp.text[:500]
    return ProblemError(p, resp.status_code, _retry_after(resp))
