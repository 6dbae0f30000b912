"""The representative is a stored choice (``keep``): each policy, checked against the members'
own values, followed by the listing, the view, the review reads and ``dedup``; ``first`` is never
displaced by a later document; changing it re-sketches nothing."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from neardup.database import Database
from neardup.errors import ParamsError, ParamsMismatchError
from neardup.index import Index
from tests.conftest import Run, psycopg_url

pytestmark = pytest.mark.distributed_variant

BASE = "the storm cut power to forty thousand homes across the northern valley on tuesday night"
# Ids, texts and a metadata field chosen so that every policy picks a different document.
DOCS = [
    ("m", BASE, {"date": "2024-03-01"}),
    ("c", BASE + " officials said", {"date": "2024-01-05"}),
    ("x", BASE + " officials said on wednesday", {"date": "2024-02-10"}),
    ("a", BASE + " officials", {}),
]
EXPECTED = {"first": "m", "longest": "x", "id": "a", "meta:date": "c", "meta:date:desc": "m"}


def _view_representative(url: str, schema: str, name: str) -> list[str]:
    with psycopg.connect(psycopg_url(url)) as conn:
        rows = conn.execute(
            f'SELECT id FROM "{schema}".cluster_list WHERE collection = %s AND representative', (name,)
        ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize(("keep", "kept"), EXPECTED.items())
def test_each_policy_picks_its_document_everywhere(
    database_url: str, schema: str, keep: str, kept: str
) -> None:
    name = f"keep-{keep.replace(':', '-')}"
    with Index.create(database_url, name, 0.5, schema=schema, keep=keep) as index:
        index.add(DOCS, batch_size=1)
        assert index.keep == keep
        (cluster,) = index.clusters()
        assert sorted(cluster) == ["a", "c", "m", "x"]
        assert cluster.representative == kept
    assert _view_representative(database_url, schema, name) == [kept]
    with Database(database_url, schema) as db:
        (row,) = db.review(name).clusters_page(None, 10)
        assert (row.cluster, row.representative) == (cluster.id, kept)


def test_first_is_never_displaced_and_the_policy_changes_without_a_rebuild(
    database_url: str, schema: str
) -> None:
    with Index.create(database_url, "first-kept", 0.5, schema=schema) as index:
        assert index.keep == "first"
        index.add([("z-original", BASE)])
        # Later copies, with smaller ids, longer texts and earlier dates, one at a time.
        for i, (_, text, meta) in enumerate(DOCS[1:]):
            index.add([(f"http-{i}", text, meta)])
            (cluster,) = index.clusters()
            assert cluster.representative == "z-original"
        cluster_id = cluster.id
        before = index.stats()
        index.set_keep("id")
        (cluster,) = index.clusters()
        assert (cluster.id, cluster.representative) == (cluster_id, "http-0")
        after = index.stats()
        assert (after.contents, after.pairs, after.bucket_rows) == (
            before.contents,
            before.pairs,
            before.bucket_rows,
        )
        with pytest.raises(ParamsError, match="keep must be one of"):
            index.set_keep("newest")
    with pytest.raises(ParamsMismatchError, match="keep: 'id' != 'first'"):
        Index.create(database_url, "first-kept", 0.5, schema=schema, exist_ok=True)
    with Index.open(database_url, "first-kept", schema=schema) as index:
        assert index.keep == "id"  # stored


def test_init_rebuild_and_dedup_follow_the_stored_policy(cli: Run, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    # Fields beside id and text are the metadata.
    source.write_text("".join(json.dumps({"id": i, "text": t, **m}) + "\n" for i, t, m in DOCS))
    assert cli("init", "--threshold", "0.5", "--keep", "longest")[0] == 0
    assert cli("add", str(source))[0] == 0
    out = tmp_path / "kept.jsonl"
    status, _, err = cli("dedup", str(source), "--out", str(out))
    assert status == 0, err
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["x"]
    status, _, err = cli("rebuild", "--keep", "meta:date")
    assert status == 0, err
    assert "keep: 'longest' -> 'meta:date'" in err
    _, listed, _ = cli("clusters", "--format", "jsonl")
    rows = [json.loads(line) for line in listed.splitlines()]
    assert [r["id"] for r in rows if r["representative"]] == ["c"]
    assert cli("init", "--keep", "oldest")[0] == 2  # refused by the option's check
