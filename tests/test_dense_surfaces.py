"""What every surface says of a dense cluster: pairs (a line on standard error; --cluster ID
--complete), clusters (a dense column), stats, the SQL view, query and check (a line naming the
dense cluster); and that query and check import nothing of the ingest pipeline. The HTTP API and
the review page: tests/service/test_dense.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from neardup.ingest import pairing
from tests.conftest import Run, psycopg_url
from tests.test_dense import clique

pytestmark = pytest.mark.distributed_variant

BOUND = 5


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of more than four members are linked, so that the dense clique stores a subset."""
    monkeypatch.setattr(pairing, "SMALL_GROUP", 4)


def _collection(cli: Run) -> list[tuple[str, str]]:
    docs = clique("a", 12, 1) + clique("b", 3, 2)
    assert (
        cli("init", "--threshold", "0.8", "--bands", "64", "--rows", "2", "--dense-cluster-size", str(BOUND))[
            0
        ]
        == 0
    )
    status, _, err = cli(
        "add",
        "-",
        "--format",
        "jsonl",
        stdin="".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs),
    )
    assert status == 0, err
    return docs


def test_the_command_line_says_what_pairs_promises(cli: Run, tmp_path: Path) -> None:
    docs = _collection(cli)
    status, out, err = cli("clusters")
    assert status == 0
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows[0] == ["cluster", "id", "representative", "dense"]
    dense = {r[1]: r[3] for r in rows[1:]}
    assert {dense[f"a.{i:03d}"] for i in range(12)} == {"true"}
    assert {dense[f"b.{i:03d}"] for i in range(3)} == {"false"}
    cluster = next(r[0] for r in rows[1:] if r[1] == "a.000")
    status, out, err = cli("pairs")
    assert "1 dense clusters (12 documents)" in err
    assert "--complete" in err
    listed = len(out.splitlines()) - 1
    assert listed < 66 + 3  # the dense clique's 66 pairs are not all stored; b's 3 are
    status, out, err = cli("pairs", "--cluster", cluster, "--complete")
    assert status == 0
    assert len(out.splitlines()) - 1 == 66
    status, out, err = cli("pairs", "--cluster", cluster)
    assert "is dense" in err
    assert 11 <= len(out.splitlines()) - 1 < 66
    status, _, err = cli("pairs", "--complete")
    assert status == 2
    assert "--complete needs --cluster" in err
    status, out, _ = cli("stats")
    stats = dict(line.split("\t") for line in out.splitlines()[1:])
    assert (stats["dense_clusters"], stats["dense_contents"], stats["dense_documents"]) == ("1", "12", "12")
    assert stats["params.dense_cluster_size"] == str(BOUND)
    # A text of the dense clique: the answer within --limit, and a line naming its cluster.
    status, out, err = cli("query", "--text", docs[0][1], "--limit", "3")
    assert len(out.splitlines()) - 1 == 3
    assert f"belongs to dense cluster {cluster} with 12 members" in err
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"q{i}", "text": t}) + "\n" for i, (_, t) in enumerate(docs[:4]))
    )
    status, out, err = cli("check", str(path), "--limit", "2")
    assert status == 0
    assert f"4 records belong to dense cluster {cluster} with 12 members" in err


def test_the_sql_view_lists_the_dense_clusters(cli: Run, database_url: str, schema: str) -> None:
    _collection(cli)
    with psycopg.connect(psycopg_url(database_url)) as conn:
        rows = conn.execute(
            f'SELECT cluster, contents FROM "{schema}".dense_clusters WHERE collection = %s',
            (cli.collection,),
        ).fetchall()
        members = conn.execute(
            f'SELECT count(*) FROM "{schema}".cluster_list WHERE collection = %s AND cluster = %s',
            (cli.collection, rows[0][0]),
        ).fetchone()
    assert [n for _, n in rows] == [12]
    assert members == (12,)


def test_query_and_check_import_nothing_of_the_ingest_pipeline(
    cli: Run, database_url: str, schema: str, tmp_path: Path
) -> None:
    docs = _collection(cli)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "text": t}) + "\n" for i, (_, t) in enumerate(docs)))
    base = ["--db", database_url, "--schema", schema, "--collection", cli.collection]
    code = (
        "import sys\nfrom neardup.cli import main\n"
        f"assert main({[*base, 'query', '--text', docs[0][1]]!r}) == 0\n"
        f"assert main({[*base, 'check', str(path)]!r}) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('neardup.ingest')), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "a.000" in done.stdout  # both ran and answered


# What a query of a text given on the command line has no use for: evaluation, the changes feed,
# the own-pairs check, the input readers, OpenSSL's hashes, the mistyped-option suggestions.
NOT_FOR_A_QUERY = (
    "neardup.evaluation",
    "neardup.evaluation_sample",
    "neardup.own_pairs",
    "neardup.storage.changes",
    "neardup.sampled_buckets",
    "neardup.readers",
    "neardup.ingest",
    "difflib",
)


def test_a_query_of_a_text_loads_only_what_it_uses(cli: Run, database_url: str, schema: str) -> None:
    docs = _collection(cli)
    base = ["--db", database_url, "--schema", schema, "--collection", cli.collection]
    code = (
        "import sys\nfrom neardup.cli import main\n"
        f"assert main({[*base, 'query', '--text', docs[0][1]]!r}) == 0\n"
        f"print(sorted(m for m in sys.modules if m.startswith({NOT_FOR_A_QUERY!r})), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "a.000" in done.stdout
