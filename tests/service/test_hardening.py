"""Issue 39's service items against a real ``neardup serve``: secrets kept out of the access log and
out of 503 answers, cursors and NDJSON the database or a line splitter cannot take, the same rules as
the CLI for limits and ids, repeated JSON keys refused, and the review pages' security headers."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from neardup.service.logs import redact_query
from tests.service.conftest import Service, free_port, start_service

pytestmark = pytest.mark.distributed_variant

PROBLEM = "application/problem+json"
TEXT = "Storms cut power to 40,000 homes across the northern valley on Tuesday night, officials said."
# The cursors of the issue, verbatim: ["a\u0000", "b"] and ["\ud800"].
NUL_PAIR_CURSOR = "WyJhXHUwMDAwIiwgImIiXQ=="
SURROGATE_CLUSTER_CURSOR = "WyJcdWQ4MDAiXQ=="


def _cursor(key: list[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


def _collection(service: Service, name: str, docs: list[dict[str, Any]] | None = None) -> httpx.Client:
    admin = service.client(service.tokens["admin"])
    admin.delete(f"/v1/collections/{name}")
    assert admin.post("/v1/collections", json={"name": name, "threshold": 0.5}).status_code == 201
    if docs:
        assert admin.post(f"/v1/collections/{name}/documents", json=docs).status_code == 200
    return admin


LONE_SURROGATE_PAIR = _cursor(["a", "\ud800"])
NUL_CLUSTER = _cursor(["\x00"])


def _refused(r: httpx.Response, *words: str) -> dict[str, Any]:
    assert r.status_code == 422, (r.status_code, r.text)
    assert r.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = r.json()
    for word in words:
        assert word in problem["detail"], problem
    return problem


# -- item 4: secrets in the access log and in 503 answers ------------------------------------------


def _log_with(service: Service, needle: str) -> str:
    """The server's log once it holds ``needle`` (the access line is written as the answer starts)."""
    deadline = time.monotonic() + 10
    while needle not in (log := service.log_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return log


def test_a_token_in_the_query_string_never_reaches_the_access_log(service: Service) -> None:
    secret = "nd_" + secrets.token_urlsafe(32)
    cursor_secret = "nd_" + secrets.token_urlsafe(32)
    _collection(service, "querylog", [{"id": "a", "text": TEXT}])
    with service.client() as anonymous:  # refused: no Authorization header
        assert anonymous.get("/v1/collections", params={"access_token": secret}).status_code == 401
        assert anonymous.get(f"/review/?access_token={secret}").status_code == 303
        assert anonymous.get(f"/nothing-here?{secret}").status_code == 404
        assert anonymous.get("/healthz", params={"token": secret}).status_code == 200
    with service.client(service.tokens["read"]) as reader:
        r = reader.get("/v1/collections/querylog/pairs", params={"limit": 5, "after": cursor_secret})
        assert r.status_code == 422
        r = reader.get("/v1/collections/querylog/pairs", params={"limit": 7, "access_token": secret})
        assert r.status_code == 200
    log = _log_with(service, "limit=7")
    assert "/v1/collections/querylog/pairs?limit=7&[redacted]" in log  # the line is there, redacted
    assert "limit=5&after=[redacted]" in log
    for leaked in (secret, cursor_secret, secret[3:20], cursor_secret[3:20]):
        assert leaked not in log


def test_query_strings_keep_only_known_names_and_numeric_values() -> None:
    assert redact_query("/v1/x") == "/v1/x"
    assert redact_query("/v1/x?limit=5&min_jaccard=0.8") == "/v1/x?limit=5&min_jaccard=0.8"
    assert redact_query("/v1/x?limit=nd_secret&after=abc") == "/v1/x?limit=[redacted]&after=[redacted]"
    assert redact_query("/v1/x?access_token=nd_s&nd_t&=u") == "/v1/x?[redacted]&[redacted]&[redacted]"
    assert redact_query("/review/login?next=%2Freview%2F%3Faccess_token%3Dnd_s") == (
        "/review/login?next=[redacted]"
    )


@pytest.mark.parametrize("where", ["closed-port", "socket"])
def test_503_names_no_database_detail_and_asks_to_retry(tmp_path: Path, where: str) -> None:
    user, port = "nd_db_user_" + secrets.token_hex(4), free_port()
    socket_dir = tmp_path / "no-server-here"
    socket_dir.mkdir()
    if where == "closed-port":
        url, hidden = f"postgresql://{user}@127.0.0.1:{port}/none?connect_timeout=2", ["127.0.0.1", str(port)]
    else:
        url, hidden = f"postgresql://{user}@/none?host={socket_dir}&connect_timeout=2", [str(socket_dir)]
    service = start_service(url, "neardup", tmp_path / "down.log")
    try:
        with httpx.Client(base_url=service.base, timeout=60) as c:
            bad = {"Authorization": "Bearer nd_" + "x" * 43}
            answers = [
                c.get("/healthz"),
                c.get("/v1/collections", headers=bad),  # the token cannot be checked: 503, not 401
                c.post("/v1/collections/c/query", json={"text": TEXT}, headers=bad),
                c.get("/review/", headers=bad),
            ]
        for r in answers:
            assert r.status_code == 503, r.text
            assert r.headers["content-type"] == PROBLEM
            assert int(r.headers["retry-after"]) > 0
            assert r.json()["detail"] == "the database is unavailable"
            for secret in (user, *hidden, ".s.PGSQL", "socket", "port"):
                assert secret not in r.text, (secret, r.text)
        assert hidden[0] in service.log_text()  # the operator still learns why
    finally:
        service.stop()


# -- item 5: cursors the database cannot compare ---------------------------------------------------


def test_cursors_with_a_nul_or_a_lone_surrogate_are_refused_naming_after(service: Service) -> None:
    docs = [{"id": "a", "text": TEXT}, {"id": "b", "text": TEXT + " Again."}]
    admin = _collection(service, "cursors", docs)
    base = "/v1/collections/cursors"
    cases = [
        (f"{base}/pairs?after={NUL_PAIR_CURSOR}", "NUL"),
        (f"{base}/clusters?after={SURROGATE_CLUSTER_CURSOR}", "surrogate"),
        (f"{base}/pairs?after={LONE_SURROGATE_PAIR}", "surrogate"),
        (f"{base}/clusters?after={NUL_CLUSTER}", "NUL"),
    ]
    for path, why in cases:
        for accept in ("application/json", "application/x-ndjson"):
            problem = _refused(admin.get(path, headers={"Accept": accept}), "'after'", why)
            assert problem["errors"][0]["location"] == ["query", "after"]
    # The review pages' equivalents: the clusters' page cursor and the pair's ids.
    _refused(admin.get("/review/cursors", params={"size": 2, "after": "a\x00"}), "'after'", "NUL")
    _refused(admin.get("/review/cursors/pair", params={"a": "a\x00", "b": "b"}), "'a'", "NUL")
    # Cursors this service gave out still work.
    first = admin.get(f"{base}/pairs", params={"limit": 1}).json()
    assert first["pairs"]
    assert admin.get(f"{base}/pairs", params={"after": _cursor(["a", "b"])}).status_code == 200


# -- item 6: NDJSON lines end at "\n" only ---------------------------------------------------------


def test_ndjson_strings_may_hold_unicode_line_separators(service: Service) -> None:
    admin = _collection(service, "separators")
    texts = {"ls": "one\u2028two", "ps": "three\u2029four", "nel": "five\x85six", "ff": "seven\x0ceight"}
    body = "\r\n".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in texts.items())
    r = admin.post(
        "/v1/collections/separators/documents",
        content=(body + "\n").encode(),
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 4
    for doc_id, text in texts.items():
        assert admin.get(f"/v1/collections/separators/documents/{doc_id}").json()["text"] == text


# -- item 9: the CLI's rules for limits and ids ----------------------------------------------------


def test_limits_are_positive_as_in_the_cli(service: Service) -> None:
    admin = _collection(service, "limits39", [{"id": "a", "text": TEXT}])
    base = "/v1/collections/limits39"
    assert admin.post(f"{base}/query", json={"text": TEXT, "limit": 1}).status_code == 200  # token cached
    _refused(admin.post(f"{base}/query", json={"text": TEXT, "limit": 0}), "limit")
    _refused(admin.post(f"{base}/check", params={"limit": 0}, json=[{"id": "x", "text": TEXT}]), "limit")
    assert (
        admin.post(f"{base}/check", params={"limit": 1}, json=[{"id": "x", "text": TEXT}]).status_code == 200
    )


def test_integer_ids_are_taken_as_their_decimal_text_as_the_cli_reads_them(service: Service) -> None:
    admin = _collection(service, "intids")
    base = "/v1/collections/intids"
    r = admin.post(f"{base}/documents", json=[{"id": 7, "text": TEXT}, {"id": -12, "text": "other words"}])
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 2
    assert admin.get(f"{base}/documents/7").json()["text"] == TEXT
    ndjson = b'{"id": 8, "text": "more words here"}\n'
    r = admin.post(f"{base}/documents", content=ndjson, headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 200
    assert admin.get(f"{base}/documents/8").status_code == 200
    checked = admin.post(f"{base}/check", json=[{"id": 9, "text": TEXT}]).json()["results"]
    assert checked[0]["id"] == "9"
    assert checked[0]["matches"][0]["id"] == "7"
    _refused(admin.post(f"{base}/documents", json=[{"id": True, "text": TEXT}]), "'id'")
    _refused(admin.post(f"{base}/documents", json=[{"id": 1.5, "text": TEXT}]), "'id'")
    _refused(
        admin.post(f"{base}/documents", json=[{"id": 3, "text": "x"}, {"id": "3", "text": "y"}]), "repeats"
    )


def test_create_takes_num_perm_8192_as_the_cli_does(service: Service) -> None:
    with service.client(service.tokens["admin"]) as admin:
        admin.delete("/v1/collections/wide")
        # Bands and rows given: tuning them for 8,192 permutations takes seconds of CPU, which a
        # busy machine can stretch past the client's timeout; the bound is what is tested here.
        wide = {"name": "wide", "threshold": 0.8, "num_perm": 8192, "bands": 512, "rows": 16}
        r = admin.post("/v1/collections", json=wide)
        assert r.status_code == 201, r.text
        assert r.json()["params"]["num_perm"] == 8192
        _refused(admin.post("/v1/collections", json={"name": "wider", "num_perm": 8193}), "num_perm")
        admin.delete("/v1/collections/wide")


# -- item 10: repeated JSON keys; the review pages' headers ----------------------------------------


def test_repeated_json_keys_are_refused_naming_the_key(service: Service) -> None:
    admin = _collection(service, "dupkeys", [{"id": "a", "text": TEXT}])
    base = "/v1/collections/dupkeys"
    json_type = {"Content-Type": "application/json"}
    with service.client(service.tokens["read"]) as reader:
        assert reader.post(f"{base}/query", json={"text": TEXT}).status_code == 200  # the fast path's turn
        for _ in range(2):
            body = b'{"text": "zzz qqq", "text": "' + TEXT.encode() + b'"}'
            _refused(reader.post(f"{base}/query", content=body, headers=json_type), "'text'", "twice")
    cases = [
        (f"{base}/documents", b'[{"id": "b", "id": "c", "text": "t"}]', json_type, "'id'"),
        (f"{base}/documents", b'[{"id": "b", "text": "t", "meta": {"k": 1, "k": 2}}]', json_type, "'k'"),
        (
            f"{base}/documents",
            b'{"id": "b", "text": "t"}\n{"id": "c", "text": "t", "text": "u"}\n',
            {"Content-Type": "application/x-ndjson"},
            "'text'",
        ),
        (f"{base}/check", b'[{"id": "b", "text": "t", "text": "u"}]', json_type, "'text'"),
        ("/v1/collections", b'{"name": "dupkeys2", "name": "dupkeys3"}', json_type, "'name'"),
        (
            f"{base}/labels",
            b'{"id_a": "a", "id_b": "b", "label": "duplicate", "label": "not_duplicate"}',
            json_type,
            "'label'",
        ),
    ]
    for path, body, headers, key in cases:
        _refused(admin.post(path, content=body, headers=headers), key, "twice")
    assert admin.get(f"{base}/documents/b").status_code == 404  # nothing of a refused add stored
    assert admin.get("/v1/collections/dupkeys2").status_code == 404
    assert admin.get(f"{base}/labels").json()["labels"] == []


def test_review_pages_cannot_be_framed_and_run_only_their_own_style_and_script(service: Service) -> None:
    _collection(service, "headers39", [{"id": "a", "text": TEXT}])
    with service.client(service.tokens["read"]) as reader, service.client() as anonymous:
        pages = [
            reader.get("/review/"),
            reader.get("/review/headers39"),
            reader.get("/review/headers39/document", params={"id": "a"}),
            anonymous.get("/review/login"),
        ]
    for r in pages:
        assert r.status_code == 200, r.text
        assert r.headers["x-frame-options"] == "DENY"
        policy: dict[str, str] = {}
        for directive in r.headers["content-security-policy"].split(";"):
            name, _, value = directive.strip().partition(" ")
            policy[name] = value
        assert policy["default-src"] == "'none'"
        assert policy["frame-ancestors"] == "'none'"
        assert policy["form-action"] == "'self'"
        # The one inline style sheet and the one inline script (the keyboard shortcuts) are allowed
        # by their hashes, nothing else: no script file, no script a stored text could smuggle in.
        for tag in ("style", "script"):
            found = re.findall(rf"<{tag}>(.*?)</{tag}>", r.text, re.DOTALL)
            assert len(found) == 1
            assert r.text.count(f"<{tag}") == 1
            digest = base64.b64encode(hashlib.sha256(found[0].encode()).digest()).decode()
            assert policy[f"{tag}-src"] == f"'sha256-{digest}'"
        assert ' style="' not in r.text
