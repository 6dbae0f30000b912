"""The command line with Parquet and Arrow, against a real PostgreSQL (issue 40): ``add`` of a
Parquet file stores what the same rows in JSONL store; ``pairs``, ``clusters`` and ``check`` write
Parquet with ``--format parquet --out``; ``dedup`` keeps the input's schema; bad rows are named by
file, row group and row; and an ingest that uses no Parquet imports no pyarrow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from tests._state import collection_state
from tests.conftest import Run, neardup_argv

pytestmark = pytest.mark.distributed_variant

SOURCE = str(Path(__file__).resolve().parents[2] / "src")
STORIES = (
    "Storms cut power to forty thousand homes across the valley on Monday night, the utility said, "
    "and crews worked until dawn.",
    "The city council approved a new budget for the public library system after a long debate about "
    "opening hours and staffing.",
    "A rare comet will be visible to the naked eye next week, astronomers said, weather permitting, low "
    "on the western horizon.",
    "Researchers found that the old bridge needs urgent repairs to its steel supports before the winter "
    "freeze sets in this year.",
)
ENDINGS = ("", " Updated.", " More soon.")


def _news() -> pa.Table:
    """Twelve rows: four stories each told three times with another ending (ids 10 * story + copy,
    integers), and columns of several types, one of them binary (never metadata)."""
    rows = [
        (10 * s + d, story + end, ["en", "fr"][s % 2])
        for s, story in enumerate(STORIES)
        for d, end in enumerate(ENDINGS)
    ]
    return pa.table(
        {
            "doc_id": pa.array([r[0] for r in rows], pa.int64()),
            "body": [r[1] for r in rows],
            "lang": [r[2] for r in rows],
            "score": [0.5 * i for i in range(len(rows))],
            "raw": pa.array([r[1].encode() for r in rows], pa.binary()),
        }
    )


def test_add_of_parquet_stores_what_the_same_jsonl_stores(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    table = _news()
    parquet, jsonl = tmp_path / "news.parquet", tmp_path / "news.jsonl"
    pq.write_table(table, parquet, row_group_size=5)
    keep = ["doc_id", "body", "lang", "score"]
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in table.select(keep).to_pylist()))
    other = Run(cli.database_url, cli.schema, cli.collection + "-jsonl", cli.capsys)
    for run, source in ((cli, parquet), (other, jsonl)):
        assert run("init", "--threshold", "0.7")[0] == 0
        status, _, err = run(
            "add", str(source), "--id-field", "doc_id", "--text-field", "body", "--meta-fields", "lang,score"
        )
        assert status == 0, err
        assert err.startswith("added 12,"), err
    ours = collection_state(database_url, schema, cli.collection)
    theirs = collection_state(database_url, schema, other.collection)
    assert ours.comparable() == theirs.comparable()
    assert len(ours.pairs) == 12  # three copies of each of four stories: three pairs each
    assert ours.documents[0][2] == {"lang": "en", "score": 0.0}


def test_pairs_clusters_and_check_write_parquet(cli: Run, tmp_path: Path) -> None:
    source = tmp_path / "news.arrow"
    feather.write_feather(_news(), source)
    assert cli("init", "--threshold", "0.7")[0] == 0
    assert (
        cli("add", str(source), "--id-field", "doc_id", "--text-field", "body", "--meta-fields", "")[0] == 0
    )
    _, tsv, _ = cli("pairs")
    status, out, err = cli("pairs", "--format", "parquet", "--out", str(tmp_path / "pairs.parquet"))
    assert (status, out) == (0, ""), err
    pairs = pq.read_table(tmp_path / "pairs.parquet")
    assert pairs.schema == pa.schema(
        [("id_a", pa.string()), ("id_b", pa.string()), ("jaccard", pa.float64())]
    )
    expected = [line.split("\t") for line in tsv.splitlines()[1:]]
    assert [[r["id_a"], r["id_b"], str(r["jaccard"])] for r in pairs.to_pylist()] == expected
    assert cli("clusters", "--format", "parquet", "--out", str(tmp_path / "clusters.parquet"))[0] == 0
    clusters = pq.read_table(tmp_path / "clusters.parquet").to_pylist()
    assert len(clusters) == 12
    assert sum(r["representative"] for r in clusters) == 4
    assert len({r["cluster"] for r in clusters}) == 4
    _, jsonl, _ = cli("clusters", "--format", "jsonl")
    assert clusters == [json.loads(line) for line in jsonl.splitlines()]
    # check: one row a match, one row with null match columns for a record without any
    incoming = tmp_path / "incoming.parquet"
    pq.write_table(
        pa.table({"id": ["q1", "q2"], "text": [STORIES[0] + " Correction.", "nothing like it"]}), incoming
    )
    status, _, err = cli(
        "check", str(incoming), "--format", "parquet", "--out", str(tmp_path / "check.parquet")
    )
    assert status == 0, err
    rows = pq.read_table(tmp_path / "check.parquet").to_pylist()
    assert sorted(r["match"] for r in rows if r["id"] == "q1") == ["0", "1", "2"]
    assert [r for r in rows if r["id"] == "q2"] == [{"id": "q2", "match": None, "jaccard": None}]
    # --out with a text format writes that file too; parquet without --out is refused
    assert cli("pairs", "--format", "csv", "--out", str(tmp_path / "pairs.csv"))[0] == 0
    assert (tmp_path / "pairs.csv").read_text().startswith("id_a,id_b,jaccard\n")
    status, out, err = cli("pairs", "--format", "parquet")
    assert (status, out) == (1, "")
    assert "--format parquet writes a file: give it with --out FILE" in err


def test_dedup_of_parquet_keeps_the_kept_rows_with_all_their_columns(cli: Run, tmp_path: Path) -> None:
    table = _news()
    source = tmp_path / "news.parquet"
    pq.write_table(table, source, row_group_size=4)
    assert cli("init", "--threshold", "0.7")[0] == 0
    assert (
        cli("add", str(source), "--id-field", "doc_id", "--text-field", "body", "--meta-fields", "lang")[0]
        == 0
    )
    out = tmp_path / "kept.parquet"
    status, _, err = cli(
        "dedup", str(source), "--id-field", "doc_id", "--text-field", "body", "--out", str(out)
    )
    assert status == 0, err
    assert "kept 4, dropped 8" in err
    kept = pq.read_table(out)
    assert kept.schema == table.schema
    assert kept.to_pylist() == [row for row in table.to_pylist() if row["doc_id"] % 10 == 0]
    # --against-index: every row duplicates a stored one, and a new text is kept
    fresh = pa.concat_tables(
        [
            table.slice(0, 2),
            pa.table(
                {
                    "doc_id": [99],
                    "body": ["a text new to the index, about something else"],
                    "lang": ["de"],
                    "score": [1.0],
                    "raw": pa.array([b"x"], pa.binary()),
                }
            ),
        ]
    )
    pq.write_table(fresh, tmp_path / "fresh.parquet")
    status, _, err = cli(
        "dedup",
        str(tmp_path / "fresh.parquet"),
        "--id-field",
        "doc_id",
        "--text-field",
        "body",
        "--against-index",
        "--out",
        str(out),
    )
    assert status == 0, err
    assert pq.read_table(out).column("doc_id").to_pylist() == [99]
    mixed = tmp_path / "other.jsonl"
    mixed.write_text('{"doc_id": "j", "body": "x"}\n')
    status, _, err = cli(
        "dedup", str(source), str(mixed), "--id-field", "doc_id", "--text-field", "body", "--out", str(out)
    )
    assert status == 1
    assert "dedup writes one file in its inputs' format" in err
    status, _, err = cli("dedup", "-", "--format", "arrow", "--out", str(out))
    assert status == 1
    assert "dedup reads Arrow inputs twice (ids, then the kept rows): give a file" in err


def test_bad_rows_are_named_and_skipped_with_skip_bad(cli: Run, tmp_path: Path) -> None:
    source = tmp_path / "bad.parquet"
    table = pa.table({"id": ["a", None, "c", "a", "e"], "text": ["one text", "two", None, "four", "five"]})
    pq.write_table(table, source, row_group_size=2)
    assert cli("init")[0] == 0
    status, _, err = cli("add", str(source))
    assert status == 1
    assert err == f"neardup: error: {source}: row group 0, row 1: column 'id' is null\n"
    rejects = tmp_path / "rejects.jsonl"
    status, _, err = cli("add", str(source), "--skip-bad", "--rejects", str(rejects))
    assert status == 0, err
    assert "added 2," in err
    assert "rejected 3" in err
    where = [json.loads(line)["where"] for line in rejects.read_text().splitlines()]
    assert where == [
        f"{source}: row group 0, row 1",
        f"{source}: row group 1, row 0",
        f"{source}: row group 1, row 1",
    ]
    assert f"id 'a' repeats {source}: row group 0, row 0" in rejects.read_text()


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": SOURCE, **env},
    )


def test_an_ingest_without_parquet_imports_no_pyarrow(cli: Run, tmp_path: Path) -> None:
    source = tmp_path / "plain.jsonl"
    source.write_text('{"id": "a", "text": "one text"}\n{"id": "b", "text": "another text"}\n')
    assert cli("init")[0] == 0
    argv = neardup_argv(cli.database_url, cli.schema, cli.collection, "add", str(source))[3:]
    code = (
        "import sys\nfrom neardup.cli import main\n"
        f"status = main({argv!r})\n"
        "print(status, 'pyarrow' in sys.modules, 'pandas' in sys.modules)"
    )
    done = _run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False", "False"]


def test_without_pyarrow_a_parquet_input_says_how_to_install_it(cli: Run, tmp_path: Path) -> None:
    assert cli("init")[0] == 0
    source = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["x"]}), source)
    argv = neardup_argv(cli.database_url, cli.schema, cli.collection, "add", str(source))[3:]
    # A None in sys.modules makes `import pyarrow` raise ImportError, as if it were not installed.
    code = (
        f"import sys\nsys.modules['pyarrow'] = None\nfrom neardup.cli import main\nsys.exit(main({argv!r}))"
    )
    done = _run_python(code)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "neardup: error: Parquet and Arrow need pyarrow: pip install 'neardup[arrow]'"
    )
    pairs = neardup_argv(
        cli.database_url,
        cli.schema,
        cli.collection,
        "pairs",
        "--format",
        "parquet",
        "--out",
        str(tmp_path / "p.parquet"),
    )[3:]
    done = _run_python(
        f"import sys\nsys.modules['pyarrow'] = None\nfrom neardup.cli import main\nsys.exit(main({pairs!r}))"
    )
    assert done.returncode == 1
    assert "pip install 'neardup[arrow]'" in done.stderr
