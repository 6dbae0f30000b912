"""The service words an error's hint for an HTTP client: a keyword is a field of the request body."""

from __future__ import annotations

from tests.service.conftest import Service


def test_creating_a_collection_twice_names_the_body_field(service: Service) -> None:
    admin = service.client(service.tokens["admin"])
    admin.delete("/v1/collections/hint-http")
    assert admin.post("/v1/collections", json={"name": "hint-http"}).status_code == 201
    r = admin.post("/v1/collections", json={"name": "hint-http"})
    assert r.status_code == 409
    detail = r.json()["detail"]
    assert detail == (
        "collection 'hint-http' exists already; open it, or reuse it with "
        '"exist_ok": true in the request body'
    )
    assert "exist_ok=True" not in detail
    assert "--exist-ok" not in detail
    again = admin.post("/v1/collections", json={"name": "hint-http", "exist_ok": True})
    assert again.status_code in (200, 201)
