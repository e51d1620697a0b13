"""Unit tests of the hand-written part, against httpx's mock transport:
the bearer token, the retry of a 429 after Retry-After, typed problems,
and path parameters escaped."""

import json

import httpx
import pytest

from hookflow import Client, ProblemError


def client(handler, **kw) -> Client:
    return Client("http://hookflow.test/", "hf_secret", transport=httpx.MockTransport(handler), **kw)


def test_bearer_token_and_query():
    seen = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"items": []})

    with client(handler) as hf:
        assert hf.dead_letter_list(correlation_id="order-42", status="open") == {"items": []}
        hf.event_get("a/b")
    assert seen[0].headers["Authorization"] == "Bearer hf_secret"
    assert dict(seen[0].url.params) == {"correlation_id": "order-42", "status": "open"}
    assert seen[1].url.raw_path == b"/v1/events/a%2Fb"


def test_429_is_retried_after_retry_after(monkeypatch):
    slept, answers = [], [httpx.Response(429, headers={"Retry-After": "2"}, json={"type": "t", "title": "Too Many Requests", "status": 429}),
                          httpx.Response(202, json={"id": "e1", "state": "waiting"})]
    monkeypatch.setattr("time.sleep", slept.append)
    bodies = []

    def handler(req: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(req.content))
        return answers.pop(0)

    with client(handler) as hf:
        assert hf.send({"id": "e1", "correlation_id": "c", "sequence": 1, "type": "t", "data": {}})["state"] == "waiting"
    assert slept == [2]
    assert bodies[0] == bodies[1], "the same event is sent again"


def test_a_long_retry_after_is_answered_not_waited(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: pytest.fail("slept"))

    def handler(req):
        return httpx.Response(429, headers={"Retry-After": "120"},
                              json={"type": "https://hookflow.dev/problems/rate-limited", "title": "Too Many Requests", "status": 429})

    with client(handler) as hf, pytest.raises(ProblemError) as e:
        hf.event_get("e1")
    assert (e.value.status, e.value.retry_after, e.value.type) == (429, 120, "https://hookflow.dev/problems/rate-limited")


def test_problems_are_typed():
    def handler(req):
        return httpx.Response(422, json={"type": "https://hookflow.dev/problems/invalid-field", "title": "Unprocessable Content",
                                         "status": 422, "detail": "sequence must be >= 1", "field": "sequence"},
                              headers={"Content-Type": "application/problem+json"})

    with client(handler) as hf, pytest.raises(ProblemError) as e:
        hf.send({"id": "e1", "correlation_id": "c", "sequence": 0, "type": "t", "data": {}})
    assert e.value.problem["field"] == "sequence"
    assert str(e.value) == "Unprocessable Content: sequence must be >= 1"


def test_a_non_problem_error_is_still_a_problem():
    with client(lambda req: httpx.Response(502, text="bad gateway")) as hf, pytest.raises(ProblemError) as e:
        hf.healthz()
    assert (e.value.status, e.value.type, e.value.problem["detail"]) == (502, "about:blank", "bad gateway")
