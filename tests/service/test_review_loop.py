"""The review loop over plain HTTP: the queue walked with next and previous against a brute force
from the JSON API, labelling from the queue, the pairs list's filters, the cluster page's order,
the pair page's containment, HTML error pages for browsers (problem JSON for API clients), and
/docs served from this server only."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import httpx
import pytest

from tests.service.conftest import Service
from tests.service.review_data import documents

THRESHOLD = 0.3
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def _setup(service: Service, name: str) -> None:
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        assert admin.post("/v1/collections", json={"name": name, "threshold": THRESHOLD}).status_code == 201
        assert admin.post(f"/v1/collections/{name}/documents", json=documents()).status_code == 200


def _pairs(client: httpx.Client, name: str) -> list[tuple[str, str, float]]:
    """Every pair of documents from the JSON API (the brute force's input)."""
    body = client.get(f"/v1/collections/{name}/pairs", params={"min_jaccard": 0.0, "limit": 10_000}).json()
    return [(p["id_a"], p["id_b"], p["jaccard"]) for p in body["pairs"]]


def _shown(html: str) -> tuple[str, str]:
    """The pair a queue page shows (the label form's hidden ids)."""
    a = re.search(r'name="a" value="([^"]*)"', html)
    b = re.search(r'name="b" value="([^"]*)"', html)
    assert a, html[:2000]
    assert b
    return unescape(a.group(1)), unescape(b.group(1))


def _link(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}" href="([^"]*)"', html)
    assert found, f"no #{element_id}"
    return unescape(found.group(1))


def test_the_queue_walks_the_unlabelled_pairs_nearest_the_threshold_first(service: Service) -> None:
    name = "review-queue"
    _setup(service, name)
    with service.client(service.tokens["write"]) as client:
        every = _pairs(client, name)
        assert len(every) >= 10
        labelled = every[0][:2]
        assert (
            client.post(
                f"/v1/collections/{name}/labels",
                json={"id_a": labelled[0], "id_b": labelled[1], "label": "duplicate"},
            ).status_code
            == 204
        )
        brute = [
            (a, b)
            for _, a, b in sorted((abs(s - THRESHOLD), a, b) for a, b, s in every if (a, b) != labelled)
        ]
        page = client.get(f"/review/{name}/queue")
        assert page.status_code == 200
        seen = [_shown(page.text)]
        assert f"<strong>{len(brute)}</strong> unlabelled pairs left" in page.text
        while 'id="next"' in page.text:
            page = client.get(_link(page.text, "next"))
            if 'id="queue-end"' in page.text:
                break
            seen.append(_shown(page.text))
        assert seen == brute
        # Previous from the second pair is the first.
        second = client.get(f"/review/{name}/queue")
        second = client.get(_link(second.text, "next"))
        assert _shown(second.text) == brute[1]
        assert 'id="queue-position">2<' in second.text
        assert _shown(client.get(_link(second.text, "previous")).text) == brute[0]
        # Labelling from the queue goes on to the next pair and says what was saved.
        form = client.get(f"/review/{name}/queue").text
        after = _link(form.replace('name="next" value=', 'id="after" href='), "after")
        saved = client.post(
            f"/review/{name}/label",
            data={"a": brute[0][0], "b": brute[0][1], "label": "not_duplicate", "next": after},
            follow_redirects=True,
        )
        assert _shown(saved.text) == brute[1]
        assert "not duplicate" in saved.text
        assert f"<strong>{len(brute) - 1}</strong> unlabelled pairs left" in saved.text
        # A next link that leaves the review pages is refused: back to the review home instead.
        away = client.post(
            f"/review/{name}/label",
            data={
                "a": brute[1][0],
                "b": brute[1][1],
                "label": "duplicate",
                "next": "https://elsewhere.example/",
            },
            follow_redirects=False,
        )
        assert away.headers["location"] == "/review/"


def test_the_queue_says_when_nothing_is_left(service: Service) -> None:
    name = "review-queue-done"
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        admin.post("/v1/collections", json={"name": name, "threshold": 0.5})
        admin.post(f"/v1/collections/{name}/documents", json=documents()[8:10])
        (pair,) = _pairs(admin, name)
        page = admin.get(f"/review/{name}/queue")
        assert _shown(page.text) == pair[:2]
        admin.post(
            f"/v1/collections/{name}/labels", json={"id_a": pair[0], "id_b": pair[1], "label": "duplicate"}
        )
        assert 'id="queue-empty"' in admin.get(f"/review/{name}/queue").text
        home = admin.get("/review/").text
        row = re.search(rf'<a href="/review/{name}">{name}</a></td>(.*?)</tr>', home, re.DOTALL)
        assert row
        numbers = [int(n.replace(",", "")) for n in re.findall(r'class="num[^"]*">([\d,]+)<', row.group(1))]
        assert numbers == [2, 1, 1, 1, 0]  # documents, clusters, pairs, labelled, left


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        ({"labels": "unlabelled"}, lambda s, lab: lab is None),
        ({"labels": "labelled"}, lambda s, lab: lab is not None),
        ({"low": 0.5, "high": 0.8}, lambda s, lab: 0.5 <= s <= 0.8),
        ({"labels": "duplicate", "low": 0.0}, lambda s, lab: lab == "duplicate"),
    ],
)
def test_the_pairs_list_filters_and_sorts(service: Service, params: dict[str, Any], keep: Any) -> None:
    name = "review-pairs"
    _setup(service, name)
    with service.client(service.tokens["write"]) as client:
        every = _pairs(client, name)
        labelled = {every[0][:2]: "duplicate", every[-1][:2]: "not_duplicate"}
        for (a, b), label in labelled.items():
            client.post(f"/v1/collections/{name}/labels", json={"id_a": a, "id_b": b, "label": label})
        for order, reverse in (("desc", True), ("asc", False)):
            expected = sorted(
                ((s, a, b) for a, b, s in every if keep(s, labelled.get((a, b)))),
                reverse=reverse,
            )
            html = client.get(f"/review/{name}/pairs", params={**params, "order": order}).text
            shown = re.findall(
                r'class="num similarity">([\d.]+)</td>\s*<td><a class="id" href="[^"]*">([^<]*)</a>', html
            )
            assert [(float(s), unescape(a)) for s, a in shown] == [(round(s, 4), a) for s, a, _ in expected]
        # Every id is a link, each with a title or the start of its text.
        assert 'class="title">Storms cut power in the valley<' in client.get(f"/review/{name}/pairs").text


def test_pairs_list_pages_by_key(service: Service) -> None:
    name = "review-pairs-paged"
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        admin.post("/v1/collections", json={"name": name, "threshold": 0.1})
        many = [
            {"id": f"d{i:03}", "text": "common words of a story " * 5 + f"variant {i} " * (i % 7)}
            for i in range(12)
        ]
        admin.post(f"/v1/collections/{name}/documents", json=many)
        total = len(_pairs(admin, name))
        assert total > 50  # more than one page
        seen: list[str] = []
        html = admin.get(f"/review/{name}/pairs", params={"order": "asc"}).text
        while True:
            seen += re.findall(r'class="pair-link" href="([^"]*)"', html)
            if 'id="next"' not in html:
                break
            html = admin.get(_link(html, "next")).text
        assert len(seen) == len(set(seen)) == total


def test_cluster_page_lists_members_first_with_labels(service: Service) -> None:
    name = "review-cluster"
    _setup(service, name)
    with service.client(service.tokens["write"]) as client:
        client.post(
            f"/v1/collections/{name}/labels",
            json={"id_a": "storm/ap", "id_b": "storm/moved", "label": "duplicate"},
        )
        home = client.get(f"/review/{name}").text
        link = re.search(rf'class="cluster-link id" href="(/review/{name}/cluster/\d+)">storm/ap<', home)
        assert link
        page = client.get(link.group(1)).text
        assert page.index('id="members"') < page.index('id="pairs"')
        row = re.search(
            r'storm/ap</a></td><td class="id"><a[^>]*>storm/moved</a></td>.*?class="label">(.*?)</td>',
            page,
            re.DOTALL,
        )
        assert row
        assert "duplicate" in row.group(1)
        assert page.count("unlabelled") >= 1
        assert "Storms cut power in the valley" in page  # the member's title


def test_pair_page_says_which_text_contains_which(service: Service) -> None:
    name = "review-containment"
    _setup(service, name)
    with service.client(service.tokens["read"]) as client:
        page = client.get(f"/review/{name}/pair", params={"a": "storm/shorter", "b": "storm/ap"}).text
        found = re.search(
            r"storm/ap</span> contains <strong>([\d.]+)%</strong> of <span class=\"id\">storm/shorter", page
        )
        assert found
        assert float(found.group(1)) == 100.0
        back = re.search(r"storm/shorter</span> contains <strong>([\d.]+)%</strong>", page)
        assert back
        assert float(back.group(1)) < 70
        assert "storm/shorter</span> is nearly all inside" in page
        # The alignment: two shared paragraphs, two only in storm/ap, and no paragraph marked changed.
        assert page.count('<tr class="same"') == 2
        assert page.count('<tr class="inserted"') == 2
        assert '<tr class="changed"' not in page


def test_errors_are_pages_for_browsers_and_problem_json_for_clients(service: Service) -> None:
    name = "review-errors"
    _setup(service, name)
    with service.client(service.tokens["read"]) as client:
        for path, status in (
            (f"/review/{name}/cluster/987654321", 404),
            ("/review/no-such-collection/queue", 404),
            (f"/review/{name}/pairs?low=2", 422),
            (f"/review/{name}/pair?a=storm/ap&b=missing", 404),
            ("/no/such/route", 404),
        ):
            api = client.get(path)
            assert api.status_code == status
            assert api.headers["content-type"] == "application/problem+json"
            assert api.json()["status"] == status
            page = client.get(path, headers=BROWSER)
            assert page.status_code == status
            assert page.headers["content-type"].startswith("text/html")
            assert "default-src 'none'" in page.headers["content-security-policy"]
            assert 'id="error-detail"' in page.text
            assert api.json()["detail"][:40].replace("'", "&#39;") in page.text
            # An explicit preference for JSON wins over HTML.
            both = client.get(path, headers={"Accept": "text/html;q=0.5, application/json"})
            assert both.headers["content-type"] == "application/problem+json"
    # No token: the API says 401 in JSON; a browser is sent to the login form.
    with service.client() as anonymous:
        assert anonymous.get(f"/v1/collections/{name}").headers["content-type"] == "application/problem+json"
        assert anonymous.get(f"/review/{name}", headers=BROWSER, follow_redirects=False).status_code == 303


def test_docs_are_served_from_this_server_only(service: Service) -> None:
    with service.client() as client:
        page = client.get("/docs")
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert page.headers["x-frame-options"] == "DENY"
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources
        assert all(s.startswith("/") for s in sources), sources  # nothing from elsewhere
        for s in sources:
            if s.startswith("/docs/assets/"):
                asset = client.get(s)
                assert asset.status_code == 200, s
                assert len(asset.content) > 100
        assert client.get("/docs/assets/../../etc/passwd").status_code == 404
        assert client.get("/docs/assets/redoc.standalone.js").status_code == 404  # not on the list
        assert client.get("/openapi.json").json()["info"]["title"] == "neardup"
        review = client.get("/review/login").text
        assert 'href="/docs"' in review
