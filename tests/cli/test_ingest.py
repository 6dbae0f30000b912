"""What the command line reads, against a real PostgreSQL (issue 39): TSV stored verbatim, NDJSON
with U+2028 in a string taken by add and check, reading stopped at --max-text-length's bound with
memory bounded (as a process of its own, measured), ids and schema names parsed strictly."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.cli import main
from tests._state import collection_state
from tests.conftest import Run, neardup_argv

pytestmark = pytest.mark.distributed_variant


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _one_error_line(result: tuple[int, str, str], *needles: str) -> str:
    status, out, err = result
    assert (status, out) == (1, ""), err
    assert err.startswith("neardup: error: ")
    assert err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_tsv_is_stored_verbatim_quotes_and_all(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    # Before: q1 was stored as `Hello, he said`, and q3's quote swallowed q4 and q5: "added 3".
    rows = [
        ("q1", '"Hello," he said'),
        ("q2", "an ordinary second row of the file"),
        ("q3", '"unbalanced quote start'),
        ("q4", "the fourth row, after the open quote"),
        ("q5", 'the "fifth" row'),
    ]
    source = tmp_path / "quotes.tsv"
    source.write_text("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in rows), encoding="utf-8")
    assert cli("init")[0] == 0
    status, _, err = cli("add", str(source))
    assert status == 0, err
    assert err.startswith("added 5,")
    docs = collection_state(database_url, schema, cli.collection).documents
    assert [(d[0], d[1]) for d in docs] == [(i, _md5(t)) for i, t in rows]


def test_add_help_says_how_tsv_and_csv_are_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "tsv: tab-separated values without quoting or escapes" in shown
    assert 'a " is an ordinary character' in shown
    assert "csv: RFC 4180" in shown


def test_ndjson_with_line_separators_in_strings_is_read_by_add_and_check(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    # The service split bodies with str.splitlines(), which breaks at U+2028: the command line must not.
    texts = [
        f"a story told in two parts{c}and this is the second part of it, number {n}"
        for n, c in enumerate("\u2028\u2029\x85")
    ]
    source = tmp_path / "seps.ndjson"
    source.write_text(
        "".join(
            json.dumps({"id": f"s{n}", "text": t}, ensure_ascii=False) + "\n" for n, t in enumerate(texts)
        ),
        encoding="utf-8",
    )
    assert cli("init", "--threshold", "0.5")[0] == 0
    status, _, err = cli("add", str(source))
    assert status == 0, err
    assert err.startswith("added 3,")
    docs = collection_state(database_url, schema, cli.collection).documents
    assert [(d[0], d[1]) for d in docs] == [(f"s{n}", _md5(t)) for n, t in enumerate(texts)]
    status, out, err = cli("check", str(source), "--format", "jsonl")
    assert status == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["s0", "s1", "s2"]


def _measured(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, int]:
    """Run ``argv`` as a child of a small Python process: (status, stderr, the child's peak
    resident memory in bytes), measured apart from this test process and its other children."""
    script = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE, text=True)\n"
        "sys.stderr.write(done.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], input=stdin, capture_output=True, timeout=300, check=False
    )
    return done.returncode, done.stderr.decode(), int(done.stdout) * 1024  # ru_maxrss is in KiB


# A neardup process that has read a bounded line: the interpreter, numpy and the driver, the line
# (at most record_limit bytes, about 1 MiB here) and slack. An unbounded read of /dev/zero takes
# all the memory there is.
SMALL_PROCESS_BYTES = 200 * 2**20


@pytest.mark.parametrize(
    ("what", "argv", "message"),
    [
        (
            "add",
            ["add", "/dev/zero", "--max-text-length", "1000"],
            "/dev/zero:1: the line is longer than 1,060,576 bytes",
        ),
        (
            "query",
            ["query", "--file", "/dev/zero", "--max-text-length", "1000"],
            "/dev/zero: the text is longer than 4,003 bytes",
        ),
        (
            "check",
            ["check", "/dev/zero", "--format", "jsonl", "--max-text-length", "1000"],
            "/dev/zero:1: the line is longer",
        ),
    ],
)
def test_dev_zero_is_refused_at_the_bound_in_bounded_memory(
    what: str, argv: list[str], message: str, cli: Run, database_url: str, schema: str
) -> None:
    # Before: one line was read without bound, until memory ran out.
    assert cli("init")[0] == 0
    status, err, peak = _measured(neardup_argv(database_url, schema, cli.collection, *argv))
    assert status == 1, err
    assert err.startswith("neardup: error: "), err
    assert err.count("\n") == 1, err
    assert message in err
    assert "(--max-text-length)" in err
    assert peak < SMALL_PROCESS_BYTES, f"{what}: {peak / 2**20:.0f} MiB"


def test_a_50_mb_line_without_a_newline_is_refused_at_the_bound(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    # Before: the 50 MB line was read whole (and then refused as a text over the limit).
    source = tmp_path / "one-line.jsonl"
    with source.open("wb") as f:
        f.write(b'{"id": "big", "text": "')
        for _ in range(50):
            f.write(b"word " * (2**20 // 5))
    assert cli("init")[0] == 0
    argv = neardup_argv(database_url, schema, cli.collection, "add", str(source), "--max-text-length", "1000")
    status, err, peak = _measured(argv)
    assert status == 1, err
    assert f"{source}:1: the line is longer than 1,060,576 bytes" in err
    assert peak < SMALL_PROCESS_BYTES, f"{peak / 2**20:.0f} MiB"
    assert collection_state(database_url, schema, cli.collection).documents == []


def test_dev_zero_at_the_default_limit_stops_too(cli: Run, database_url: str, schema: str) -> None:
    # The default --max-text-length (10 M characters) bounds a line at 12 bytes a character + 1 MiB.
    assert cli("init")[0] == 0
    status, err, peak = _measured(neardup_argv(database_url, schema, cli.collection, "add", "/dev/zero"))
    assert status == 1, err
    assert "/dev/zero:1: the line is longer than 121,048,576 bytes" in err
    assert peak < 3 * 121_048_576 + SMALL_PROCESS_BYTES, f"{peak / 2**20:.0f} MiB"


def test_token_revoke_takes_ascii_digits_or_a_prefix(cli: Run) -> None:
    # Before: "²".isdigit() is true, and int("²") ended in a ValueError traceback.
    _one_error_line(cli("token", "revoke", "²"), "'²' is neither a token's id (digits 0-9) nor the prefix")
    _one_error_line(cli("token", "revoke", "٣"), "neither a token's id")
    _one_error_line(cli("token", "revoke", "9" * 5000), "no live token with id 9999")
    _one_error_line(cli("token", "revoke", "nd_nothing"), "'nd_nothing' names no live tokens")
    status, _, err = cli("token", "create", "--scope", "read", "--name", "revoke-me")
    assert status == 0, err
    token_id = err.split()[1]
    assert cli("token", "revoke", token_id)[0] == 0


def test_integer_options_take_ascii_digits_only(cli: Run) -> None:
    status, _, err = cli("query", "--text", "x", "--limit", "\uff13")  # a full-width 3
    assert status == 2
    assert "argument --limit: expected an integer" in err


@pytest.mark.parametrize("name", ["information_schema", "pg_catalog", "pg_toast", "pg_mine"])
def test_postgresql_own_schemas_are_refused(
    name: str, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: --schema information_schema was accepted.
    for command in (["stats"], ["init"], ["collections"]):
        status = main(["--db", database_url, "--schema", name, "--collection", "c", *command])
        err = capsys.readouterr().err
        assert status == 1, err
        assert f"schema name {name!r} is not allowed: it is PostgreSQL's own" in err
        assert err.count("\n") == 1


def test_public_stays_an_allowed_schema() -> None:
    from neardup.storage.names import check_schema_name

    assert check_schema_name("public") == "public"


def test_dedup_writes_tsv_back_as_tsv_quotes_and_all(cli: Run, tmp_path: Path) -> None:
    # Before: TSV rows were written back as CSV, quoted: `"""Hello,"" he said"` in a .tsv file.
    text = '"Hello," he said, and the storm cut power to 40,000 homes across the valley'
    source = tmp_path / "in.tsv"
    source.write_text(f"id\ttext\tsource\nt1\t{text}\tweb\nt2\t{text}\tnews\nt3\tsomething else\tweb\n")
    assert cli("init", "--threshold", "0.5")[0] == 0
    assert cli("add", str(source))[0] == 0
    out = tmp_path / "out.tsv"
    status, _, err = cli("dedup", str(source), "--out", str(out))
    assert status == 0, err
    assert out.read_text() == f"id\ttext\tsource\nt1\t{text}\tweb\nt3\tsomething else\tweb\n"
    mixed = tmp_path / "mixed.csv"
    status, _, err = cli("dedup", str(source), "-", "--out", str(mixed), stdin='{"id": "j1", "text": "x"}\n')
    assert status == 0, err
    assert mixed.read_text().startswith(f'id,text,source\nt1,"{text.replace(chr(34), chr(34) * 2)}",web\n')
