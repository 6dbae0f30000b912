"""The service's top-k and containment answers: the query body's top_k, min_containment and
direction, check's query parameters, and the refusals, on a real server."""

from __future__ import annotations

import pytest

from tests.service.conftest import Service

TEXT = (
    "storms cut power to forty thousand homes on monday as crews worked through the night to "
    "restore lines brought down by falling trees across the northern counties"
)
DOCS = [
    {"id": "story", "text": TEXT},
    {
        "id": "longer",
        "text": TEXT + " officials said most customers would have power back by wednesday evening",
    },
    {"id": "other", "text": "an entirely different sentence about tea and biscuits in the afternoon sun"},
]


@pytest.fixture
def named(service: Service) -> str:
    with service.client(service.tokens["admin"]) as admin:
        r = admin.post("/v1/collections", json={"name": "near", "neighbours": True, "exist_ok": True})
        assert r.status_code == 201, r.text
        assert admin.post("/v1/collections/near/documents", json=DOCS).status_code < 300
        r = admin.post("/v1/collections", json={"name": "plainq", "exist_ok": True})
        assert r.status_code == 201, r.text
    return "near"


def test_top_k_and_containment_over_http(service: Service, named: str) -> None:
    reader = service.client(service.tokens["read"])
    for _ in range(2):  # the route first, then the fast path: the same answers
        r = reader.post(f"/v1/collections/{named}/query", json={"text": TEXT, "top_k": 2})
        assert r.status_code == 200, r.text
        assert [m["id"] for m in r.json()["matches"]] == ["story", "longer"]
        assert r.json()["matches"][0]["jaccard"] == 1.0
    r = reader.post(f"/v1/collections/{named}/query", json={"text": TEXT[20:120], "min_containment": 0.9})
    assert r.status_code == 200, r.text
    found = {m["id"]: m for m in r.json()["matches"]}
    assert set(found) == {"story", "longer"}
    assert found["story"]["containment"] == 1.0
    assert 0 < found["story"]["jaccard"] < 1
    within = {"text": DOCS[1]["text"], "min_containment": 0.9, "direction": "within"}
    r = reader.post(f"/v1/collections/{named}/query", json=within)
    assert {m["id"] for m in r.json()["matches"]} == {"story", "longer"}
    r = reader.post(
        f"/v1/collections/{named}/check", params={"min_containment": 0.9}, json=[{"id": "q", "text": TEXT}]
    )
    assert r.status_code == 200, r.text
    assert {m["id"] for m in r.json()["results"][0]["matches"]} == {"story", "longer"}


def test_bad_neighbour_options_are_4xx_naming_the_field(service: Service, named: str) -> None:
    reader = service.client(service.tokens["read"])
    for body, field in (
        ({"top_k": 0}, "top_k"),
        ({"min_containment": 0}, "min_containment"),
        ({"min_containment": 1.5}, "min_containment"),
        ({"min_containment": 0.5, "direction": "in"}, "direction"),
        # JSON's own types, as the library and the command line take them: true is no count.
        ({"top_k": True}, "top_k"),
        ({"top_k": "5"}, "top_k"),
        ({"limit": True}, "limit"),
        ({"min_jaccard": "0.5"}, "min_jaccard"),
        ({"min_containment": True}, "min_containment"),
    ):
        r = reader.post(f"/v1/collections/{named}/query", json={"text": TEXT, **body})
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["location"] == ["body", field]
    # within needs the share it is within by, as the command line's --within needs --min-containment.
    r = reader.post(f"/v1/collections/{named}/query", json={"text": TEXT, "direction": "within"})
    assert r.status_code == 422, r.text
    assert "direction 'within' goes with min_containment" in r.json()["detail"]
    r = reader.post(
        f"/v1/collections/{named}/check", params={"direction": "within"}, json=[{"id": "q", "text": TEXT}]
    )
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["location"] == ["query", "direction"]
    r = reader.post("/v1/collections/plainq/query", json={"text": TEXT, "top_k": 3})
    assert 400 <= r.status_code < 500
    assert "--neighbours" in r.text
