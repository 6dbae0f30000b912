"""The query's fast path (service/fast_query.py): answers as the route does, or hands on to it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from neardup.service.context import Context, Settings
from neardup.service.fast_query import FastQuery, matches_body
from tests.service.conftest import Service, make_token

pytestmark = pytest.mark.distributed_variant

TEXTS = [
    ("a", "the quick brown fox jumps over the lazy dog near the river bank"),
    ("b", "the quick brown fox jumped over the lazy dog near the river bank"),
    ("c", "an entirely different sentence about tea and biscuits in the afternoon"),
]
JSON = {"content-type": "application/json"}
QUERY = {"text": "the quick brown fox jumps over a lazy dog near the river bank"}


def _same(first: httpx.Response, second: httpx.Response) -> None:
    assert (first.status_code, first.content) == (second.status_code, second.content)
    assert first.headers["content-type"] == second.headers["content-type"]


def test_the_fast_path_answers_as_the_route_on_a_real_server(
    service: Service, database_url: str, schema: str
) -> None:
    with service.client(service.tokens["admin"]) as admin:
        r = admin.post("/v1/collections", json={"name": "fastq", "threshold": 0.5, "exist_ok": True})
        assert r.status_code == 201, r.text
        admin.post("/v1/collections/fastq/documents", json=[{"id": i, "text": t} for i, t in TEXTS])
    # A token the server has not seen: its first query goes to the route (which checks the token
    # in the database), the next ones are answered by the fast path.
    fresh = service.client(make_token(database_url, schema, "read", name="fresh"))
    first, second = (fresh.post("/v1/collections/fastq/query", json=QUERY) for _ in range(2))
    _same(first, second)
    assert [m["id"] for m in second.json()["matches"]][:2] == ["a", "b"]
    limited = {"text": QUERY["text"], "limit": 1, "min_jaccard": 0.9}
    _same(*(fresh.post("/v1/collections/fastq/query", json=limited) for _ in range(2)))
    # What the fast path hands on gets the route's answers: a bad body, an invalid escape, an
    # unknown collection, a token of another collection.
    bad = fresh.post("/v1/collections/fastq/query", json={"text": 3})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["location"] == ["body", "text"]
    lone = b'{"text": "\\ud800"}'  # a lone surrogate: not valid JSON text for the parser
    surrogate = fresh.post("/v1/collections/fastq/query", content=lone, headers=JSON)
    assert surrogate.status_code == 422
    assert surrogate.headers["content-type"] == "application/problem+json"
    assert fresh.post("/v1/collections/nosuch/query", json=QUERY).status_code == 404
    other = service.client(service.tokens["other"])
    assert [other.post("/v1/collections/fastq/query", json=QUERY).status_code for _ in range(2)] == [403, 403]


def _call(app: Any, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """Run one request through an ASGI app in-process: (status, body)."""
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def _inner(seen: list[bytes]) -> Callable[..., Any]:
    """An application standing for the route: records the body it was handed, answers 299."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def test_the_fast_path_answers_ordinary_queries_itself_and_hands_on_the_rest(
    make_index: Callable[..., Any], database_url: str, schema: str
) -> None:
    index = make_index(threshold=0.5)
    index.add(TEXTS)
    ctx = Context(Settings(database_url, schema, auth=False))
    seen: list[bytes] = []
    app = FastQuery(_inner(seen), ctx)
    path = f"/v1/collections/{index.name}/query"
    json_headers = [(b"content-type", b"application/json")]
    try:
        body = json.dumps(QUERY).encode()
        # With no open index free, the fast path hands on (opening one takes milliseconds and is
        # the route's to wait for)...
        assert _call(app, path, body, json_headers) == (299, b"")
        with ctx.indexes.index(index.name):  # ...as the route does, leaving it open in the pool
            pass
        assert _call(app, path, body, json_headers) == (200, matches_body(index.query(QUERY["text"])))
        assert seen == [body]  # the second one was answered without the route
        for handed_on in (b'{"text": 3}', b"not json", b'{"text": "x", "limit": -1}'):
            assert _call(app, path, handed_on, json_headers) == (299, b"")
            assert seen[-1] == handed_on  # the route gets the body the client sent
        assert _call(app, f"/v1/collections/{index.name}/pairs", body, json_headers)[0] == 299
        assert _call(app, "/v1/collections/no-such-collection/query", body, json_headers)[0] == 299
    finally:
        ctx.close()
