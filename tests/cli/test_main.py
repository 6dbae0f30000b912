"""The command line, in-process and as a subprocess, against a real PostgreSQL."""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.cli import EVAL_COLUMNS, EXAMPLES, OUTPUT_FORMATS, build_parser, main
from neardup.core import Params
from neardup.storage import migrate
from tests._corpus import brute_force_pairs, components, planted_corpus
from tests.conftest import Run, neardup_argv

pytestmark = pytest.mark.distributed_variant


def _jsonl(path: Path, docs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t, "n": k}) + "\n" for k, (i, t) in enumerate(docs)))
    return path


def test_every_command_has_help_with_an_example() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    assert set(sub.choices) == set(EXAMPLES)
    for name, p in sub.choices.items():
        text = p.format_help()
        assert "example:" in text
        assert EXAMPLES[name] in text


def test_init_add_pairs_clusters_in_every_format(cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=8, copies=2, seed=41)
    status, out, err = cli("init", "--threshold", "0.5", "--bands", "64", "--rows", "2")
    assert status == 0
    assert "bands\t64" in out
    assert "false-positive" in err
    status, _, err = cli("add", str(_jsonl(tmp_path / "docs.jsonl", docs)))
    assert status == 0
    assert f"added {len(docs)}" in err
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.5)
    outputs = {fmt: cli("pairs", "--format", fmt)[1] for fmt in OUTPUT_FORMATS}
    tsv = list(csv.reader(io.StringIO(outputs["tsv"]), delimiter="\t"))
    assert tsv[0] == ["id_a", "id_b", "jaccard"]
    assert {(a, b) for a, b, _ in tsv[1:]} == set(truth)
    assert list(csv.reader(io.StringIO(outputs["csv"])))[1:] == tsv[1:]
    as_jsonl = [json.loads(line) for line in outputs["jsonl"].splitlines()]
    assert as_jsonl == json.loads(outputs["json"])
    assert [(r["id_a"], r["id_b"]) for r in as_jsonl] == [(a, b) for a, b, _ in tsv[1:]]
    assert all(abs(r["jaccard"] - truth[(r["id_a"], r["id_b"])]) < 1e-6 for r in as_jsonl)
    _, out, _ = cli("clusters", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    grouped: dict[int, list[str]] = {}
    for r in rows:
        grouped.setdefault(r["cluster"], []).append(r["id"])
    # The representative is the earliest inserted member (keep "first", the default).
    position = {doc_id: k for k, (doc_id, _) in enumerate(docs)}
    for r in rows:
        assert r["representative"] == (r["id"] == min(grouped[r["cluster"]], key=position.__getitem__))
    assert sorted(grouped.values()) == components(set(truth))


def test_inputs_gzip_stdin_directory_and_csv_with_custom_fields(cli: Run, tmp_path: Path) -> None:
    assert cli("init", "--threshold", "0.5")[0] == 0
    text = "the quick brown fox jumps over the lazy dog"
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress((json.dumps({"id": "gz1", "text": text}) + "\n").encode()))
    folder = tmp_path / "dir"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "one.txt").write_text(text + "!")
    table = tmp_path / "t.csv"
    table.write_text('key,body,lang\ncsv1,"' + text + ' again",en\n')
    assert cli("add", str(gz))[0] == 0
    assert cli("add", str(folder))[0] == 0
    assert cli("add", str(table), "--id-field", "key", "--text-field", "body")[0] == 0
    assert cli("add", "-", stdin=json.dumps({"id": "in1", "text": text + "?"}) + "\n")[0] == 0
    _, out, _ = cli("query", "--text", text, "--format", "json")
    assert {r["id"] for r in json.loads(out)} == {"gz1", "sub/one.txt", "csv1", "in1"}
    _, out, _ = cli("query", "-", "--limit", "1", stdin=text)
    assert out.splitlines()[1].split("\t") == ["gz1", "1.0"]
    query_file = tmp_path / "q.txt"
    query_file.write_text(text)
    assert cli("query", "--file", str(query_file), "--min-jaccard", "0.99")[1].splitlines()[1:] == [
        "gz1\t1.0"
    ]


def test_dedup_keeps_one_per_cluster_and_every_loner(cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=10, copies=2, seed=43)
    source = _jsonl(tmp_path / "in.jsonl", docs)
    cli("init", "--threshold", "0.5", "--bands", "64", "--rows", "2")
    cli("add", str(source))
    out_path = tmp_path / "out.jsonl"
    status, _, _ = cli("dedup", str(source), "--out", str(out_path))
    assert status == 0
    kept = [json.loads(line) for line in out_path.read_text().splitlines()]
    clusters = components(set(brute_force_pairs(docs, Params(bands=64, rows=2), 0.5)))
    clustered = {i for c in clusters for i in c}
    kept_ids = [r["id"] for r in kept]
    first = {doc_id: k for k, (doc_id, _) in enumerate(docs)}  # keep "first": the earliest inserted
    representatives = [min(c, key=first.__getitem__) for c in clusters]
    assert sorted(kept_ids) == sorted(representatives + [i for i, _ in docs if i not in clustered])
    assert all(
        r["n"] == next(k for k, (i, _) in enumerate(docs) if i == r["id"]) for r in kept
    )  # fields kept


def test_remove_stats_tune_and_db(cli: Run, tmp_path: Path, deployment: str) -> None:
    cli("init")
    cli("add", str(_jsonl(tmp_path / "d.jsonl", [("x", "some text here"), ("y", "other text there")])))
    status, _, err = cli("remove", "x", "missing")
    assert status == 0
    assert "removed 1 of 2" in err
    _, out, _ = cli("stats", "--format", "json")
    stats = json.loads(out)
    assert stats["documents"] == 1
    assert stats["distributed"] is (deployment == "citus")
    assert stats["params"]["bands"] == 17  # the default tuning at 0.8: 17 x 7
    png = tmp_path / "s.png"
    _, out, _ = cli("tune", "--threshold", "0.8", "--num-perm", "128", "--format", "csv", "--plot", str(png))
    assert out.splitlines()[1].startswith("17,7,")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert stats["database"].startswith("postgresql")
    _, out, _ = cli("db", "current")
    assert out.strip() == migrate.head_revision()


def test_errors_give_one_line_and_a_non_zero_status(cli: Run, tmp_path: Path) -> None:
    status, out, err = cli("pairs")
    assert status == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "no collection named" in err
    cli("init")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": \n')
    status, _, err = cli("add", str(bad))
    assert status == 1
    assert f"{bad}:2: not valid JSON" in err
    missing = tmp_path / "m.csv"
    missing.write_text("id,body\n1,x\n")
    status, _, err = cli("add", str(missing))
    assert status == 1
    assert "column 'text' is missing" in err


def test_subprocess_python_m_neardup(database_url: str, schema: str, tmp_path: Path) -> None:
    base = neardup_argv(database_url, schema, "cli-sub")
    assert subprocess.run([*base, "init", "--exist-ok"], capture_output=True, check=False).returncode == 0
    done = subprocess.run(
        [*base, "add", "-"],
        input='{"id": "s1", "text": "hello world"}\n',
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [*base, "query", "--text", "hello world"], capture_output=True, text=True, check=False
    )
    assert listed.stdout.splitlines() == ["id\tjaccard", "s1\t1.0"]
    failed = subprocess.run([*base, "remove"], capture_output=True, text=True, check=False)
    assert failed.returncode == 2
    assert "usage:" in failed.stderr


def test_embedded_default_persists_between_processes(tmp_path: Path) -> None:
    # No --db and no NEARDUP_DATABASE_URL: a private server whose data lives under NEARDUP_HOME
    # (a fresh directory that 'nobody' can reach when the suite runs as root).
    import os
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="nd-home-", dir="/var/tmp"))
    home.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "NEARDUP_DATABASE_URL"}
    env.update(NEARDUP_HOME=str(home), HOME=str(home), NEARDUP_SERVER_IDLE_TIMEOUT="0")  # stop after each
    try:

        def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "neardup", *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )

        assert run("init", "--threshold", "0.5").returncode == 0
        text = "the quick brown fox jumps over the lazy dog"
        added = run("add", "-", stdin=json.dumps({"id": "a", "text": text}) + "\n")
        assert added.returncode == 0, added.stderr
        again = run("add", "-", stdin=json.dumps({"id": "b", "text": text + "!"}) + "\n")
        assert again.returncode == 0, again.stderr
        listed = run("pairs")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[1].split("\t")[:2] == ["a", "b"]
        stats = run("stats")
        assert str(home) in stats.stdout  # where the data lives
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_db_upgrade_current_downgrade(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--db", database_url, "--schema", "nd_cli_db"]
    try:
        assert main([*base, "db", "current"]) == 0
        assert capsys.readouterr().out.strip() == "none"
        assert main([*base, "db", "upgrade"]) == 0
        assert capsys.readouterr().out.strip() == migrate.head_revision()
        assert main([*base, "init"]) == 0
        capsys.readouterr()
        # A downgrade needs --yes: without it, it says what it would undo and changes nothing.
        assert main([*base, "db", "downgrade", "--revision", "0001"]) == 1
        err = capsys.readouterr().err
        assert f"undoes {int(migrate.head_revision()) - 1} migrations" in err
        assert "0003, The service's tables: API tokens" in err
        assert err.endswith("add --yes to do it\n")
        assert main([*base, "db", "current"]) == 0
        assert capsys.readouterr().out.strip() == migrate.head_revision()
        # One revision behind: every command that opens the collection refuses, saying what to run.
        assert main([*base, "db", "downgrade", "--revision", "0001", "--yes"]) == 0
        assert capsys.readouterr().out.strip() == "0001"
        assert main([*base, "pairs"]) == 1
        assert "neardup db upgrade" in capsys.readouterr().err
        assert main([*base, "db", "upgrade"]) == 0
        text = "the quick brown fox jumps over the lazy dog"
        stdin = sys.stdin
        try:
            sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps({"id": "a", "text": text}).encode()))
            assert main([*base, "add", "-"]) == 0
        finally:
            sys.stdin = stdin
        assert main([*base, "stats", "--format", "json"]) == 0
        capsys.readouterr()
        # To base, with no revision given: every collection named, with its documents.
        assert main([*base, "db", "downgrade"]) == 1
        assert capsys.readouterr().err == (
            "neardup: error: downgrading schema 'nd_cli_db' to base drops every neardup table: its 1 "
            "collection, 'default' (1 document), with their pairs, clusters, labels, tokens and "
            "changes: add --yes to do it\n"
        )
        assert main([*base, "stats", "--format", "json"]) == 0  # still there
        assert json.loads(capsys.readouterr().out)["documents"] == 1
        assert main([*base, "db", "downgrade", "--yes"]) == 0
        captured = capsys.readouterr()
        assert captured.out.strip().endswith("none")
        assert "'default' (1 document)" in captured.err
        assert main([*base, "pairs"]) == 1
        assert "neardup db upgrade" in capsys.readouterr().err
    finally:
        import psycopg

        from tests.conftest import psycopg_url

        with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
            conn.execute('DROP SCHEMA IF EXISTS "nd_cli_db" CASCADE')


def test_skip_bad_counts_and_writes_rejected_records(cli: Run, tmp_path: Path) -> None:
    cli("init")
    source = tmp_path / "mixed.jsonl"
    good = [json.dumps({"id": f"g{i}", "text": f"good text number {i}"}) for i in range(5)]
    lines = [
        good[0],
        '{"id": "broken", "text": ',  # malformed JSON
        good[1],
        json.dumps({"id": "notext"}),  # missing field
        json.dumps({"id": "nul", "text": "a\u0000b"}),  # NUL character
        good[2],
        json.dumps({"id": "g0", "text": "a repeated id"}),  # repeats line 1
        good[3],
    ]
    source.write_bytes(
        ("\n".join(lines) + "\n").encode() + b'{"id": "latin", "text": "caf\xe9"}\n' + good[4].encode()
    )
    rejects = tmp_path / "rejects.jsonl"
    status, _, err = cli("add", str(source), "--skip-bad", "--rejects", str(rejects))
    assert status == 0
    assert "added 5" in err
    assert "rejected 5" in err
    bad = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [b["where"] for b in bad] == [f"{source}:{n}" for n in (2, 4, 5, 7, 9)]
    assert "not valid JSON" in bad[0]["reason"]
    assert "'text' is missing" in bad[1]["reason"]
    assert "NUL" in bad[2]["reason"]
    assert f"repeats {source}:1" in bad[3]["reason"]
    assert "not valid UTF-8" in bad[4]["reason"]
    # Without --skip-bad the first bad record stops the import, naming its place; nothing more is added.
    status, _, err = cli("add", str(source))
    assert status == 1
    assert f"{source}:2: not valid JSON" in err


def test_eval_reports_recall_the_bins_and_a_plot(cli: Run, tmp_path: Path) -> None:
    from neardup.core.intervals import clopper_pearson

    docs = planted_corpus(n_sources=10, copies=2, seed=47)
    cli("init", "--threshold", "0.5", "--bands", "64", "--rows", "2")
    cli("add", str(_jsonl(tmp_path / "d.jsonl", docs)))
    png = tmp_path / "report.png"
    status, out, err = cli("eval", "--sample", "500", "--plot", str(png))
    assert status == 0
    assert "recall at J >= 0.5: 1.0000" in err
    assert "precision: 1.0000" in err
    assert f"report written to {png}" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "recall in the threshold's bin [0.5, 0.55): 1.0000" in err
    table = list(csv.reader(io.StringIO(out), delimiter="\t"))
    assert table[0] == list(EVAL_COLUMNS)
    # The threshold's bin first, with its recall and Wilson interval; then the others ascending.
    first = dict(zip(EVAL_COLUMNS, table[1], strict=True))
    assert (first["low"], first["recall"], first["recall_high"]) == ("0.5", "1.0", "1.0")
    assert float(first["recall_low"]) < 1.0
    assert (table[2][0], table[-1][1]) == ("0.25", "1.0")
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.5)
    assert sum(int(row[-1]) for row in table[1:]) == len(truth)  # every stored pair, in its bin
    assert "Clopper-Pearson exact over the pairs, widened to a bootstrap over the sampled contents" in err
    assert "per-bin recall_low and recall_high below: 95% Wilson intervals" in err
    status, out, err = cli("eval", "--sample", "5", "--seed", "3", "--floor", "0.4", "--format", "json")
    report = json.loads(out)
    assert (report["sampled"], report["seed"], report["floor"], report["recall"]) == (5, 3, 0.4, 1.0)
    # A few pairs, every one found: an honest interval, never 1 to 1, and each bin's too.
    assert report["recall_low"] <= clopper_pearson(report["found_pairs"], report["true_pairs"])[0] < 1.0
    assert "1.0000 to 1.0000" not in err
    assert all(b["recall_low"] < 1.0 for b in report["bins"] if b["recall"] is not None)
    assert report["recall_interval"].startswith("Clopper-Pearson")
    assert report["bin_recall_interval"] == "Wilson"
    assert [b["low"] for b in report["bins"]][:2] == [0.4, 0.45]
    _, out, _ = cli("eval", "--sample", "5", "--seed", "3", "--floor", "0.4", "--format", "jsonl")
    threshold_first = [report["threshold_bin"], *(b for b in report["bins"] if b != report["threshold_bin"])]
    assert report["threshold_bin"]["low"] == 0.5
    assert [json.loads(line) for line in out.splitlines()] == [
        {k: (round(v, 6) if isinstance(v, float) else v) for k, v in b.items()} for b in threshold_first
    ]


def test_eval_refuses_a_collection_without_text(cli: Run, tmp_path: Path) -> None:
    cli("init", "--no-store-text")
    cli("add", str(_jsonl(tmp_path / "d.jsonl", [("x", "some text here"), ("y", "some text there")])))
    status, out, err = cli("eval")
    assert status == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("neardup: error: ")
    assert "stores no text" in err


def test_driver_warnings_do_not_add_lines_to_an_error() -> None:
    # After a lost connection psycopg warns that the rollback failed too; the CLI reports the
    # error once, so that warning must not reach stderr through logging's last-resort handler
    # (a subprocess: under pytest, its own log capture would hide the difference).
    script = (
        "import logging, sys\n"
        "from neardup.cli import main\n"
        "main(['tune', '--threshold', '0.8'])\n"
        "logging.getLogger('psycopg').warning('error ignored in rollback of <psycopg.Transaction>')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert "rollback" not in done.stderr


def test_every_stored_parameter_has_an_option_with_its_default() -> None:
    from neardup.cli import PARAM_OPTIONS
    from neardup.config import DEFAULT_THRESHOLD, PARAM_DEFAULTS, PARAM_FIELDS

    assert set(PARAM_OPTIONS) == set(PARAM_FIELDS)
    init = build_parser().parse_args(["init"])
    assert {name: getattr(init, name) for name in PARAM_FIELDS} == PARAM_DEFAULTS
    assert init.threshold == DEFAULT_THRESHOLD
    rebuild = build_parser().parse_args(["rebuild"])
    assert all(getattr(rebuild, name) is None for name in (*PARAM_FIELDS, "threshold", "bands", "rows"))


def test_init_sets_every_parameter(cli: Run) -> None:
    status, out, _ = cli(
        "init",
        *("--scheme", "classic", "--num-perm", "64", "--unicode-form", "NFC", "--case", "keep"),
        *("--no-collapse-whitespace", "--shingle", "word", "--k", "2", "--seed", "9", "--format", "json"),
    )
    assert status == 0
    shown = {r["parameter"]: r["value"] for r in json.loads(out)}
    assert {k: shown[k] for k in ("scheme", "num_perm", "unicode_form", "case", "shingle", "k", "seed")} == {
        "scheme": "classic",
        "num_perm": 64,
        "unicode_form": "NFC",
        "case": "keep",
        "shingle": "word",
        "k": 2,
        "seed": 9,
    }
    assert shown["collapse_whitespace"] is False


def test_rebuild_changes_parameters_and_pairs_equal_brute_force(cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=8, copies=2, seed=53)
    assert cli("init", "--threshold", "0.5", "--bands", "64", "--rows", "2")[0] == 0
    assert cli("add", str(_jsonl(tmp_path / "d.jsonl", docs)))[0] == 0
    status, out, err = cli("rebuild", "--threshold", "0.6", "--bands", "32", "--rows", "4", "--k", "3")
    assert status == 0, err
    assert err.count("\n") == 1
    assert "(threshold: 0.5 -> 0.6; bands: 64 -> 32; rows: 2 -> 4; k: 5 -> 3)" in err
    assert "bands\t32" in out
    _, out, _ = cli("stats", "--format", "json")
    stats = json.loads(out)
    assert (stats["threshold"], stats["params"]["bands"], stats["params"]["rows"], stats["params"]["k"]) == (
        0.6,
        32,
        4,
        3,
    )
    truth = brute_force_pairs(docs, Params(bands=32, rows=4, k=3), 0.6)
    _, out, _ = cli("pairs", "--format", "jsonl")
    assert {(r["id_a"], r["id_b"]) for r in map(json.loads, out.splitlines())} == set(truth)
    assert cli("rebuild", "--case", "keep", "--no-collapse-whitespace")[0] == 0
    _, out, _ = cli("stats", "--format", "json")
    stats = json.loads(out)
    assert (stats["params"]["case"], stats["params"]["collapse_whitespace"], stats["params"]["k"]) == (
        "keep",
        False,
        3,
    )


def test_recall_at_threshold_is_tuned_shown_and_rebuilt_to_the_state_of_a_fresh_build(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    from neardup.core import optimal_params
    from tests._state import collection_state

    docs = planted_corpus(n_sources=8, copies=3, seed=61)
    path = _jsonl(tmp_path / "d.jsonl", docs)
    default = optimal_params(0.5, 128, 0.2, 0.8, recall_at_threshold=0.99)
    status, out, err = cli("init", "--threshold", "0.5")
    assert status == 0, err
    assert (
        f"P(candidate) at 0.5 {default.candidate_probability_at_threshold:.4f}, expected recall in "
        f"[0.5, 0.55) {default.threshold_bin_recall:.4f} (pairs' density falling across the bin"
    ) in err
    assert f"bands\t{default.bands}" in out
    assert "rows\t3" in out
    assert "recall_at_threshold\t0.99" in out
    assert cli("add", str(path))[0] == 0
    status, out, err = cli("rebuild", "--recall-at-threshold", "0.999")
    assert status == 0, err
    strict = optimal_params(0.5, 128, 0.2, 0.8, recall_at_threshold=0.999)
    assert f"bands: {default.bands} -> {strict.bands}" in err
    assert "recall_at_threshold: 0.99 -> 0.999" in err
    _, out, _ = cli("stats", "--format", "json")
    stats = json.loads(out)
    assert (stats["params"]["bands"], stats["params"]["rows"], stats["params"]["recall_at_threshold"]) == (
        strict.bands,
        strict.rows,
        0.999,
    )
    assert stats["expected_threshold_bin_recall"] >= 0.999
    assert stats["candidate_probability_at_threshold"] == round(strict.candidate_probability_at_threshold, 6)
    # The rebuilt collection holds what a collection made with the target from the start holds.
    fresh = Run(database_url, schema, cli.collection + "-fresh", cli.capsys)
    assert fresh("init", "--threshold", "0.5", "--recall-at-threshold", "0.999")[0] == 0
    assert fresh("add", str(path))[0] == 0
    rebuilt = collection_state(database_url, schema, cli.collection)
    assert rebuilt.comparable() == collection_state(database_url, schema, fresh.collection).comparable()
    assert rebuilt.bucket_rows == strict.bands * len({text for _, text in docs})
    # Out of range: refused in the parser, nothing changed.
    status, _, err = cli("rebuild", "--recall-at-threshold", "1")
    assert status == 2
    assert "recall_at_threshold must be in (0, 1), got 1.0" in err
    assert collection_state(database_url, schema, cli.collection) == rebuilt
    status, out, err = cli("tune", "--threshold", "0.5")
    row = dict(zip(*csv.reader(io.StringIO(out), delimiter="\t"), strict=True))
    assert (row["bands"], row["rows"], row["bucket_rows_per_document"]) == ("31", "3", "31")
    assert float(row["threshold_bin_recall"]) >= 0.99
    assert float(row["candidate_probability_at_threshold"]) == pytest.approx(
        default.candidate_probability_at_threshold, abs=1e-6
    )


def test_rebuild_of_a_collection_without_text_refuses_a_k_change_in_one_line(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    from tests._state import collection_state

    cli("init", "--no-store-text")
    cli("add", str(_jsonl(tmp_path / "d.jsonl", [("x", "some text here"), ("y", "some text there")])))
    before = collection_state(database_url, schema, cli.collection).comparable()
    status, out, err = cli("rebuild", "--k", "3")
    assert (status, out) == (1, "")
    assert err.startswith("neardup: error: ")
    assert err.count("\n") == 1
    assert "stores no text" in err
    assert "k: 5 != 3" in err
    assert collection_state(database_url, schema, cli.collection).comparable() == before
    assert cli("rebuild", "--threshold", "0.7")[0] == 0  # re-banding needs no text


# -- regressions: each of these ended in a traceback, or was accepted by one command and refused by
# -- another, before the options were checked in the parser and files read through readers.py.


def _one_error_line(result: tuple[int, str, str], *needles: str) -> None:
    status, out, err = result
    assert (status, out) == (1, ""), err
    assert err.startswith("neardup: error: ")
    assert err.count("\n") == 1
    for needle in needles:
        assert needle in err


def test_query_file_problems_end_in_one_line(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: UnicodeDecodeError, FileNotFoundError and IsADirectoryError tracebacks.
    cli("init")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"first line\ncaf\xe9\n")
    _one_error_line(cli("query", "--file", str(latin)), f"{latin}:2: not valid UTF-8")
    _one_error_line(cli("query", "--file", str(tmp_path / "missing.txt")), "No such file or directory")
    _one_error_line(cli("query", "--file", str(tmp_path)), f"{tmp_path}: is a directory")
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("a query".encode("utf-16"))
    _one_error_line(cli("query", "--file", str(utf16)), "UTF-16")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9"), encoding="utf-8"))
    _one_error_line(cli("query", "-"), "<stdin>:1: not valid UTF-8")  # stdin as set above


def test_output_paths_that_cannot_be_written_are_refused_before_any_work(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    from tests._state import collection_state

    cli("init")
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "a", "text": "a text"}) + "\n" + json.dumps({"id": "b"}) + "\n")
    missing = tmp_path / "no-such-dir"
    # Before: FileNotFoundError tracebacks (add's --rejects after its batches had committed).
    _one_error_line(
        cli("dedup", str(source), "--out", str(missing / "o.jsonl")), "--out", "no such directory"
    )
    _one_error_line(cli("dedup", str(source), "--out", str(tmp_path)), "is a directory")
    _one_error_line(cli("add", str(source), "--skip-bad", "--rejects", str(missing / "r.jsonl")), "--rejects")
    assert collection_state(database_url, schema, cli.collection).documents == []
    _one_error_line(cli("eval", "--plot", str(missing / "r.png")), "--plot")
    _one_error_line(cli("tune", "--threshold", "0.8", "--plot", str(missing / "s.png")), "--plot")


def test_dedup_onto_its_own_input_keeps_the_input_whole(cli: Run, tmp_path: Path) -> None:
    # Before: --out truncated the file before it was read, and dedup then called it empty.
    docs = [("a", "the same words in the same order"), ("b", "the same words in the same order!")]
    source = _jsonl(tmp_path / "in.jsonl", docs)
    cli("init", "--threshold", "0.5")
    cli("add", str(source))
    status, _, err = cli("dedup", str(source), "--out", str(source))
    assert status == 0, err
    assert [json.loads(line)["id"] for line in source.read_text().splitlines()] == ["a"]
    assert [p.name for p in tmp_path.iterdir()] == ["in.jsonl"]  # nothing left beside it


def test_an_option_takes_the_same_values_in_every_command(cli: Run) -> None:
    # Before: pairs --min-jaccard 2 listed nothing and succeeded, query refused it; query --limit -1
    # silently dropped the last hit; --limit 0 printed nothing.
    cli("init")
    for argv in (["pairs", "--min-jaccard", "2"], ["query", "--text", "x", "--min-jaccard", "2"]):
        status, _, err = cli(*argv)
        assert status == 2
        assert "argument --min-jaccard: min_jaccard must be in [0, 1], got 2.0" in err
    for value in ("-1", "0"):
        status, _, err = cli("query", "--text", "x", "--limit", value)
        assert status == 2
        assert f"argument --limit: must be at least 1, got {value}" in err
    for argv in (
        ["tune", "--threshold", "1.5"],
        ["init", "--threshold", "1.5"],
        ["rebuild", "--threshold", "1.5"],
    ):
        status, _, err = cli(*argv)
        assert status == 2
        assert "argument --threshold: threshold must be in (0, 1], got 1.5" in err
    for argv in (["tune", "--threshold", "0.8", "--num-perm", "0"], ["init", "--num-perm", "0"]):
        assert "argument --num-perm: num_perm must be an integer in [1, 8192], got 0" in cli(*argv)[2]


def test_remove_refuses_an_id_no_document_can_have_in_one_line(cli: Run) -> None:
    # Before: a UnicodeEncodeError traceback from the driver (a non-UTF-8 byte in argv).
    cli("init")
    _one_error_line(cli("remove", "ok", "a\udcff"), "ID 2", "not valid Unicode")
    _one_error_line(cli("remove", "a\x00b"), "ID 1", "NUL")


def test_dedup_input_nested_too_deeply_ends_in_one_line(cli: Run, tmp_path: Path) -> None:
    # Before: RecursionError tracebacks from json.loads, in add and in dedup.
    cli("init")
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b'{"id": "d", "text": "t", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    _one_error_line(cli("add", str(deep)), f"{deep}:1: JSON nested too deeply")
    _one_error_line(cli("dedup", str(deep), "--out", str(tmp_path / "o.jsonl")), f"{deep}:1: JSON nested")
    assert not (tmp_path / "o.jsonl").exists()  # no half-written output


def test_threshold_one_is_one_rule_from_init_to_stats(cli: Run, tmp_path: Path) -> None:
    """Defect: init accepted threshold 1 and then failed, as did stats: the tuner refused 1.0."""
    status, out, err = cli("init", "--threshold", "1", "--bands", "16", "--rows", "8")
    assert status == 0, err
    assert "threshold\t1.0" in out
    text = "the quick brown fox jumps over the lazy dog"
    docs = _jsonl(tmp_path / "d.jsonl", [("a", text), ("b", text.upper()), ("c", text + " again")])
    assert cli("add", str(docs))[0] == 0
    status, out, err = cli("stats")
    assert status == 0, err
    assert "expected_fn_rate\t0.0" in out
    status, out, _ = cli("pairs")
    assert out.splitlines()[1:] == ["a\tb\t1.0"]  # the same normalised text; "c" is below 1
    status, _, err = cli("init", "--threshold", "1.01", "--exist-ok")
    assert status == 2
    assert "threshold" in err


def _shingle_jaccard(a: str, b: str, params: Params) -> float:
    from neardup.core import shingles

    sa = set(shingles(a, params.shingle, params.k, params.normalization).tolist())
    sb = set(shingles(b, params.shingle, params.k, params.normalization).tolist())
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def test_check_lists_each_records_stored_matches_like_brute_force(cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=6, copies=2, seed=77)
    assert cli("init", "--threshold", "0.5", "--bands", "64", "--rows", "2")[0] == 0
    assert cli("add", str(_jsonl(tmp_path / "stored.jsonl", docs[:10])))[0] == 0
    incoming = [*docs[10:], docs[0]]
    path = _jsonl(tmp_path / "in.jsonl", incoming)
    status, out, err = cli("check", str(path), "--format", "jsonl")
    assert status == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == [i for i, _ in incoming]
    params = Params(bands=64, rows=2)
    for (_, text), row in zip(incoming, rows, strict=True):
        truth = {i for i, t in docs[:10] if _shingle_jaccard(text, t, params) >= 0.5}
        assert {m["id"] for m in row["matches"]} == truth
        assert [m["jaccard"] for m in row["matches"]] == sorted(
            (m["jaccard"] for m in row["matches"]), reverse=True
        )
    status, out, _ = cli("check", str(path))  # TSV: every record appears, matched or not
    assert {line.split("\t")[0] for line in out.splitlines()[1:]} == {i for i, _ in incoming}
    assert cli("stats")[1].count("documents\t10") == 1  # nothing was stored


def test_dedup_against_index_keeps_records_new_to_the_index_and_the_input(cli: Run, tmp_path: Path) -> None:
    docs = planted_corpus(n_sources=8, copies=2, seed=78)
    stored, incoming = docs[:9], docs[9:]
    # Near-copies repeated inside the input under other ids, and an empty text.
    incoming = [*incoming, ("again-1", incoming[0][1]), ("again-2", incoming[1][1] + " w001"), ("blank", "")]
    assert cli("init", "--threshold", "0.5", "--bands", "64", "--rows", "2")[0] == 0
    assert cli("add", str(_jsonl(tmp_path / "stored.jsonl", stored)))[0] == 0
    source = _jsonl(tmp_path / "in.jsonl", incoming)
    out_path = tmp_path / "new.jsonl"
    status, _, err = cli("dedup", str(source), "--against-index", "--out", str(out_path), "--batch-size", "3")
    assert status == 0, err
    params = Params(bands=64, rows=2)
    expected = [
        i
        for n, (i, t) in enumerate(incoming)
        if not any(_shingle_jaccard(t, s, params) >= 0.5 for _, s in stored)
        and not any(_shingle_jaccard(t, e, params) >= 0.5 for _, e in incoming[:n])
    ]
    assert "again-1" not in expected
    assert "blank" in expected
    assert [json.loads(line)["id"] for line in out_path.read_text().splitlines()] == expected
    assert f"kept {len(expected)}, dropped {len(incoming) - len(expected)}" in err
    repeated = _jsonl(tmp_path / "rep.jsonl", [incoming[0], incoming[0]])
    status, _, err = cli("dedup", str(repeated), "--against-index", "--out", str(tmp_path / "x.jsonl"))
    assert status == 1
    assert "repeats" in err
    assert err.count("\n") == 1


def test_collections_and_drop(
    database_url: str, fresh_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run(database_url, fresh_schema, "news", capsys)
    assert run("init", "--threshold", "0.5")[0] == 0
    text = "the quick brown fox jumps over the lazy dog"
    docs = "".join(
        json.dumps({"id": i, "text": t}) + "\n" for i, t in [("a", text), ("b", text + "!"), ("c", "x")]
    )
    assert run("add", "-", stdin=docs)[0] == 0
    assert Run(database_url, fresh_schema, "empty", capsys)("init", "--no-store-text")[0] == 0
    status, out, _ = run("collections")
    assert status == 0
    assert out.splitlines() == [
        "name\tthreshold\tstore_text\tdistributed\tdocuments\ttext_pairs\tdocument_pairs\tclusters\tcounts",
        "empty\t0.8\tfalse\tfalse\t0\t0\t0\t0\texact",
        "news\t0.5\ttrue\tfalse\t3\t1\t1\t1\texact",
    ]
    listed = json.loads(run("collections", "--format", "json")[1])
    assert [json.loads(line) for line in run("collections", "--format", "jsonl")[1].splitlines()] == listed
    assert listed[1] == {
        "name": "news",
        "threshold": 0.5,
        "store_text": True,
        "distributed": False,
        "documents": 3,
        "text_pairs": 1,
        "document_pairs": 1,
        "clusters": 1,
        "counts": "exact",
    }
    status, out, err = run("drop", "news")
    assert (status, out) == (1, "")
    held = "collection 'news' with its 3 documents, 1 cluster and their pairs and labels"
    assert err == f"neardup: error: dropping {held} deletes all of it: add --yes to drop it\n"
    assert len(json.loads(run("collections", "--format", "json")[1])) == 2
    status, out, err = run("drop", "news", "--yes")
    assert (status, out, err) == (0, "", f"neardup: dropping {held}\ndropped collection 'news'\n")
    assert [c["name"] for c in json.loads(run("collections", "--format", "json")[1])] == ["empty"]
    status, _, err = run("drop", "news", "--yes")
    assert status == 1
    assert err == f"neardup: error: no collection named 'news' in schema '{fresh_schema}'\n"
    assert run("pairs")[0] == 1  # it is gone
    status, _, err = run("drop", "bad/name", "--yes")
    assert status == 1
    assert "collection name 'bad/name' is not allowed" in err
    assert run("drop")[0] == 2  # no name: bad usage


def test_help_starts_without_the_library() -> None:
    # `neardup --help` and a command's parser load no numeric library or database driver: each
    # command imports what it needs when it runs.
    heavy = (
        "numba",
        "numpy",
        "psycopg",
        "sqlalchemy",
        "scipy",
        "alembic",
        "neardup.storage",
        "neardup.index",
    )
    script = (
        "import sys, contextlib, io\n"
        "from neardup.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "    assert main(['--version']) == 0\n"
        "    assert main(['--db', 'x', 'server', '--help']) == 0\n"
        f"print(sorted(m for m in sys.modules if m.startswith({heavy!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_named_command_is_found_before_parsing() -> None:
    from neardup.cli.main import command_named

    assert command_named(["--db", "pairs", "--schema=s", "--collection", "init", "stats", "--x"]) == "stats"
    assert command_named(["--help"]) is None
    assert command_named(["--", "query"]) == "query"
    assert command_named(["nonsense"]) == ""
    from neardup.storage.names import DEFAULT_SCHEMA

    # The command line spells the default schema out rather than import the storage side for it.
    assert build_parser().parse_args(["tune", "--threshold", "0.8"]).schema == DEFAULT_SCHEMA


def test_init_takes_every_creation_parameter_with_the_library_default() -> None:
    from neardup.config import CREATE_PARAMETERS

    init = build_parser().parse_args(["init"])
    assert {p.name: getattr(init, p.name) for p in CREATE_PARAMETERS} == {
        p.name: p.default for p in CREATE_PARAMETERS
    }
    given = build_parser().parse_args(["init", "--no-store-text", "--distributed", "--shards", "3"])
    assert (given.store_text, given.distributed, given.shards) == (False, True, 3)
    rebuild = vars(build_parser().parse_args(["rebuild"]))
    assert {p.name for p in CREATE_PARAMETERS if p.rebuild} <= set(rebuild)
    assert not {p.name for p in CREATE_PARAMETERS if not p.rebuild} & set(rebuild)


def test_labels_advise_eval_and_dedup_of_unstored_records(cli: Run, tmp_path: Path) -> None:
    from neardup.database import Database

    base = "the storm cut power to forty thousand homes across the northern valley on tuesday night"
    docs = [(f"s{i}", base + " more" * i) for i in range(6)]
    source = _jsonl(tmp_path / "docs.jsonl", docs)
    assert cli("init", "--threshold", "0.5")[0] == 0
    assert cli("add", str(source))[0] == 0
    pairs = [json.loads(line) for line in cli("pairs", "--format", "jsonl")[1].splitlines()]
    with Database(cli.database_url, cli.schema) as db:
        for p in pairs:
            db.labels.put(cli.collection, p["id_a"], p["id_b"], "duplicate")
    status, out, err = cli("labels", "--advise", "--target", "0.75", "--format", "jsonl")
    assert status == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert sum(r["labels"] for r in rows) == len(pairs)
    assert all(r["precision"] == 1.0 and r["interval_high"] == 1.0 for r in rows)
    # 15 of 15 labelled duplicate: Wilson's low end is 0.796, which meets 0.75 at the threshold.
    assert "lowest threshold with labelled precision >= 0.75: 0.5 (precision 1.000" in err
    assert f"from {len(pairs)} of {len(pairs)} labels" in err
    assert cli("labels", "--advise", "--target", "0")[0] == 2
    status, _, err = cli("eval", "--sample", "6")
    assert status == 0, err
    assert "threshold by labels: no threshold reaches labelled precision 0.95" in err
    # dedup of a file whose records are not stored: kept, and a warning says how many.
    other = _jsonl(tmp_path / "new.jsonl", [("n1", base), ("n2", base + " more"), ("s0", base)])
    status, _, err = cli("dedup", str(other), "--out", str(tmp_path / "out.jsonl"))
    assert status == 0, err
    assert "kept 3, dropped 0" in err
    assert "neardup: warning: 2 of 3 input records are not in collection" in err
    assert "--against-index" in err
