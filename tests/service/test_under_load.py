"""A real server under many waiting longpolls and a long top-k query: health checks, adds and queries
keep being answered, waiting longpolls hold no thread and no connection, and past the bound they
get 503. Everything runs on loopback, with bounded counts and timeouts; the assertions are on what
finished before what, never on how long anything took."""

from __future__ import annotations

import json
import random
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import psycopg_url
from tests.service.conftest import Service, make_token, start_service

# More longpolls than the 40 worker threads each used to hold, with two connections each.
WAITERS = 60
# Longer than any of the test's steps could take on a loaded machine: a longpoll that returns before
# its collection changed has waited this long, so it returning early means it was never answered
# in the meantime.
LONGPOLL_MS = 60_000
SETTLE_SECONDS = 120
SHORT_LONGPOLL: dict[str, str | int] = {"feed": "longpoll", "timeout": 1000}


def _metric(base: str, name: str) -> tuple[float, float]:
    """The value of gauge ``name`` in the /metrics of whichever worker answers, and that worker's pid."""
    text = httpx.get(f"{base}/metrics", timeout=30).text
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    return values[name], values["neardup_worker_pid"]


def _wait_for_waiting(base: str, count: int, workers: int = 1) -> None:
    """Return once ``count`` longpolls wait on the server (summed over its worker processes)."""
    by_worker: dict[float, float] = {}
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        waiting, pid = _metric(base, "neardup_longpolls_waiting")
        by_worker[pid] = waiting
        if len(by_worker) >= workers and sum(by_worker.values()) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{count} longpolls were never all waiting: {by_worker}")


@contextmanager
def _longpolls(
    base: str, token: str, name: str, count: int, done: list[tuple[str, Any]]
) -> Iterator[list[httpx.Response]]:
    """``count`` longpolls of collection ``name`` in flight for the block (each appends ("poll", i) to
    ``done`` as it returns); their answers, once all have returned after the block."""
    answers: list[httpx.Response] = []
    lock = threading.Lock()
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    headers = {"Authorization": f"Bearer {token}"}
    with (
        httpx.Client(
            base_url=base, headers=headers, timeout=LONGPOLL_MS / 1000 + 60, limits=limits
        ) as client,
        ThreadPoolExecutor(count) as pool,
    ):

        def poll(i: int) -> None:
            r = client.get(
                f"/v1/collections/{name}/changes", params={"feed": "longpoll", "timeout": LONGPOLL_MS}
            )
            with lock:
                answers.append(r)
                done.append(("poll", i))

        futures = [pool.submit(poll, i) for i in range(count)]
        yield answers
        for f in futures:
            f.result(timeout=LONGPOLL_MS / 1000 + 120)


def _finished(done: list[tuple[str, Any]], what: str, call: Callable[[], httpx.Response]) -> httpx.Response:
    r = call()
    done.append((what, r.status_code))
    return r


def test_many_longpolls_leave_health_adds_and_queries_answered(service: Service) -> None:
    admin = service.client(service.tokens["admin"])
    for name, feed in (("load-waited", True), ("load-other", False)):
        assert admin.post("/v1/collections", json={"name": name, "changes_feed": feed}).status_code == 201
    text = "a text the writer adds while the readers wait, long enough to have shingles"
    done: list[tuple[str, Any]] = []
    with _longpolls(service.base, service.tokens["read"], "load-waited", WAITERS, done) as answers:
        _wait_for_waiting(service.base, WAITERS)
        _finished(done, "healthz", lambda: admin.get("/healthz"))
        _finished(
            done,
            "add",
            lambda: admin.post("/v1/collections/load-other/documents", json=[{"id": "o", "text": text}]),
        )
        _finished(done, "query", lambda: admin.post("/v1/collections/load-other/query", json={"text": text}))
        # Only now does the waited collection change: every longpoll was still waiting until here.
        assert [what for what, _ in done] == ["healthz", "add", "query"]
        assert [status for _, status in done] == [200, 200, 200]
        r = admin.post("/v1/collections/load-waited/documents", json=[{"id": "w", "text": text}])
        assert r.status_code == 200
    assert len(answers) == WAITERS
    for r in answers:  # every waiter was woken by the one commit, and read it
        assert r.status_code == 200, r.text
        assert [(c["kind"], c["id"]) for c in r.json()["results"]] == [("document.added", "w")]


def test_longpolls_past_the_bound_get_503_with_retry_after(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    token = make_token(database_url, schema, "admin", name="bounded-longpolls")
    server = start_service(database_url, schema, tmp_path / "serve.log", "--max-longpolls", "3")
    try:
        admin = server.client(token)
        assert (
            admin.post("/v1/collections", json={"name": "bounded", "changes_feed": True}).status_code == 201
        )
        done: list[tuple[str, Any]] = []
        with _longpolls(server.base, token, "bounded", 3, done) as answers:
            _wait_for_waiting(server.base, 3)
            refused = admin.get("/v1/collections/bounded/changes", params=SHORT_LONGPOLL)
            assert refused.status_code == 503
            assert int(refused.headers["Retry-After"]) > 0
            assert "longpolls" in refused.json()["detail"]
            plain = admin.get("/v1/collections/bounded/changes")  # a plain read never waits: no slot
            assert plain.status_code == 200
            assert (
                admin.post(
                    "/v1/collections/bounded/documents", json=[{"id": "x", "text": "words"}]
                ).status_code
                == 200
            )
        assert [r.status_code for r in answers] == [200, 200, 200]
        # The slots came back with the answers.
        again = admin.get("/v1/collections/bounded/changes", params=SHORT_LONGPOLL)
        assert again.status_code == 200
    finally:
        server.close_clients()
        server.stop()


def _connections(url: str) -> tuple[int, int]:
    """Client connections to the server now (this one left out), and its max_connections."""
    with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()), "
            "current_setting('max_connections')::int FROM pg_stat_activity"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_two_workers_with_more_longpolls_than_the_server_has_connections(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    token = make_token(database_url, schema, "admin", name="two-workers")
    before, most = _connections(database_url)
    waiters = most + 20  # each used to hold two connections: this many would pass max_connections
    server = start_service(database_url, schema, tmp_path / "serve.log", "--workers", "2")
    try:
        admin = server.client(token)
        assert (
            admin.post("/v1/collections", json={"name": "two-workers", "changes_feed": True}).status_code
            == 201
        )
        done: list[tuple[str, Any]] = []
        with _longpolls(server.base, token, "two-workers", waiters, done) as answers:
            _wait_for_waiting(server.base, waiters, workers=2)
            during, _ = _connections(database_url)
            assert admin.get("/healthz").status_code == 200
            r = admin.post(
                "/v1/collections/two-workers/documents", json=[{"id": "z", "text": "some new words"}]
            )
            assert r.status_code == 200
        assert len(answers) == waiters
        assert all(r.status_code == 200 and r.json()["results"] for r in answers)
    finally:
        server.close_clients()
        server.stop()
    # The waiters took no connection of their own: the two workers hold a listening connection and a
    # few pooled ones each, whatever the number waiting.
    assert during - before <= 20, (before, during)
    assert during < most


def _words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(50_000)]
    return " ".join(rng.choice(vocabulary) for _ in range(n))


def _sent(base: str, token: str, path: str, body: dict[str, Any]) -> socket.socket:
    """A socket on which a whole POST of ``body`` has been sent (its answer not read yet)."""
    host, port = urlsplit(base).hostname, urlsplit(base).port
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    sock = socket.create_connection((host, port), timeout=300)
    sock.sendall(head.encode() + payload)
    return sock


def _status(sock: socket.socket) -> int:
    """The status of the answer on ``sock`` (read to its end)."""
    with sock:
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    return int(data.split(b" ", 2)[1])


# Health checks answered while the query ran (after its body was sent, before any byte of its
# answer came): with the query on the event loop, only those answered while the loop still parsed
# the body, a few at most; off it, one after another for as long as the query's work lasts.
HEALTH_WHILE_RUNNING = 20


def test_health_is_answered_while_a_large_top_k_query_runs(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    token = make_token(database_url, schema, "admin", name="topk-loop")
    server = start_service(database_url, schema, tmp_path / "serve.log")
    try:
        admin = server.client(token)
        r = admin.post("/v1/collections", json={"name": "topk-loop", "neighbours": True, "threshold": 0.5})
        assert r.status_code == 201, r.text
        docs = [{"id": f"d{i}", "text": _words(200, i)} for i in range(50)]
        assert admin.post("/v1/collections/topk-loop/documents", json=docs).status_code == 200
        # The token is cached, the index open: the query below could take the fast path.
        assert (
            admin.post("/v1/collections/topk-loop/query", json={"text": "w1 w2", "top_k": 3}).status_code
            == 200
        )
        big = _words(1_000_000, 99)  # megabytes of text: seconds of sketching and fingerprints
        sock = _sent(server.base, token, "/v1/collections/topk-loop/query", {"text": big, "top_k": 5})
        answered = 0
        with httpx.Client(base_url=server.base, timeout=300) as health:
            while not select.select([sock], [], [], 0)[0]:
                assert health.get("/healthz").status_code == 200
                answered += 1
        assert _status(sock) == 200
    finally:
        server.close_clients()
        server.stop()
    assert answered >= HEALTH_WHILE_RUNNING, answered


def test_a_longpoll_whose_client_left_gives_its_place_back_before_its_timeout(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    token = make_token(database_url, schema, "admin", name="left-longpoll")
    server = start_service(database_url, schema, tmp_path / "serve.log", "--max-longpolls", "1")
    try:
        admin = server.client(token)
        r = admin.post("/v1/collections", json={"name": "left", "changes_feed": True})
        assert r.status_code == 201
        host, port = urlsplit(server.base).hostname, urlsplit(server.base).port
        request = (
            f"GET /v1/collections/left/changes?feed=longpoll&timeout={LONGPOLL_MS} HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        with socket.create_connection((host, port), timeout=60) as sock:
            sock.sendall(request.encode())
            _wait_for_waiting(server.base, 1)
        # The client is gone: its place comes back long before its minute is up, and the next
        # longpoll gets it (past the bound of one it would get 503).
        deadline = time.monotonic() + LONGPOLL_MS / 1000 / 2
        while _metric(server.base, "neardup_longpolls_waiting")[0] > 0:
            assert time.monotonic() < deadline, "the place of a client that left was held to its timeout"
            time.sleep(0.2)
        assert admin.get("/v1/collections/left/changes", params=SHORT_LONGPOLL).status_code == 200
    finally:
        server.close_clients()
        server.stop()
