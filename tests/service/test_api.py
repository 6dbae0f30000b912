"""The HTTP API against a real ``neardup serve`` process and a real PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from neardup.service.context import TOKEN_CACHE_SECONDS
from tests._corpus import planted_corpus
from tests.conftest import Run
from tests.service.conftest import Service, start_service

pytestmark = pytest.mark.distributed_variant

PROBLEM = "application/problem+json"


def _create(service: Service, name: str, threshold: float = 0.5) -> None:
    with service.client(service.tokens["admin"]) as c:
        r = c.post("/v1/collections", json={"name": name, "threshold": threshold, "exist_ok": True})
        assert r.status_code == 201, r.text


def _docs(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"id": i, "text": t, "meta": {"n": n}} for n, (i, t) in enumerate(pairs)]


def _all_pairs(client: httpx.Client, name: str, limit: int = 7) -> list[tuple[str, str, float]]:
    """Every pair, page by page (following ``next``)."""
    out: list[tuple[str, str, float]] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"after": after} if after else {})}
        r = client.get(f"/v1/collections/{name}/pairs", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["pairs"]) <= limit
        out += [(p["id_a"], p["id_b"], p["jaccard"]) for p in page["pairs"]]
        after = page["next"]
        if after is None:
            return out


FOX = "the quick brown fox jumps over the lazy dog near the river bank"
FOX2 = "the quick brown fox jumped over the lazy dog near the river bank"


def test_every_endpoint_end_to_end(service: Service) -> None:
    name = "api-e2e"
    admin = service.client(service.tokens["admin"])
    assert httpx.get(f"{service.base}/healthz").json() == {"status": "ok"}
    spec = httpx.get(f"{service.base}/openapi.json").json()
    assert "/v1/collections/{name}/check" in spec["paths"]
    admin.delete(f"/v1/collections/{name}")
    r = admin.post("/v1/collections", json={"name": name, "threshold": 0.5, "k": 4})
    assert r.status_code == 201
    assert r.json()["params"]["k"] == 4
    assert admin.post("/v1/collections", json={"name": name}).status_code == 409
    assert name in [c["name"] for c in admin.get("/v1/collections").json()["collections"]]
    docs = [
        {"id": "fox/1", "text": FOX, "meta": {"desk": "wx"}},
        {"id": "fox 2", "text": FOX2},
        {"id": "other", "text": "an entirely different sentence about elections and votes"},
        {"id": "blank", "text": "   "},
    ]
    r = admin.post(f"/v1/collections/{name}/documents", json=docs)
    assert r.json() == {"added": 4, "replaced": 0, "unchanged": 0, "empty": 1, "new_pairs": 1}
    ndjson = json.dumps({"id": "fox3", "text": FOX + "!"}) + "\n\n" + json.dumps(docs[2]) + "\n"
    r = admin.post(
        f"/v1/collections/{name}/documents", content=ndjson, headers={"Content-Type": "application/x-ndjson"}
    )
    assert r.json()["added"] == 1
    assert r.json()["unchanged"] == 1
    info = admin.get(f"/v1/collections/{name}").json()
    assert info["stats"]["documents"] == 5
    assert info["threshold"] == 0.5
    doc = admin.get(f"/v1/collections/{name}/documents/fox%2F1").json()
    assert doc["text"] == FOX
    assert doc["meta"] == {"desk": "wx"}
    assert {p["id"] for p in doc["pairs"]} == {"fox 2", "fox3"}
    assert admin.get(f"/v1/collections/{name}/documents/nope").status_code == 404
    matches = admin.post(f"/v1/collections/{name}/query", json={"text": FOX}).json()["matches"]
    assert matches[0] == {"id": "fox/1", "jaccard": 1.0}
    assert [m["jaccard"] for m in matches] == sorted((m["jaccard"] for m in matches), reverse=True)
    assert admin.post(f"/v1/collections/{name}/query", json={"text": FOX, "limit": 1}).json()["matches"] == [
        {"id": "fox/1", "jaccard": 1.0}
    ]
    checked = admin.post(
        f"/v1/collections/{name}/check", json=[{"id": "new", "text": FOX2}, {"id": "x", "text": "zzz qqq"}]
    ).json()["results"]
    assert [c["id"] for c in checked] == ["new", "x"]
    assert checked[0]["matches"][0]["id"] == "fox 2"
    assert checked[1]["matches"] == []
    assert admin.get(f"/v1/collections/{name}/documents/new").status_code == 404  # check stored nothing
    paged = _all_pairs(admin, name, limit=1)
    streamed = [
        json.loads(line)
        for line in admin.get(
            f"/v1/collections/{name}/pairs", headers={"Accept": "application/x-ndjson"}
        ).text.splitlines()
    ]
    assert [(p["id_a"], p["id_b"]) for p in streamed] == [(a, b) for a, b, _ in paged]
    assert len(paged) == 3
    assert paged == sorted(paged)
    high = admin.get(f"/v1/collections/{name}/pairs", params={"min_jaccard": 0.99}).json()
    assert all(p["jaccard"] >= 0.99 for p in high["pairs"])
    assert len(high["pairs"]) < 3
    clusters = admin.get(f"/v1/collections/{name}/clusters", params={"limit": 1}).json()
    assert clusters["clusters"][0]["ids"] == ["fox 2", "fox/1", "fox3"]
    assert clusters["next"] is None
    assert clusters["clusters"][0]["representative"] == "fox/1"  # the earliest inserted (keep "first")
    streamed_clusters = admin.get(
        f"/v1/collections/{name}/clusters", headers={"Accept": "application/x-ndjson"}
    ).text.splitlines()
    assert [json.loads(line)["ids"] for line in streamed_clusters] == [["fox 2", "fox/1", "fox3"]]
    r = admin.post(
        f"/v1/collections/{name}/labels",
        json={"id_a": "fox3", "id_b": "fox/1", "label": "duplicate", "note": "same story"},
    )
    assert r.status_code == 204
    (label,) = admin.get(f"/v1/collections/{name}/labels").json()["labels"]
    assert (label["id_a"], label["id_b"], label["label"], label["method"]) == (
        "fox/1",
        "fox3",
        "duplicate",
        "exact",
    )
    assert admin.delete(f"/v1/collections/{name}/documents/fox3").status_code == 204
    assert admin.delete(f"/v1/collections/{name}/documents/fox3").status_code == 404
    assert len(_all_pairs(admin, name)) == 1
    assert admin.delete(f"/v1/collections/{name}").status_code == 204
    assert admin.get(f"/v1/collections/{name}").status_code == 404
    assert admin.delete(f"/v1/collections/{name}").status_code == 404


# (method, path, body, scope needed, status when allowed); {c} is the collection.
ENDPOINTS: list[tuple[str, str, Any, str, int]] = [
    ("GET", "/v1/collections/{c}", None, "read", 200),
    ("POST", "/v1/collections/{c}/documents", [{"id": "m3", "text": FOX + " again"}], "write", 200),
    ("GET", "/v1/collections/{c}/documents/m1", None, "read", 200),
    ("DELETE", "/v1/collections/{c}/documents/m3", None, "write", 204),
    ("POST", "/v1/collections/{c}/query", {"text": FOX}, "read", 200),
    ("POST", "/v1/collections/{c}/check", [{"id": "q", "text": FOX}], "read", 200),
    ("GET", "/v1/collections/{c}/pairs", None, "read", 200),
    ("GET", "/v1/collections/{c}/clusters", None, "read", 200),
    ("POST", "/v1/collections/{c}/labels", {"id_a": "m1", "id_b": "m2", "label": "duplicate"}, "write", 204),
    ("GET", "/v1/collections/{c}/labels", None, "read", 200),
    ("GET", "/review/{c}", None, "read", 200),
    ("GET", "/review/{c}/pair?a=m1&b=m2", None, "read", 200),
    ("POST", "/v1/collections", {"name": "{c}.new", "threshold": 0.5}, "admin", 201),
    ("DELETE", "/v1/collections/{c}.new", None, "admin", 204),
    ("DELETE", "/v1/collections/{c}", None, "admin", 204),
]
LEVELS = ("read", "write", "admin")


def test_token_matrix(service: Service) -> None:
    """Each endpoint with no token, read, write, admin, and an admin token of another collection."""
    name = "matrix"
    admin = service.client(service.tokens["admin"])
    outcomes: dict[tuple[str, str, str], int] = {}
    for who in (None, "read", "write", "admin", "other", "bogus"):
        token = "nd_not-a-real-token" if who == "bogus" else service.tokens[who] if who else None
        with service.client(token) as client:
            for method, path, body, needed, ok in ENDPOINTS:
                _create(service, name)
                admin.post(
                    f"/v1/collections/{name}/documents",
                    json=[
                        {"id": "m1", "text": FOX},
                        {"id": "m2", "text": FOX2},
                        {"id": "m3", "text": FOX + "!"},
                    ],
                )
                if path.endswith(".new") and method == "DELETE":
                    _create(service, f"{name}.new")
                elif path == "/v1/collections":
                    admin.delete(f"/v1/collections/{name}.new")
                payload = json.loads(json.dumps(body).replace("{c}", name)) if body is not None else None
                r = client.request(method, path.replace("{c}", name), json=payload, follow_redirects=False)
                outcomes[(method, path, str(who))] = r.status_code
                if who is None or who == "bogus":
                    expected = 303 if path.startswith("/review") and who is None else 401
                elif who == "other" or LEVELS.index(who) < LEVELS.index(needed):
                    expected = 403
                else:
                    expected = ok
                assert r.status_code == expected, (method, path, who, r.text)
                if expected in (401, 403):
                    assert r.headers["content-type"] == PROBLEM
                    assert r.json()["status"] == expected
    # A token of another collection sees only that one in the list; healthz needs no token.
    with service.client(service.tokens["other"]) as other:
        assert other.get("/v1/collections").status_code == 200
        assert all(c["name"] == "other" for c in other.get("/v1/collections").json()["collections"])
    assert httpx.get(f"{service.base}/v1/collections").status_code == 401
    assert len(outcomes) == 6 * len(ENDPOINTS)
    admin.delete(f"/v1/collections/{name}")


def test_a_bad_record_stores_nothing_of_its_request(service: Service) -> None:
    name = "bad-record"
    _create(service, name)
    client = service.client(service.tokens["write"])
    before = client.get(f"/v1/collections/{name}").json()["stats"]["documents"]
    bad_batches: list[tuple[Any, int, str | None]] = [
        ([{"id": "g1", "text": FOX}, {"id": "g2", "text": FOX2}, {"id": "g3", "text": 7}], 2, "text"),
        ([{"id": "g1", "text": FOX}, {"text": "no id"}], 1, "id"),
        ([{"id": "g1", "text": FOX}, {"id": "g1", "text": FOX2}], 1, None),
        ([{"id": "g1", "text": FOX}, {"id": "g4", "text": "nul \u0000 inside"}], 1, "text"),
        ([{"id": "g1", "text": FOX}, {"id": "g5", "text": "x", "meta": [1]}], 1, "meta"),
        ([{"id": "g1", "text": FOX}, "just a string"], 1, None),
    ]
    for body, position, field in bad_batches:
        r = client.post(f"/v1/collections/{name}/documents", json=body)
        assert r.status_code == 422, r.text
        problem = r.json()
        assert r.headers["content-type"] == PROBLEM
        assert problem["errors"][0]["record"] == position
        assert problem["errors"][0]["field"] == field
        assert f"record {position}" in problem["detail"]
    r = client.post(
        f"/v1/collections/{name}/documents",
        content='{"id": "g1", "text": "fine"}\n{"id": "g2", "text": \n',
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert r.status_code == 422
    assert r.json()["errors"][0]["record"] == 1
    for body in (b"{not json", b'{"id": "x"}', b"\xff\xfe"):
        r = client.post(
            f"/v1/collections/{name}/documents", content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 422
        assert "Traceback" not in r.text
    assert client.get(f"/v1/collections/{name}").json()["stats"]["documents"] == before
    assert client.get(f"/v1/collections/{name}/documents/g1").status_code == 404


def test_http_adds_give_exactly_the_pairs_the_cli_lists(service: Service, cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=10, copies=3, seed=7)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in _docs(docs)))
    assert cli("init", "--threshold", "0.6")[0] == 0
    assert cli("add", str(path), "--batch-size", "7")[0] == 0
    _, out, _ = cli("pairs")
    cli_pairs = [(a, b, float(j)) for a, b, j in list(csv.reader(io.StringIO(out), delimiter="\t"))[1:]]
    name = "parity"
    client = service.client(service.tokens["admin"])
    client.delete(f"/v1/collections/{name}")
    _create(service, name, 0.6)
    for start in range(0, len(docs), 9):  # other request sizes than the CLI's batches
        r = client.post(f"/v1/collections/{name}/documents", json=_docs(docs)[start : start + 9])
        assert r.status_code == 200
    http_pairs = _all_pairs(client, name, limit=5)
    assert len(cli_pairs) > 10
    assert [(a, b) for a, b, _ in http_pairs] == [(a, b) for a, b, _ in cli_pairs]
    assert all(abs(x[2] - y[2]) < 1e-6 for x, y in zip(http_pairs, cli_pairs, strict=True))
    _, out, _ = cli("clusters", "--format", "jsonl")
    grouped: dict[int, list[str]] = {}
    for row in map(json.loads, out.splitlines()):
        grouped.setdefault(row["cluster"], []).append(row["id"])
    clusters = client.get(f"/v1/collections/{name}/clusters").json()["clusters"]
    assert sorted(c["ids"] for c in clusters) == sorted(grouped.values())


def test_four_clients_at_once_end_with_the_pairs_of_one(service: Service) -> None:
    docs = _docs(planted_corpus(n_sources=12, copies=3, seed=11))
    client = service.client(service.tokens["admin"])
    for name in ("together", "alone"):
        client.delete(f"/v1/collections/{name}")
        _create(service, name, 0.6)
    for start in range(0, len(docs), 10):
        assert (
            client.post("/v1/collections/alone/documents", json=docs[start : start + 10]).status_code == 200
        )
    # Each client gets half the documents (overlapping with two others), in requests of 5.
    shares = [docs[k * len(docs) // 4 :] + docs[: k * len(docs) // 4] for k in range(4)]
    shares = [s[: len(docs) // 2 + 3] for s in shares]
    errors: list[str] = []

    def run(share: list[dict[str, Any]]) -> None:
        with service.client(service.tokens["write"]) as c:
            for start in range(0, len(share), 5):
                r = c.post("/v1/collections/together/documents", json=share[start : start + 5])
                if r.status_code != 200:
                    errors.append(r.text)

    threads = [threading.Thread(target=run, args=(s,)) for s in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    covered = {d["id"] for s in shares for d in s}
    alone = [p for p in _all_pairs(client, "alone", 50) if p[0] in covered and p[1] in covered]
    assert _all_pairs(client, "together", 50) == alone
    assert len(alone) > 5
    stats = client.get("/v1/collections/together").json()["stats"]
    assert stats["documents"] == len(covered)


def test_errors_are_problem_documents_and_bodies_have_a_limit(service: Service) -> None:
    client = service.client(service.tokens["admin"])
    _create(service, "limits")
    r = client.post("/v1/collections/limits/documents", json=[{"id": "big", "text": "x" * (1024 * 1024)}])
    assert r.status_code == 413
    assert r.headers["content-type"] == PROBLEM
    chunked = client.post(
        "/v1/collections/limits/documents",
        content=iter([b'[{"id": "big", "text": "', b"y" * (600 * 1024), b"z" * (600 * 1024), b'"}]']),
    )
    assert chunked.status_code == 413
    assert client.get("/v1/collections/limits/documents/big").status_code == 404
    small = client.post(  # a chunked body within the limit is read whole and handed on
        "/v1/collections/limits/documents", content=iter([b'[{"id": "small", "text": "', b"y" * 1000, b'"}]'])
    )
    assert small.status_code == 200, small.text
    assert small.json()["added"] == 1
    assert client.get("/v1/collections/limits/documents/small").json()["text"] == "y" * 1000
    for r in (
        client.get("/v1/nothing-here"),
        client.get("/v1/collections/no-such-collection"),
        client.post("/v1/collections/limits/query", json={"text": FOX, "min_jaccard": 2}),
        client.post(
            "/v1/collections/limits/query",
            content=b'{"text": "\\ud800"}',
            headers={"Content-Type": "application/json"},
        ),
        client.get("/v1/collections/limits/pairs", params={"after": "not-a-cursor"}),
        client.get("/v1/collections/bad name!/pairs"),
        client.post("/v1/collections", json={"name": "x", "bands": 3}),
    ):
        problem = r.json()
        assert r.headers["content-type"] == PROBLEM, r.text
        assert 400 <= r.status_code < 500, r.text
        assert problem["status"] == r.status_code
        assert problem["title"]
        assert "Traceback" not in r.text


def test_health_is_503_when_the_database_does_not_answer(tmp_path: Path) -> None:
    closed_port = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    service = start_service(closed_port, "neardup", tmp_path / "down.log")
    try:
        r = httpx.get(f"{service.base}/healthz", timeout=30)
        assert r.status_code == 503
        assert r.headers["content-type"] == PROBLEM
        assert "Traceback" not in r.text
        assert "password" not in r.text
    finally:
        service.stop()


def test_no_auth_is_refused_off_loopback(database_url: str, schema: str) -> None:
    import subprocess
    import sys

    argv = [sys.executable, "-m", "neardup", "--db", database_url, "--schema", schema]
    r = subprocess.run(
        [*argv, "serve", "--no-auth", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "loopback" in r.stderr


def test_tokens_never_reach_the_log(service: Service) -> None:
    with service.client(service.tokens["read"]) as c:
        c.get("/v1/collections")
        c.get("/v1/collections/matrix/pairs")
    with service.client("nd_" + "x" * 43) as c:
        assert c.get("/v1/collections").status_code == 401
    log = service.log_text()
    assert "GET /v1/collections" in log  # the access log is there ...
    assert all(token not in log for token in service.tokens.values())  # ... without tokens
    assert "nd_xxxx" not in log


def test_a_client_leaving_mid_body_is_not_logged_as_an_error(service: Service) -> None:
    _create(service, "gone")
    port = int(service.base.rsplit(":", 1)[1])
    for path in ("/v1/collections/gone/documents", "/v1/collections/gone/query"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {service.tokens['write']}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n[{".encode()
            )
    # The server is still well, and said nothing of a failure.
    with service.client(service.tokens["read"]) as c:
        assert c.post("/v1/collections/gone/query", json={"text": "still here"}).status_code == 200
    log = service.log_text()
    assert "Exception in ASGI application" not in log
    assert "ClientDisconnect" not in log


def test_token_commands_create_list_revoke(service: Service, cli: Run) -> None:
    status, out, err = cli("token", "create", "--scope", "write", "--collection", "tok-c", "--name", "bot")
    assert status == 0
    token = out.strip().splitlines()[-1]
    assert token.startswith("nd_")
    assert token not in err
    _create(service, "tok-c")
    with service.client(token) as c:
        assert c.post("/v1/collections/tok-c/documents", json=[{"id": "a", "text": FOX}]).status_code == 200
        assert c.get("/v1/collections/other/pairs").status_code == 403
        _, listed, _ = cli("token", "list", "--format", "json")
        mine = next(t for t in json.loads(listed) if t["name"] == "bot")
        assert mine["scope"] == "write"
        assert mine["collection"] == "tok-c"
        assert token not in listed
        assert mine["last_used_at"]
        assert not mine["revoked_at"]
        assert cli("token", "revoke", mine["prefix"])[0] == 0
        time.sleep(TOKEN_CACHE_SECONDS + 0.5)  # a token checked just now is trusted this long
        assert c.get("/v1/collections/tok-c").status_code == 401
    assert cli("token", "revoke", str(mine["id"]))[0] == 1  # already revoked
    assert cli("token", "create")[0] == 1  # --scope is required


def test_labels_export_and_eval_precision(service: Service, cli: Run) -> None:
    assert cli("init", "--threshold", "0.5")[0] == 0
    client = service.client(service.tokens["write"])
    name = cli.collection
    docs = [{"id": "p1", "text": FOX}, {"id": "p2", "text": FOX2}, {"id": "p3", "text": FOX + " today"}]
    assert client.post(f"/v1/collections/{name}/documents", json=docs).status_code == 200
    for a, b, verdict in (
        ("p1", "p2", "duplicate"),
        ("p3", "p1", "not_duplicate"),
    ):
        r = client.post(f"/v1/collections/{name}/labels", json={"id_a": a, "id_b": b, "label": verdict})
        assert r.status_code == 204
    # A label is of two stored documents: "zz" is none (it used to be stored, an orphan label).
    r = client.post(f"/v1/collections/{name}/labels", json={"id_a": "p1", "id_b": "zz", "label": "duplicate"})
    assert r.status_code == 422
    assert "no document with id 'zz'" in r.text
    _, out, _ = cli("labels", "--format", "json")
    rows = json.loads(out)
    assert [(r["id_a"], r["id_b"], r["label"]) for r in rows] == [
        ("p1", "p2", "duplicate"),
        ("p1", "p3", "not_duplicate"),
    ]
    assert rows[0]["method"] == "exact"
    status, _, err = cli("eval", "--sample", "3")
    assert status == 0
    assert "precision by labels: 0.5000 (1 of 2 labelled stored pairs are duplicates)" in err


@pytest.mark.parametrize("workers", [2])
def test_several_workers_serve_one_database(
    database_url: str, schema: str, tmp_path: Path, workers: int
) -> None:
    from tests.service.conftest import make_token

    token = make_token(database_url, schema, "read")
    service = start_service(database_url, schema, tmp_path / "workers.log", "--workers", str(workers))
    try:
        with service.client(token) as c:
            assert {c.get("/v1/collections").status_code for _ in range(20)} == {200}
            # Every worker redacts its access log (a token in the URL is not read, but would be logged);
            # a connection each, so that the requests are spread over the workers.
            secret, close = "nd_" + "q" * 43, {"Connection": "close"}
            answers = {c.get(f"/v1/collections?access_token={secret}", headers=close) for _ in range(20)}
            assert {r.status_code for r in answers} == {200}
        deadline = time.monotonic() + 10
        while service.log_text().count("?[redacted]") < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert service.log_text().count("GET /v1/collections?[redacted] HTTP") == 20
        assert "qqqq" not in service.log_text()
    finally:
        service.stop()
