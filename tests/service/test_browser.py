"""The review pages in a real browser (headless Chromium from Debian's ``chromium`` package).

Log in with a token, open the largest cluster, open a pair, see the shared passages marked,
label it, and find the label in the ``pair_labels`` view. The pair page's screenshot is saved as
``docs/review-pair.png`` (the README shows it).
"""

from __future__ import annotations

import shutil
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from tests.conftest import psycopg_url
from tests.service.conftest import Service, make_token

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "review-pair.png"

STORY = (
    "Storms cut power to 40,000 homes across the northern valley on Tuesday night, the regional grid "
    "operator said. Crews expect to restore most connections by Thursday, but rural lines may take "
    "longer. Schools in three districts will stay closed while roads are cleared of fallen trees."
)
EDITED = (
    "Storms cut power to 42,000 homes across the northern valley on Tuesday night, the regional grid "
    "operator said on Wednesday. Crews expect to restore most connections by Thursday, but rural lines "
    "may take longer. Schools in three districts will stay closed while roads are cleared of fallen trees."
)
SHORTER = (
    "Storms cut power to 40,000 homes across the northern valley on Tuesday night, the regional grid "
    "operator said. Crews expect to restore most connections by Thursday, but rural lines may take "
    "longer. Schools in three districts will stay closed."
)
OTHER = "The city council approved the new budget after a long debate about library funding and parks."


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium: apt-get install -y chromium (.ci/run installs it)",
)
def test_log_in_open_the_largest_cluster_compare_and_label_a_pair(
    service: Service, database_url: str, schema: str
) -> None:
    from playwright.sync_api import sync_playwright

    name = "browser"
    with service.client(service.tokens["admin"]) as admin:
        admin.delete(f"/v1/collections/{name}")
        assert admin.post("/v1/collections", json={"name": name, "threshold": 0.5}).status_code == 201
        docs = [
            {"id": "wire/ap-101", "text": STORY, "meta": {"desk": "weather", "source": "AP"}},
            {"id": "wire/rt-207", "text": EDITED, "meta": {"desk": "weather", "source": "Reuters"}},
            {"id": "wire/local-9", "text": SHORTER, "meta": {"desk": "metro"}},
            {"id": "council-1", "text": OTHER},
            {"id": "council-2", "text": OTHER + " Voting ends at noon."},
        ]
        assert admin.post(f"/v1/collections/{name}/documents", json=docs).status_code == 200
    token = make_token(database_url, schema, "write", name, "reviewer")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            console: list[str] = []
            page.on("console", lambda message: console.append(message.text))
            page.goto(f"{service.base}/review/{name}")
            assert "/review/login" in page.url  # no session yet: the login form
            page.fill("#token", token)
            page.click("#login")
            page.wait_for_url(f"**/review/{name}")
            cookies = {c["name"]: c for c in page.context.cookies()}
            assert cookies["nd_session"]["httpOnly"]
            assert cookies["nd_session"]["sameSite"] == "Strict"
            assert token not in cookies["nd_session"]["value"]
            first = page.locator("#clusters a.cluster-link").first
            assert first.inner_text() == "wire/ap-101"  # the largest cluster (3) comes first
            first.click()
            page.wait_for_selector("#pairs")
            assert page.locator("#members tr").count() == 4  # header and three members
            assert "Reuters" in page.inner_text("#members")
            page.locator("#pairs a.pair-link").first.click()
            page.wait_for_selector("#label-form")
            marks = page.locator("#text-a mark").all_inner_texts()
            assert marks
            assert any("Crews expect to restore most connections by Thursday" in m for m in marks)
            differing = " ".join(page.locator("#text-a span.only, #text-b span.only").all_inner_texts())
            assert "42,000" in differing or "Wednesday" in differing or "fallen" in differing
            assert "measured" in page.inner_text("#similarity")
            # The Content-Security-Policy lets the pages' own style sheet apply, and blocks nothing else.
            assert page.locator("body").evaluate("b => getComputedStyle(b).maxWidth") == "1248px"
            assert page.locator("mark").first.evaluate("m => getComputedStyle(m).backgroundColor") == (
                "rgb(253, 230, 138)"
            )
            assert not [m for m in console if "Content Security Policy" in m], console
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            id_a = page.locator("input[name=a]").get_attribute("value")
            id_b = page.locator("input[name=b]").get_attribute("value")
            page.check("input[value=duplicate]")
            page.fill("textarea[name=note]", "same story, updated figures")
            page.click("#save-label")
            page.wait_for_selector("#saved")
            assert "duplicate" in page.inner_text("#current-label")
        finally:
            browser.close()

    with closing(psycopg.connect(psycopg_url(database_url))) as conn:
        rows = conn.execute(
            f'SELECT id_a, id_b, label, note, labelled_by, method FROM "{schema}".pair_labels '
            "WHERE collection = %s",
            (name,),
        ).fetchall()
    assert rows == [
        (*sorted((id_a or "", id_b or "")), "duplicate", "same story, updated figures", "reviewer", "exact")
    ]
    assert SCREENSHOT.stat().st_size > 10_000


def test_chromium_is_where_the_browser_test_looks() -> None:
    """Say plainly when the browser test cannot run here (it is skipped, not passed)."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: the browser test was skipped (apt-get install -y chromium)")
    assert shutil.which("chromium") is not None
