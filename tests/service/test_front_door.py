"""The service's front door on a real server: / for a browser and for an API client, the icon,
the API's areas in the OpenAPI document, and a refusal that names the scope it needs."""

from __future__ import annotations

from pathlib import Path

import httpx

from neardup.database import Database
from tests.service.conftest import Service, start_service


def test_the_landing_page_points_to_the_review_pages_and_the_docs(service: Service) -> None:
    client = service.client()  # no token: the front door needs none
    page = client.get("/", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert 'href="/review/"' in page.text
    assert 'href="/docs"' in page.text
    assert "No token exists yet" not in page.text  # the session's tokens exist
    answer = client.get("/", headers={"Accept": "application/json"}).json()
    assert answer == {
        "review": "/review/",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "health": "/healthz",
        "auth": True,
    }
    for icon in ("/favicon.ico", "/favicon.svg"):
        r = client.get(icon)
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("image/svg+xml")


def test_every_route_of_the_api_has_its_area_and_a_refusal_says_an_admin_token(service: Service) -> None:
    spec = service.client().get("/openapi.json").json()
    areas = [t["name"] for t in spec["tags"]]
    tagged = [op["tags"] for ops in spec["paths"].values() for op in ops.values()]
    assert all(len(tags) == 1 and tags[0] in areas for tags in tagged)
    assert {tags[0] for tags in tagged} == set(areas)
    r = service.client(service.tokens["read"]).post("/v1/collections", json={"name": "not-made"})
    assert r.status_code == 403
    assert r.json()["detail"] == "this needs an admin token; this one is read"


def test_before_any_token_exists_the_landing_page_says_how_to_make_one(
    database_url: str, fresh_schema: str, tmp_path: Path
) -> None:
    with Database(database_url, fresh_schema) as db:
        db.upgrade()
    running = start_service(database_url, fresh_schema, tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=running.base, timeout=60) as client:
            page = client.get("/", headers={"Accept": "text/html"})
            assert "No token exists yet" in page.text
            assert "neardup token create --scope admin --name me" in page.text
            answer = client.get("/").json()
            assert answer["first_token"] == "neardup token create --scope admin --name me"
    finally:
        running.stop()
