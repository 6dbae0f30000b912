"""The review pages in a real browser (headless Chromium from Debian's ``chromium`` package).

Log in with a token; work the review queue with the keyboard (j / k to move, d / n to label);
filter and sort the pairs list; open a cluster (members first) and a pair (passages aligned,
containment); see an HTML error page; open the API documentation (/docs), served from this server
only. Each page is photographed; with ``NEARDUP_SCREENSHOTS=docs/review`` the pictures are kept
there (the README shows them), so ``NEARDUP_SCREENSHOTS=docs/review pytest tests/service/test_browser.py``
redoes them; otherwise they go to the test's temporary folder and the working tree stays clean.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import psycopg
import pytest

from tests.conftest import psycopg_url
from tests.service.conftest import Service, make_token
from tests.service.review_data import documents

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
NAME = "browser"
THRESHOLD = 0.3

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium: apt-get install -y chromium "
        "(.ci/run installs it)",
    ),
    pytest.mark.distributed_variant,
]


def _shots() -> Path:
    """Where the screenshots go: $NEARDUP_SCREENSHOTS (relative to the checkout), else a temporary folder."""
    chosen = os.environ.get("NEARDUP_SCREENSHOTS")
    return ROOT / chosen if chosen else Path(tempfile.gettempdir()) / "neardup-review-shots"


def _shoot(page: Any, name: str) -> None:
    """A full-page screenshot NAME.png (see _shots), checked to hold a picture."""
    shots = _shots()
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    assert (shots / f"{name}.png").stat().st_size > 10_000


def _labels(database_url: str, schema: str) -> list[tuple[str, str, str, str]]:
    with closing(psycopg.connect(psycopg_url(database_url))) as conn:
        rows = conn.execute(
            f'SELECT id_a, id_b, label, labelled_by FROM "{schema}".pair_labels WHERE collection = %s '
            "ORDER BY id_a, id_b",
            (NAME,),
        ).fetchall()
    return [tuple(r) for r in rows]


@dataclass
class Browsing:
    """A logged-in page, its console messages and the hosts it sent requests to."""

    page: Any
    console: list[str]
    hosts: set[str]


@pytest.fixture
def browsing(service: Service, database_url: str, schema: str) -> Iterator[Browsing]:
    """A logged-in browser page (a write token limited to the collection), with the collection
    made afresh."""
    from playwright.sync_api import sync_playwright

    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{NAME}")
        assert admin.post("/v1/collections", json={"name": NAME, "threshold": THRESHOLD}).status_code == 201
        assert admin.post(f"/v1/collections/{NAME}/documents", json=documents()).status_code == 200
    token = make_token(database_url, schema, "write", NAME, "reviewer")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            console: list[str] = []
            hosts: set[str] = set()
            page.on("console", lambda message: console.append(message.text))
            page.on("request", lambda request: hosts.add(urlparse(request.url).netloc))
            page.goto(f"{service.base}/review/{NAME}")
            assert "/review/login" in page.url  # no session yet: the login form
            page.fill("#token", token)
            page.click("#login")
            page.wait_for_url(f"**/review/{NAME}")
            cookies = {c["name"]: c for c in page.context.cookies()}
            assert cookies["nd_session"]["httpOnly"]
            assert cookies["nd_session"]["sameSite"] == "Strict"
            assert token not in cookies["nd_session"]["value"]
            yield Browsing(page, console, hosts)
        finally:
            browser.close()


def _position(page: Any) -> int:
    return int(page.inner_text("#queue-position"))


def _shown(page: Any) -> tuple[str, str]:
    a = page.locator("#label-form input[name=a]").get_attribute("value")
    b = page.locator("#label-form input[name=b]").get_attribute("value")
    return a or "", b or ""


def test_the_queue_with_the_keyboard(
    browsing: Browsing, service: Service, database_url: str, schema: str
) -> None:
    from playwright.sync_api import expect

    page = browsing.page
    with service.client(service.tokens["read"]) as reader:
        every = reader.get(f"/v1/collections/{NAME}/pairs", params={"min_jaccard": 0}).json()["pairs"]
    queue = sorted((abs(p["jaccard"] - THRESHOLD), p["id_a"], p["id_b"]) for p in every)
    page.click("#nav-queue")
    page.wait_for_selector("#label-form")
    assert _shown(page) == queue[0][1:]
    assert _position(page) == 1
    left = len(queue)
    assert f"{left} unlabelled pairs left" in page.inner_text("#queue-count")
    _shoot(page, "queue")
    page.keyboard.press("j")  # next
    expect(page.locator("#queue-position")).to_have_text("2")
    assert _shown(page) == queue[1][1:]
    page.keyboard.press("j")
    expect(page.locator("#queue-position")).to_have_text("3")
    page.keyboard.press("k")  # previous
    expect(page.locator("#queue-position")).to_have_text("2")
    assert _shown(page) == queue[1][1:]
    # Typing a note does not trigger the keys: "d" and "n" go into the note.
    page.fill("textarea[name=note]", "")
    page.click("textarea[name=note]")
    page.keyboard.type("dn")
    assert page.input_value("textarea[name=note]") == "dn"
    assert _labels(database_url, schema) == []
    page.locator("body").click(position={"x": 5, "y": 5})  # leave the note
    page.keyboard.press("d")  # duplicate: saved, and on to the next unlabelled pair
    page.wait_for_selector("#saved")
    assert "duplicate" in page.inner_text("#saved")
    assert _shown(page) == queue[2][1:]
    assert f"{left - 1} unlabelled pairs left" in page.inner_text("#queue-count")
    assert _position(page) == 2  # the labelled pair left the queue: this one moved up
    page.keyboard.press("n")  # not duplicate
    # expect() polls without evaluating a string in the page, which the page's CSP forbids
    # (wait_for_function's string predicate failed with an EvalError whenever it had to poll).
    expect(page.locator("#queue-count")).to_contain_text(f"{left - 2} unlabelled")
    labelled = _labels(database_url, schema)
    assert [(a, b, label) for a, b, label, _ in labelled] == sorted(
        [(*queue[1][1:], "duplicate"), (*queue[2][1:], "not_duplicate")]
    )
    assert {by for *_, by in labelled} == {"reviewer"}
    notes = [n for n in browsing.console if "Content Security Policy" in n]
    assert not notes, notes


def test_pairs_list_filters_cluster_and_pair_pages(browsing: Browsing, service: Service) -> None:
    page = browsing.page
    with service.client(service.tokens["write"]) as writer:
        writer.post(
            f"/v1/collections/{NAME}/labels",
            json={"id_a": "storm/ap", "id_b": "storm/moved", "label": "duplicate"},
        )
    # The home page's counts.
    page.click("text=neardup review")
    page.wait_for_selector("#collections")
    row = page.locator("#collections tr", has_text=NAME)
    cells = row.locator("td.num").all_inner_texts()
    assert cells[0] == str(len(documents()))
    assert cells[3] == "1"  # labelled
    _shoot(page, "home")
    # The pairs list: filter unlabelled pairs in a similarity range, then sort the other way.
    page.click(f"#collections a[href='/review/{NAME}']")
    page.click("#nav-pairs")
    page.wait_for_selector("#pair-list")
    page.select_option("#filter-labels", "unlabelled")
    page.fill("#filter-low", "0.5")
    page.fill("#filter-high", "0.95")
    page.click("#apply")
    page.wait_for_url("**labels=unlabelled**")
    query = parse_qs(urlparse(page.url).query)
    assert (query["labels"], query["low"], query["high"]) == (["unlabelled"], ["0.5"], ["0.95"])
    values = [float(v) for v in page.locator("td.similarity").all_inner_texts()]
    assert values
    assert all(0.5 <= v <= 0.95 for v in values)
    assert values == sorted(values, reverse=True)
    assert set(page.locator("td.label").all_inner_texts()) == {"unlabelled"}
    rows = page.locator("#pair-list tr").all_inner_texts()
    assert not [r for r in rows if "storm/ap" in r and "storm/moved" in r]  # labelled: filtered out
    _shoot(page, "pairs")
    page.click("#sort-similarity")
    page.wait_for_url("**order=asc**")
    ascending = [float(v) for v in page.locator("td.similarity").all_inner_texts()]
    assert ascending == sorted(values)
    # A cluster: members first, with titles; then its pairs with their labels.
    page.click(f"a[href='/review/{NAME}']")
    page.locator("#clusters a.cluster-link", has_text="storm/ap").click()
    page.wait_for_selector("#members")
    assert page.locator("#members").bounding_box()["y"] < page.locator("#pairs").bounding_box()["y"]
    assert "Storms cut power in the valley" in page.inner_text("#members")
    assert "duplicate" in page.locator("#pairs tr", has_text="storm/moved").first.inner_text()
    _shoot(page, "cluster")
    # A pair: passages aligned, the moved paragraph shown as moved, differences marked.
    page.goto(f"{service.base}/review/{NAME}/pair?a=storm/figures&b=storm/moved")
    page.wait_for_selector("#aligned")
    assert page.locator("#aligned tr.moved").count() == 2
    assert page.locator("#aligned del").count() >= 1
    assert page.locator("#aligned ins").count() >= 1
    shared = page.locator("#aligned tr.same td.a").first
    assert shared.evaluate("c => getComputedStyle(c).backgroundColor") == "rgba(0, 0, 0, 0)"
    assert page.locator("#aligned del").first.evaluate("m => getComputedStyle(m).backgroundColor") == (
        "rgb(252, 165, 165)"
    )
    assert "contains" in page.inner_text("#containment")
    _shoot(page, "pair")
    page.goto(f"{service.base}/review/{NAME}/pair?a=storm/shorter&b=storm/ap")
    assert "storm/shorter is nearly all inside storm/ap" in page.inner_text("#containment-verdict")
    # The label form on a pair's page, by button.
    page.click("#label-not-duplicate")
    page.wait_for_selector("#saved")
    assert "not duplicate" in page.inner_text("#current-label")
    notes = [n for n in browsing.console if "Content Security Policy" in n]
    assert not notes, notes


def test_error_pages_and_the_api_documentation(browsing: Browsing, service: Service) -> None:
    page = browsing.page
    response = page.goto(f"{service.base}/review/{NAME}/cluster/987654321")
    assert response.status == 404
    assert "Not Found" in page.inner_text("#error-title")
    assert "no cluster 987654321" in page.inner_text("#error-detail")
    _shoot(page, "error")
    response = page.goto(f"{service.base}/review/{NAME}/pairs?low=7")
    assert response.status == 422
    assert "low" in page.inner_text("#error-list")
    # /docs: Swagger UI from this server's own files, the API's operations listed.
    page.goto(f"{service.base}/review/{NAME}")
    page.click("#nav-docs")
    page.wait_for_selector(".opblock", timeout=30_000)
    summaries = " ".join(page.locator(".opblock-summary-path").all_inner_texts())
    assert "/v1/collections/{name}/pairs" in summaries.replace("\u200b", "")
    assert page.locator("#docs-nav a[href='/review/']").count() == 1
    _shoot(page, "docs")
    assert browsing.hosts == {urlparse(service.base).netloc}  # nothing fetched from elsewhere
    notes = [n for n in browsing.console if "Content Security Policy" in n or "Refused" in n]
    assert not notes, notes


def test_chromium_is_where_the_browser_test_looks() -> None:
    """Say plainly when the browser test cannot run here (it is skipped, not passed)."""
    assert shutil.which("chromium") is not None


def _log_in(page: Any, service: Service, token: str, where: str) -> None:
    page.goto(f"{service.base}{where}")
    page.fill("#token", token)
    page.click("#login")
    page.wait_for_url(f"**{where}")


def test_a_newcomers_pages(service: Service, database_url: str, schema: str) -> None:
    """The landing page, the cluster page's representative and members, identical texts, a
    read-only session's queue, an error page's Log out button, the pasted-text search of a
    collection with neighbours, the API's areas in /docs, and no request answered 404."""
    from playwright.sync_api import sync_playwright

    near = f"{NAME}-near"
    with service.client(service.tokens["admin"]) as admin:
        for name, body in ((NAME, {"threshold": THRESHOLD}), (near, {"threshold": 0.9, "neighbours": True})):
            admin.delete(f"/v1/collections/{name}")
            assert admin.post("/v1/collections", json={"name": name, **body}).status_code == 201
            assert admin.post(f"/v1/collections/{name}/documents", json=documents()).status_code == 200
        cluster = next(
            c
            for c in admin.get(f"/v1/collections/{NAME}/clusters").json()["clusters"]
            if "storm/ap" in c["ids"]
        )
    reader = make_token(database_url, schema, "read", None, "read-only reviewer")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            missing: list[str] = []
            console: list[str] = []
            page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
            page.on("console", lambda message: console.append(message.text))
            # The front door: where the review pages and the API documentation are.
            page.goto(f"{service.base}/")
            assert page.locator("#to-review").get_attribute("href") == "/review/"
            assert page.locator("#to-docs").get_attribute("href") == "/docs"
            assert "neardup token create" in page.inner_text("#tokens")
            _shoot(page, "landing")
            page.click("#to-review")
            page.wait_for_url("**/review/login**")
            _log_in(page, service, reader, f"/review/{NAME}/cluster/{cluster['cluster']}")
            # The cluster: its representative marked, each member with its own line.
            representative = page.locator("#members tr.representative")
            assert representative.count() == 1
            assert cluster["representative"] in representative.inner_text()
            assert page.locator("#representative").inner_text().lower() == "representative"
            partings = page.locator("#members td.parting").all_inner_texts()
            others = [t for t in partings if t != "kept"]
            assert len(others) == len(cluster["ids"]) - 1
            assert len(set(others)) == len(others)  # each member its own
            assert any(t.startswith("parts from it at") for t in others)
            # Identical texts are called identical.
            page.goto(f"{service.base}/review/{NAME}/pair?a=council/1&b=council/copy")
            assert page.inner_text("#containment-verdict") == "The two texts are identical."
            # A read-only session: no label form, and no d / n among the keys.
            page.goto(f"{service.base}/review/{NAME}/queue")
            assert page.locator("#label-form").count() == 0
            keys = page.inner_text("#keys")
            assert "duplicate" not in keys
            assert "j next" in keys
            # An error page keeps the session's Log out button.
            response = page.goto(f"{service.base}/review/{NAME}/cluster/987654321")
            assert response is not None
            assert response.status == 404
            assert page.locator("header form button", has_text="Log out").count() == 1
            # The pasted-text search of a collection that keeps neighbours: the nearest, below
            # its threshold (0.9) too.
            page.goto(f"{service.base}/review/{near}")
            page.fill("#search-text", documents()[0]["text"].split("\n\n")[0])
            page.click("text=Find matches")
            page.wait_for_selector("#matches")
            assert "nearest stored documents" in page.inner_text("#matches-how")
            assert "storm/ap" in page.inner_text("#matches")
            # /docs: the operations grouped by area, none under "default".
            page.goto(f"{service.base}/docs")
            page.wait_for_selector(".opblock-tag", timeout=30_000)
            areas = [t.strip() for t in page.locator(".opblock-tag").all_inner_texts()]
            assert [a.split("\n")[0] for a in areas][:3] == ["collections", "documents", "queries"]
            assert not [a for a in areas if a.startswith("default")]
            assert missing == [f"{service.base}/review/{NAME}/cluster/987654321"]  # no favicon missing
            assert not [n for n in console if "Content Security Policy" in n or "Refused" in n]
        finally:
            browser.close()
