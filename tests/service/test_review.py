"""The review pages over plain HTTP: login, CSRF, search by id and by text, escaping."""

from __future__ import annotations

import json
import re

import pytest

from tests.service.conftest import Service

pytestmark = pytest.mark.distributed_variant

TEXT = "Storms cut power to 40,000 homes across the northern valley on Tuesday night, officials said."


def _setup(service: Service, name: str) -> None:
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        assert admin.post("/v1/collections", json={"name": name, "threshold": 0.5}).status_code == 201
        docs = [
            {"id": "<b>x</b>", "text": TEXT, "meta": {"note": "<script>alert(1)</script>"}},
            {"id": "y&z", "text": TEXT.replace("40,000", "42,000")},
        ]
        assert admin.post(f"/v1/collections/{name}/documents", json=docs).status_code == 200


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]*)"', html)
    assert match, html[:500]
    return match.group(1)


def test_login_session_and_csrf(service: Service) -> None:
    name = "review-http"
    _setup(service, name)
    with service.client() as browser:
        r = browser.get(f"/review/{name}", follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"].startswith("/review/login")
        form = browser.get("/review/login", params={"next": f"/review/{name}"})
        bad = browser.post(
            "/review/login", data={"token": "nd_wrong", "csrf": _csrf(form.text), "next": "/review/"}
        )
        assert bad.status_code == 401
        assert "not valid" in bad.text
        forged = browser.post("/review/login", data={"token": service.tokens["write"], "csrf": "forged"})
        assert forged.status_code == 403
        form = browser.get("/review/login", params={"next": f"/review/{name}"})
        r = browser.post(
            "/review/login",
            data={"token": service.tokens["write"], "csrf": _csrf(form.text), "next": f"/review/{name}"},
            follow_redirects=False,
        )
        assert r.status_code == 303
        assert r.headers["location"] == f"/review/{name}"
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
        assert service.tokens["write"] not in cookie
        page = browser.get(f"/review/{name}")
        assert page.status_code == 200
        session_csrf = _csrf(page.text)
        # The cookie alone cannot label: the form needs the session's CSRF value.
        label = {"a": "<b>x</b>", "b": "y&z", "label": "duplicate", "note": "n"}
        assert browser.post(f"/review/{name}/label", data={**label, "csrf": "wrong"}).status_code == 403
        ok = browser.post(
            f"/review/{name}/label", data={**label, "csrf": session_csrf}, follow_redirects=False
        )
        assert ok.status_code == 303
        pair = browser.get(ok.headers["location"])
        assert "Label saved" in pair.text
        # Logging out ends the session.
        browser.post("/review/logout", data={"csrf": session_csrf})
        assert browser.get(f"/review/{name}", follow_redirects=False).status_code == 303


def test_search_by_id_and_text_escape_everything(service: Service) -> None:
    name = "review-search"
    _setup(service, name)
    with service.client(service.tokens["read"]) as reader:
        doc = reader.get(f"/review/{name}/document", params={"id": "<b>x</b>"})
        assert doc.status_code == 200
        assert "&lt;b&gt;x&lt;/b&gt;" in doc.text
        assert "<script>alert(1)</script>" not in doc.text
        assert "y&amp;z" in doc.text
        assert reader.get(f"/review/{name}/document", params={"id": "nope"}).status_code == 404
        found = reader.post(f"/review/{name}/search", data={"text": TEXT})
        assert found.status_code == 200
        assert found.text.index("&lt;b&gt;x&lt;/b&gt;") < found.text.index("y&amp;z")  # best first
        cluster = re.search(rf'href="/review/{name}/cluster/(\d+)"', reader.get(f"/review/{name}").text)
        assert cluster
        members = reader.get(f"/review/{name}/cluster/{cluster.group(1)}")
        assert "\\u003cscript\\u003e" in members.text  # tojson escapes < and >
        assert "<script>alert" not in members.text
        pair = reader.get(f"/review/{name}/pair", params={"a": "<b>x</b>", "b": "y&z"})
        assert '<tr class="changed"' in pair.text  # the one sentence, edited: 40,000 and 42,000
        assert "<del>40,000</del>" in pair.text
        assert "<ins>42,000</ins>" in pair.text
        assert "Labelling needs a write token" in pair.text
        # A read token cannot label, even with the header.
        label = {"a": "<b>x</b>", "b": "y&z", "label": "duplicate"}
        assert reader.post(f"/review/{name}/label", data=label).status_code == 403


def test_the_home_page_shows_what_the_labels_say(service: Service) -> None:
    name = "review-advice"
    _setup(service, name)
    with service.client(service.tokens["write"]) as writer:
        label = {"id_a": "<b>x</b>", "id_b": "y&z", "label": "duplicate"}
        assert writer.post(f"/v1/collections/{name}/labels", json=label).status_code == 204
    with service.client(service.tokens["read"]) as reader:
        home = reader.get("/review/")
        assert home.status_code == 200
        block = home.text[home.text.index('id="label-advice"') :]
        mine = block[block.index(f'data-collection="{name}"') :]
        # One label cannot show precision 0.95 with confidence: the page says so, and its bin.
        assert "no threshold reaches labelled precision 0.95" in mine.split("</div>")[0]
        assert "<td>1</td><td>1</td><td>1.000</td><td>[0.207, 1.000]</td>" in mine.split("</div>")[0]


def test_the_pages_count_what_the_api_and_the_listings_count_under_the_same_names(service: Service) -> None:
    """The home page's and a collection's page's documents, clusters and document pairs are the
    API's ``stats`` counts of those names, and the pairs and clusters the listings hold."""
    from tests.test_counts import TEXTS

    name = "review-counts"
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        assert admin.post("/v1/collections", json={"name": name, "threshold": 0.5}).status_code == 201
        docs = [{"id": i, "text": t} for i, t in TEXTS.items()]
        assert admin.post(f"/v1/collections/{name}/documents", json=docs).status_code == 200
    with service.client(service.tokens["read"]) as reader:
        stats = reader.get(f"/v1/collections/{name}").json()["stats"]
        ndjson = {"Accept": "application/x-ndjson"}
        pairs = reader.get(f"/v1/collections/{name}/pairs", headers=ndjson).text.splitlines()
        members = reader.get(f"/v1/collections/{name}/clusters", headers=ndjson).text.splitlines()
        home = reader.get("/review/").text
        page = reader.get(f"/review/{name}").text
    assert stats["document_pairs"] == len(pairs) == 16  # as tests/test_counts.py counts them
    assert stats["clusters"] == len({json.loads(m)["cluster"] for m in members}) == 2
    row = home[home.index(f'<a href="/review/{name}">') :].split("</tr>")[0]
    cells = [int(c.replace(",", "")) for c in re.findall(r'<td class="num[^"]*">([\d,]+)</td>', row)]
    assert cells[:3] == [stats["documents"], stats["clusters"], stats["document_pairs"]]
    counts = page[page.index('id="counts"') :].split("</p>")[0]
    assert f"{stats['documents']} documents" in counts
    assert f"{stats['clusters']} clusters" in counts
    assert f"{stats['document_pairs']} document pairs" in counts
