"""A dense cluster over HTTP: the clusters listing's dense flag, a cluster's complete pairs
streamed (and a 404 for a cluster that is not there), and the review page saying what its pairs
are, on a real server process."""

from __future__ import annotations

import json

from tests.service.conftest import Service
from tests.service.test_review import _csrf
from tests.test_dense import clique


def test_the_http_api_flags_dense_clusters_and_streams_their_pairs(service: Service) -> None:
    name = "dense-http"
    docs = clique("a", 12, 1) + clique("b", 3, 2)
    with service.client(service.tokens["admin"]) as client:
        created = client.post(
            "/v1/collections",
            json={"name": name, "threshold": 0.8, "bands": 64, "rows": 2, "dense_cluster_size": 5},
        )
        assert created.status_code == 201, created.text
        added = client.post(f"/v1/collections/{name}/documents", json=[{"id": i, "text": t} for i, t in docs])
        assert added.status_code == 200, added.text
        clusters = client.get(f"/v1/collections/{name}/clusters").json()["clusters"]
        assert {c["representative"][0]: c["dense"] for c in clusters} == {"a": True, "b": False}
        dense = next(c["cluster"] for c in clusters if c["dense"])
        answer = client.get(f"/v1/collections/{name}/clusters/{dense}/pairs")
        assert answer.status_code == 200
        pairs = [json.loads(line) for line in answer.text.splitlines()]
        assert len(pairs) == 66
        assert all(p["jaccard"] >= 0.8 for p in pairs)
        assert len({(p["id_a"], p["id_b"]) for p in pairs}) == 66
        assert client.get(f"/v1/collections/{name}/clusters/999999/pairs").status_code == 404
        # Past a cluster id's range (a 64-bit integer) the request is refused, not a server error.
        assert client.get(f"/v1/collections/{name}/clusters/{2**63}/pairs").status_code == 422
    with service.client() as browser:
        form = browser.get("/review/login", params={"next": f"/review/{name}"})
        browser.post(
            "/review/login",
            data={"token": service.tokens["read"], "csrf": _csrf(form.text), "next": f"/review/{name}"},
        )
        page = browser.get(f"/review/{name}/cluster/{dense}")
        assert page.status_code == 200
        assert "A dense cluster" in page.text
        assert f"clusters/{dense}/pairs" in page.text
        other = next(c["cluster"] for c in clusters if not c["dense"])
        assert "A dense cluster" not in browser.get(f"/review/{name}/cluster/{other}").text
