"""GET /v1/collections/{c}/changes on a real server: pages, longpoll, 409/410, and a consumer that
resumes across a server restart missing nothing and seeing nothing twice."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import psycopg_url
from tests.service.conftest import Service, make_token, start_service

pytestmark = pytest.mark.distributed_variant


def _add(client: httpx.Client, name: str, docs: list[tuple[str, str]]) -> None:
    r = client.post(f"/v1/collections/{name}/documents", json=[{"id": i, "text": t} for i, t in docs])
    assert r.status_code == 200, r.text


def _drain(client: httpx.Client, name: str, since: int, limit: int = 2) -> tuple[list[dict[str, Any]], int]:
    got: list[dict[str, Any]] = []
    while True:
        r = client.get(f"/v1/collections/{name}/changes", params={"since": since, "limit": limit})
        assert r.status_code == 200, r.text
        body = r.json()
        got += body["results"]
        since = body["last_seq"]
        if not body["results"]:
            return got, since


def test_a_consumer_resumes_across_a_restart_and_misses_nothing(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    token = make_token(database_url, schema, "admin", name="changes-restart")
    server = start_service(database_url, schema, tmp_path / "one.log")
    name = "feed-restart"
    try:
        client = server.client(token)
        r = client.post("/v1/collections", json={"name": name, "changes_feed": True, "threshold": 0.5})
        assert r.status_code == 201, r.text
        _add(client, name, [("a", "a first text of some words"), ("b", "a second text entirely apart")])
        first, since = _drain(client, name, 0)
        _add(client, name, [("c", "written while the consumer is away"), ("a", "a replaced text")])
    finally:
        server.close_clients()
        server.stop()
    server = start_service(database_url, schema, tmp_path / "two.log")
    try:
        client = server.client(token)
        assert client.delete(f"/v1/collections/{name}/documents/b").status_code == 204
        rest, _ = _drain(client, name, since)
        whole, _ = _drain(client, name, 0, limit=100)
    finally:
        server.close_clients()
        server.stop()
    assert first + rest == whole  # nothing missed, nothing twice
    assert [c["seq"] for c in whole] == list(range(1, len(whole) + 1))
    documents = [(c["kind"], c["id"]) for c in whole if c["kind"].startswith("document.")]
    assert documents == [
        ("document.added", "a"),
        ("document.added", "b"),
        ("document.replaced", "a"),
        ("document.added", "c"),
        ("document.removed", "b"),
    ]


def test_longpoll_answers_at_the_commit_and_times_out_empty(service: Service) -> None:
    admin = service.client(service.tokens["admin"])
    name = "feed-longpoll"
    assert admin.post("/v1/collections", json={"name": name, "changes_feed": True}).status_code == 201
    empty = admin.get(f"/v1/collections/{name}/changes", params={"feed": "longpoll", "timeout": 10})
    assert empty.status_code == 200
    assert empty.json() == {"results": [], "last_seq": 0}
    got: list[httpx.Response] = []
    reader = service.client(service.tokens["read"])
    waiter = threading.Thread(
        target=lambda: got.append(
            reader.get(f"/v1/collections/{name}/changes", params={"feed": "longpoll", "timeout": 60_000})
        )
    )
    waiter.start()
    _add(admin, name, [("late", "a text that arrives while the reader waits")])
    waiter.join(120)
    assert not waiter.is_alive()
    body = got[0].json()
    assert [(c["kind"], c["id"]) for c in body["results"]] == [("document.added", "late")]
    assert body["last_seq"] == body["results"][-1]["seq"]


def test_no_feed_is_409_a_since_no_longer_kept_is_410_and_bad_values_422(
    service: Service, database_url: str, schema: str
) -> None:
    admin = service.client(service.tokens["admin"])
    assert admin.post("/v1/collections", json={"name": "feed-none"}).status_code == 201
    r = admin.get("/v1/collections/feed-none/changes")
    assert r.status_code == 409
    assert "keeps no changes feed" in r.json()["detail"]
    name = "feed-kept"
    r = admin.post("/v1/collections", json={"name": name, "changes_feed": True, "changes_retention_hours": 1})
    assert r.status_code == 201, r.text
    _add(admin, name, [("a", "one text of words"), ("b", "quite another one")])
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        # The collection's id first: on Citus a statement that reads the collections (a reference
        # table) is planned as a distributed one, which takes no time zone's arithmetic in an UPDATE.
        (cid,) = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (name,)
        ).fetchone() or (None,)
        conn.execute(
            f"UPDATE \"{schema}\".changes SET at = at - interval '2 hours' WHERE collection_id = %s", (cid,)
        )
    _add(admin, name, [("c", "a third to prune the first two")])
    r = admin.get(f"/v1/collections/{name}/changes", params={"since": 1})
    assert r.status_code == 410
    assert "no longer all kept" in r.json()["detail"]
    # since=0, a new consumer's: every change kept, from the oldest (the third add's).
    r = admin.get(f"/v1/collections/{name}/changes", params={"since": 0})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0] == {**r.json()["results"][0], "kind": "document.added", "id": "c"}
    for bad in ({"since": -1}, {"limit": 0}, {"feed": "continuous"}, {"timeout": 10**9}):
        assert admin.get(f"/v1/collections/{name}/changes", params=bad).status_code == 422, bad
    assert admin.get("/v1/collections/no-such/changes").status_code == 404
