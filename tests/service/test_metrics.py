"""/metrics in the Prometheus text format and the JSON request log of a real server: requests counted
by route template and status, documents and pairs written, the pools' and longpolls' gauges; a
request id in every answer, error document and log line; no token in any log."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.service.conftest import Service, make_token, start_service

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(base: str) -> Samples:
    r = httpx.get(f"{base}/metrics", timeout=60)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


TEXT = "the metrics test stores a few texts of several words each, near copies among them"


def test_metrics_count_requests_by_route_and_status_and_what_was_written(service: Service) -> None:
    admin = service.client(service.tokens["admin"])
    before = _scrape(service.base)
    assert admin.post("/v1/collections", json={"name": "metrics", "threshold": 0.5}).status_code == 201
    docs = [{"id": "a", "text": TEXT}, {"id": "b", "text": TEXT + " too"}, {"id": "c", "text": "other"}]
    r = admin.post("/v1/collections/metrics/documents", json=docs)
    assert r.status_code == 200
    new_pairs = r.json()["new_pairs"]
    assert new_pairs >= 1
    assert admin.get("/v1/collections/no-such-collection").status_code == 404
    assert admin.get(f"/nothing/here/{secrets.token_hex(8)}").status_code == 404
    assert admin.delete("/v1/collections/metrics/documents/c").status_code == 204
    after = _scrape(service.base)

    def grew(name: str, **labels: str) -> float:
        return _get(after, name, **labels) - _get(before, name, **labels)

    documents = {"route": "/v1/collections/{name}/documents", "method": "POST"}
    assert grew("neardup_http_requests_total", status="200", **documents) == 1
    assert grew("neardup_http_request_duration_seconds_count", **documents) == 1
    assert grew("neardup_http_request_duration_seconds_bucket", le="+Inf", **documents) == 1
    missing = {"route": "/v1/collections/{name}", "method": "GET", "status": "404"}
    assert grew("neardup_http_requests_total", **missing) == 1
    # A path no route has is counted under one label: clients cannot make series of their own.
    assert grew("neardup_http_requests_total", route="unmatched", method="GET", status="404") == 1
    assert not any("nothing/here" in str(labels) for _, labels in after)
    assert grew("neardup_documents_written_total", kind="added") == 3
    assert grew("neardup_documents_written_total", kind="removed") == 1
    assert grew("neardup_pairs_written_total") == new_pairs
    assert _get(after, "neardup_worker_threads_limit") > 0
    assert _get(after, "neardup_longpolls_limit") > 0
    assert _get(after, "neardup_index_pool_idle") >= 1  # the add's index went back to the pool
    assert _get(after, "process_resident_memory_bytes") > 0
    for gauge in (
        "neardup_longpolls_waiting",
        "neardup_worker_threads_busy",
        "neardup_worker_threads_queued",
        "neardup_index_pool_in_use",
        "neardup_connection_pool_idle",
        "neardup_changes_listener_connected",
    ):
        assert (gauge, ()) in after, gauge


def test_json_log_has_a_line_a_request_with_the_id_the_answer_carries_and_no_token(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    token = make_token(database_url, schema, "admin", name="json-log")
    secret = "nd_" + secrets.token_urlsafe(32)
    log = tmp_path / "serve.log"
    server = start_service(database_url, schema, log, "--log-format", "json")
    try:
        admin = server.client(token)
        missing = admin.get("/v1/collections/nope", headers={"X-Request-ID": "client-chosen.42"})
        assert missing.status_code == 404
        assert missing.headers["x-request-id"] == "client-chosen.42"
        assert missing.json()["request_id"] == "client-chosen.42"
        forged = admin.get("/v1/collections/nope", headers={"X-Request-ID": 'x" "status": 200'})
        chosen = forged.headers["x-request-id"]
        assert re.fullmatch("[0-9a-f]{32}", chosen)  # not the client's: it could forge a log line
        assert forged.json()["request_id"] == chosen
        listed = admin.get("/v1/collections", params={"access_token": secret, "limit": 3})
        assert listed.status_code == 200
        listed_id = listed.headers["x-request-id"]
        bad = admin.post(
            "/v1/collections/nope/documents", content=b"[{", headers={"content-type": "application/json"}
        )
        assert bad.status_code in (404, 422)
        assert bad.json()["request_id"] == bad.headers["x-request-id"]
        with server.client() as anonymous:
            refused = anonymous.get("/v1/collections", headers={"Authorization": f"Bearer {secret}"})
            assert refused.status_code == 401
            assert refused.json()["request_id"] == refused.headers["x-request-id"]
    finally:
        server.close_clients()
        server.stop()
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    requests = {line["request_id"]: line for line in lines if line["logger"] == "neardup.request"}
    assert requests["client-chosen.42"]["status"] == 404
    assert requests["client-chosen.42"]["route"] == "/v1/collections/{name}"
    assert requests["client-chosen.42"]["method"] == "GET"
    assert requests[chosen]["status"] == 404
    assert requests[listed_id]["status"] == 200
    assert requests[listed_id]["path"] == "/v1/collections?[redacted]&limit=3"
    assert isinstance(requests[listed_id]["duration_ms"], float)
    assert requests[bad.headers["x-request-id"]]["status"] == bad.status_code
    assert requests[refused.headers["x-request-id"]]["status"] == 401
    # Every line is JSON but the one neardup prints before the server starts.
    assert [line for line in text.splitlines() if not line.startswith("{")] == [text.splitlines()[0]]
    for leaked in (secret, secret[3:20], token, token[3:20]):
        assert leaked not in text
