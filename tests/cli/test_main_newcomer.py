"""A newcomer's first hour with the command line: options where they type them, mistakes named
with their fix, destructive commands that say what they delete, reports a program can read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.cli import main
from neardup.credentials import digest
from neardup.database import Database
from tests.conftest import Run


def test_global_options_work_after_the_command_too(
    database_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--db", database_url, "--schema", schema]
    # As the README's changes feed example writes them: after the command.
    assert main(["init", "--collection", "after-the-command", "--changes-feed", *where]) == 0
    capsys.readouterr()
    assert main(["changes", "--collection", "after-the-command", "--since", "0", *where]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["seq\tat\tkind\tid\tid_a\tid_b\tjaccard\tcluster\tclusters\tdense"]
    with Database(database_url, schema) as db:
        assert "after-the-command" in {c.name for c in db.collections(counts=False)}
    # Given on both sides, the one after the command counts; left out after it, the one before.
    assert (
        main(
            [
                *where,
                "--collection",
                "nowhere",
                "stats",
                "--format",
                "json",
                "--collection",
                "after-the-command",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["collection"] == "after-the-command"
    assert main(["--collection", "after-the-command", "stats", "--format", "json", *where]) == 0
    assert json.loads(capsys.readouterr().out)["changes_feed"] is True
    # token create --collection keeps its own meaning: the collection the token is limited to.
    assert main(["token", "create", "--scope", "read", "--collection", "after-the-command", *where]) == 0
    secret = capsys.readouterr().out.splitlines()[-1]
    with Database(database_url, schema) as db:
        found = db.tokens.lookup(digest(secret))
    assert found is not None
    assert found.collection == "after-the-command"


@pytest.mark.parametrize(
    ("argv", "usage", "meant"),
    [
        (["add", "x.jsonl", "--batchsize", "10"], "usage: neardup add", "--batch-size"),
        (["query", "--txt", "storms"], "usage: neardup query", "--text"),
        (["pairs", "--min-jacard", "0.9"], "usage: neardup pairs", "--min-jaccard"),
        (["add", "x.jsonl", "--max-length", "5"], "usage: neardup add", "--max-text-length"),
        (["changes", "--colection", "news"], "usage: neardup changes", "--collection"),
        (["init", "--treshold=0.9"], "usage: neardup init", "--threshold"),
    ],
)
def test_a_mistyped_option_gives_the_commands_usage_and_its_closest_option(
    argv: list[str], usage: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(usage)
    assert err.rstrip().endswith(f"(did you mean {meant}?)")


def test_an_option_close_to_none_is_named_without_a_guess(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--zzzzzz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: neardup stats")
    assert err.rstrip().endswith("unrecognized option --zzzzzz")
    assert main(["stats", "extra", "words"]) == 2
    assert capsys.readouterr().err.startswith("usage: neardup stats")  # the command's usage, not the top one


def test_add_of_a_directory_of_parquet_and_a_readme_reads_both(cli: Run, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "crawl"
    folder.mkdir()
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["first row text", "second row text"]}), folder / "p.parquet"
    )
    (folder / "README").write_text("This crawl holds two rows.")
    (folder / "fetch.py").write_text("print('the script that fetched it')")
    assert cli("init")[0] == 0
    status, _, err = cli("add", str(folder))
    assert status == 1
    assert err == (
        f"neardup: error: {folder}/fetch.py: no format neardup reads (in a directory, .jsonl, .csv, "
        ".tsv, .parquet and .arrow files give records, and text files such as .txt, .md or README one "
        "document each): move it out of the directory, or leave it out with --skip-bad\n"
    )
    status, _, err = cli("add", str(folder), "--skip-bad", "--rejects", str(tmp_path / "rejected.jsonl"))
    assert status == 0, err
    assert err.startswith("added 3, replaced 0, unchanged 0, empty 0, rejected 1,")
    assert cli("remove", "README")[1:] == ("", "removed 1 of 1\n")  # the README's id is its path inside
    status, out, _ = cli("add", "--help")
    assert (
        "text files (.txt, .md, .html and the like, or a name without a suffix such as README)"
        in " ".join(out.split())
    )


def test_a_killed_writers_file_beside_the_output_is_deleted_by_the_next_write(
    cli: Run, tmp_path: Path
) -> None:
    # A process killed (SIGKILL) while it wrote pairs.parquet leaves .pairs.parquet.neardup-PID;
    # the next write of pairs.parquet deletes it, and leaves a live writer's alone.
    out = tmp_path / "pairs.parquet"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; open({str(tmp_path)!r} + '/.pairs.parquet.neardup-' + "
            "str(__import__('os').getpid()), 'w').write('half'); print('ready', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline() == "ready\n"
    alive = tmp_path / f".pairs.parquet.neardup-{os.getppid()}"  # pytest's parent: alive, not ours
    alive.write_text("someone else's, still being written")
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    left = tmp_path / f".pairs.parquet.neardup-{writer.pid}"
    assert left.exists()
    assert cli("init")[0] == 0
    status, _, err = cli("pairs", "--format", "parquet", "--out", str(out))
    assert status == 0, err
    assert not left.exists()
    assert alive.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, out.name])


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_clusters_print_in_the_order_of_their_ids(cli: Run) -> None:
    assert cli("init")[0] == 0
    assert cli("add", str(EXAMPLES / "wires.jsonl"))[0] == 0
    status, out, _ = cli("clusters")
    ids = [int(line.split("\t")[0]) for line in out.splitlines()[1:]]
    assert status == 0
    assert len(set(ids)) == 3
    assert ids == sorted(ids)  # before: 1, 9, 4 (by each cluster's smallest document id)


def test_labels_print_similarities_as_every_listing_does(cli: Run, database_url: str, schema: str) -> None:
    assert cli("init")[0] == 0
    assert cli("add", str(EXAMPLES / "wires.jsonl"))[0] == 0
    with Database(database_url, schema) as db:
        db.labels.put(cli.collection, "afp-2093", "ap-0412", "duplicate")
    _, pairs, _ = cli("pairs", "--format", "jsonl")
    listed = {(p["id_a"], p["id_b"]): p["jaccard"] for p in map(json.loads, pairs.splitlines())}
    status, out, _ = cli("labels", "--format", "jsonl")
    (label,) = map(json.loads, out.splitlines())
    assert status == 0
    assert label["similarity"] == listed[("afp-2093", "ap-0412")] == 0.835443  # six decimals, not 16


def test_every_option_has_help_and_the_help_reads_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    from neardup.cli.main import _subparsers, build_parser

    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            assert action.help, (name, action.option_strings or action.dest)
    texts = {}
    for name in ("init", "add", "query", "serve", "tune"):
        assert main([name, "--help"]) == 0
        texts[name] = " ".join(capsys.readouterr().out.split())
    assert "must reach (in (0, 1); default 0.99)" in texts["init"]
    assert "(below 1)" not in texts["init"]
    assert "--id-field NAME the field (column) holding each record's id (default id)" in texts["add"]
    assert "--text-field NAME the field (column) holding each record's text (default text)" in texts["add"]
    assert "12 bytes a character plus" not in texts["add"]
    assert (
        "12 bytes for each character (a JSON escape) and 1 MiB besides (115 MiB by default)" in texts["add"]
    )
    assert "--text TEXT the text to look up" in texts["query"]
    assert "--log-level {critical,error,warning,info,debug} the least severe" in texts["serve"]
    assert main(["query"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: neardup query")
    assert err.endswith("neardup query: error: give one of --text, --file or -\n")


def test_the_embedded_server_says_it_runs_as_nobody_once_a_start(tmp_path: Path) -> None:
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="nd-home-", dir="/var/tmp"))
    home.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "NEARDUP_DATABASE_URL"}
    env.update(NEARDUP_HOME=str(home), HOME=str(home), NEARDUP_SERVER_IDLE_TIMEOUT="120")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "neardup", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)

    try:
        first, second = run("init"), run("stats")
        assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
        said = "running as root: the embedded PostgreSQL runs as user 'nobody'"
        assert (said in first.stderr) is (os.geteuid() == 0)  # the command that started it
        assert said not in second.stderr  # one that found it running
    finally:
        run("server", "stop")
        shutil.rmtree(home, ignore_errors=True)
