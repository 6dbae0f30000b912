"""Creating a collection over HTTP takes every parameter of ``neardup init``, checked as the library
checks it: the same stored parameters as ``Index.create``, and a bad value is a 422 naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from neardup.index import Index
from tests.service.conftest import Service

pytestmark = pytest.mark.distributed_variant

# Every creation parameter away from its default (bands x rows fit num_perm = 64).
NON_DEFAULT: dict[str, Any] = {
    "threshold": 0.6,
    "num_perm": 64,
    "bands": 16,
    "rows": 4,
    "scheme": "classic",
    "seed": 7,
    "shingle": "word",
    "k": 3,
    "unicode_form": "NFC",
    "case": "lower",
    "collapse_whitespace": False,
    "store_text": False,
    "keep": "meta:published:desc",
}


def _stored(url: str, schema: str, name: str) -> tuple[float, bool, dict[str, Any], str]:
    with Index.open(url, name, schema=schema) as index:
        return index.threshold, index.store_text, index.params.to_dict(), index.keep


@pytest.mark.parametrize("field", [*NON_DEFAULT, "all"])
def test_http_create_stores_what_index_create_stores(
    service: Service, database_url: str, schema: str, deployment: str, field: str
) -> None:
    """Each parameter alone away from its default, then all at once (bands and rows go together)."""
    if field == "all":
        params = dict(NON_DEFAULT)
    elif field in ("bands", "rows"):
        params = {"num_perm": 64, "bands": 16, "rows": 4}
    else:
        params = {field: NON_DEFAULT[field]}
    # A collection follows its schema unless told: say so explicitly, as a non-default value.
    params["distributed"] = deployment == "citus"
    name = f"create-{field.replace('_', '-')}"
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        r = admin.post("/v1/collections", json={"name": name, **params})
        assert r.status_code == 201, r.text
        answered = r.json()
        admin.delete(f"/v1/collections/{name}-lib")
    with Index.create(database_url, f"{name}-lib", schema=schema, **params) as index:
        expected = (index.threshold, index.store_text, index.params.to_dict(), index.keep)
    assert _stored(database_url, schema, name) == expected
    assert (answered["threshold"], answered["store_text"], answered["params"], answered["keep"]) == expected
    with service.client(service.tokens["admin"]) as admin:
        assert admin.delete(f"/v1/collections/{name}").status_code == 204
        assert admin.delete(f"/v1/collections/{name}-lib").status_code == 204


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("threshold", 1.5),
        ("threshold", 0),
        ("num_perm", 0),
        ("bands", 0),
        ("rows", "many"),
        ("scheme", "sha"),
        ("seed", -1),
        ("shingle", "sentence"),
        ("k", 0),
        ("unicode_form", "NFD"),
        ("case", "upper"),
        ("collapse_whitespace", "sometimes"),
        ("store_text", "perhaps"),
        ("keep", "newest"),
        ("distributed", "yes please"),
        ("shards", 0),
        ("name", "bad name!"),
        ("colour", "blue"),
        # Found by the schemathesis test: past timedelta's range it was a 500.
        ("changes_retention_hours", 24_000_000_000),
        ("changes_retention_hours", 0),
    ],
)
def test_a_bad_creation_parameter_is_a_422_naming_it(service: Service, field: str, value: Any) -> None:
    with service.client(service.tokens["admin"]) as admin:
        body = {"name": "never-made", field: value}
        r = admin.post("/v1/collections", json=body)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == "application/problem+json"
        problem = r.json()
        assert ["body", field] in [e["location"] for e in problem["errors"]], problem
        assert field in problem["detail"]
        assert admin.get("/v1/collections/never-made").status_code == 404


def test_a_combination_the_library_refuses_is_a_422_saying_why(service: Service) -> None:
    with service.client(service.tokens["admin"]) as admin:
        for body, words in (
            ({"bands": 16}, "bands and rows"),
            ({"num_perm": 64, "bands": 32, "rows": 4}, "num_perm"),
            ({"shards": 4, "distributed": False}, "shards"),
        ):
            r = admin.post("/v1/collections", json={"name": "never-made", **body})
            assert r.status_code == 422, r.text
            assert words in r.json()["detail"], r.text
        assert admin.get("/v1/collections/never-made").status_code == 404


def test_the_request_model_is_made_of_the_creation_parameters() -> None:
    """Each parameter of config.CREATE_PARAMETERS is a field with its default, choices and bounds."""
    from neardup.config import CREATE_PARAMETERS
    from neardup.service.models import NewCollection

    fields = NewCollection.model_json_schema()["properties"]
    assert set(fields) == {"name", "exist_ok", *(p.name for p in CREATE_PARAMETERS)}
    for p in CREATE_PARAMETERS:
        field = fields[p.name]
        assert field["default"] == p.default, p.name
        assert field["description"].startswith(p.help), p.name
        (typed,) = [t for t in field.get("anyOf", [field]) if t.get("type") != "null"]
        assert typed.get("enum", list(p.choices)) == list(p.choices), p.name
        if p.low is not None:
            assert typed["exclusiveMinimum" if p.low_open else "minimum"] == p.low, p.name
        assert typed.get("exclusiveMaximum" if p.high_open else "maximum") == p.high, p.name
        assert ("anyOf" in field) == p.nullable, p.name


def test_a_layout_the_database_cannot_give_is_a_409(service: Service, deployment: str) -> None:
    """Distributed on a server without Citus, or plain in a distributed schema: the request is
    well formed, the database's state refuses it."""
    with service.client(service.tokens["admin"]) as admin:
        r = admin.post("/v1/collections", json={"name": "never-made", "distributed": deployment != "citus"})
        assert r.status_code == 409, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert "Citus" in r.json()["detail"]
        assert admin.get("/v1/collections/never-made").status_code == 404
