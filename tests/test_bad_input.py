"""Bad input through `neardup add`: each kind is refused naming its file, line and field, with exit
status 1 and nothing of the failed batch written; `--skip-bad` leaves it out, counts it and goes on.
Every case runs against a real PostgreSQL, with committed batches already in the collection."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._state import collection_state
from tests.conftest import Run

pytestmark = pytest.mark.distributed_variant

GOOD = [{"id": f"ok-{i}", "text": f"a perfectly ordinary document, number {i} of several"} for i in range(4)]
LATER = {"id": "after", "text": "a good record after the bad one, in the same batch"}
# A 50 MB document: five times the default --max-text-length of 10 M characters.
BIG_CHARS = 50 * 1024 * 1024


def _line(record: object) -> bytes:
    return json.dumps(record).encode() + b"\n"


@dataclass(frozen=True)
class Case:
    """A bad input: the file's bytes (the bad record on line 2 unless said otherwise), the text the
    error must contain (``{f}`` is the file), and how many records --skip-bad rejects."""

    name: str
    suffix: str
    content: Callable[[], bytes]
    message: str
    rejected: int = 1
    fatal: bool = False  # a whole-file problem that --skip-bad cannot step past


def _jsonl_with(bad: bytes) -> Callable[[], bytes]:
    return lambda: _line(GOOD[2]) + bad + _line(LATER)


def _csv(text: str) -> Callable[[], bytes]:
    return lambda: text.encode()


def _cut_gzip() -> bytes:
    whole = gzip.compress(
        b"".join(_line({"id": f"z{i}", "text": f"gzip record {i} " * 40}) for i in range(400))
    )
    return whole[: len(whole) // 2]


CASES = [
    Case(
        "invalid-utf8",
        ".jsonl",
        _jsonl_with(b'{"id": "latin", "text": "caf\xe9"}\n'),
        "{f}:2: not valid UTF-8",
    ),
    Case("malformed-json", ".jsonl", _jsonl_with(b'{"id": "x", "text": \n'), "{f}:2: not valid JSON"),
    Case("not-an-object", ".jsonl", _jsonl_with(b'["id", "text"]\n'), "{f}:2: expected a JSON object"),
    Case("no-id", ".jsonl", _jsonl_with(_line({"text": "no id here"})), "{f}:2: field 'id' is missing"),
    Case("no-text", ".jsonl", _jsonl_with(_line({"id": "t"})), "{f}:2: field 'text' is missing"),
    Case(
        "null-id",
        ".jsonl",
        _jsonl_with(_line({"id": None, "text": "t"})),
        "{f}:2: field 'id' must be a string",
    ),
    Case(
        "list-id",
        ".jsonl",
        _jsonl_with(_line({"id": ["a"], "text": "t"})),
        "{f}:2: field 'id' must be a string",
    ),
    Case(
        "float-id",
        ".jsonl",
        _jsonl_with(_line({"id": 1.5, "text": "t"})),
        "{f}:2: field 'id' must be a string",
    ),
    Case(
        "bool-id",
        ".jsonl",
        _jsonl_with(_line({"id": True, "text": "t"})),
        "{f}:2: field 'id' must be a string",
    ),
    Case(
        "empty-id",
        ".jsonl",
        _jsonl_with(_line({"id": "", "text": "t"})),
        "{f}:2: field 'id' must be a non-empty",
    ),
    Case(
        "long-id",
        ".jsonl",
        _jsonl_with(_line({"id": "x" * 3000, "text": "t"})),
        "{f}:2: field 'id' is longer",
    ),
    Case(
        "number-text",
        ".jsonl",
        _jsonl_with(_line({"id": "n", "text": 5})),
        "{f}:2: field 'text' must be a string",
    ),
    Case(
        "nul-text", ".jsonl", _jsonl_with(_line({"id": "z", "text": "a\x00b"})), "field 'text' contains a NUL"
    ),
    Case(
        "nul-id",
        ".jsonl",
        _jsonl_with(_line({"id": "a\x00b", "text": "t"})),
        "{f}:2 (id 'a\\x00b'): field 'id'",
    ),
    Case(
        "nul-in-metadata",
        ".jsonl",
        _jsonl_with(_line({"id": "m", "text": "t", "note": "a\x00b"})),
        "{f}:2 (id 'm'): field 'meta' contains a NUL",
    ),
    Case(
        "lone-surrogate",
        ".jsonl",
        _jsonl_with(b'{"id": "s", "text": "half a pair: \\ud800"}\n'),
        "{f}:2 (id 's'): field 'text' is not valid Unicode",
    ),
    Case(
        "repeated-id",
        ".jsonl",
        _jsonl_with(_line({"id": GOOD[2]["id"], "text": "another text"})),
        "{f}:2: id 'ok-2' repeats {f}:1",
    ),
    Case(
        "50MB-document",
        ".jsonl",
        _jsonl_with(_line({"id": "huge", "text": "word " * (BIG_CHARS // 5)})),
        "{f}:2 (id 'huge'): field 'text' has 52,428,800 characters, over the limit",
    ),
    Case(
        "csv-short-row",
        ".csv",
        _csv('id,text\nc1,"a csv text"\nc2\nc3,"more"\n'),
        "{f}:3: expected 2 columns, got 1",
    ),
    Case(
        "csv-no-text-column",
        ".csv",
        _csv("id,body\nc1,a text\n"),
        "{f}:1: column 'text' is missing",
        fatal=True,
    ),
    Case(
        "deeply-nested-json",
        ".jsonl",
        _jsonl_with(b'{"id": "d", "text": "t", "n": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"),
        "{f}:2: JSON nested too deeply to read",
    ),
    Case(
        "huge-number",
        ".jsonl",
        _jsonl_with(b'{"id": "h", "text": "t", "n": ' + b"9" * 5000 + b"}\n"),
        "{f}:2: not readable JSON",
    ),
    Case(
        "utf16-file",
        ".jsonl",
        lambda: (json.dumps(GOOD[2]) + "\n").encode("utf-16"),
        "{f}: the file is UTF-16",
        fatal=True,
    ),
    Case("empty-file", ".jsonl", lambda: b"", "{f}: the file is empty"),
    Case(
        "repeated-key",
        ".jsonl",
        _jsonl_with(b'{"id": "k", "text": "first", "text": "second"}\n'),
        "{f}:2: key 'text' appears twice in one JSON object",
    ),
    Case(
        "json-array",
        ".json",
        lambda: json.dumps([GOOD[2], LATER]).encode() + b"\n",
        "{f}:1: expected a JSON object, got a JSON array: neardup reads JSON Lines, one object a line",
    ),
    Case(
        "csv-quote-never-closed",
        ".csv",
        _csv('id,text\nc1,"a csv text"\nc2,"unbalanced quote start\nc3,more\nc4,last\n'),
        "{f}:3: a quoted field opens on this line and is never closed (the file ends inside it, on line 5)",
    ),
    Case(
        "csv-quote-swallows-lines",
        ".csv",
        _csv('id,text\nc1,"a csv text"\nc2,"unbalanced\nc3,more\nc4,"last"\nc5,after\n'),
        "{f}:3: a quoted field opens on this line and runs on to line 5",
    ),
    Case(
        "bzip2-named-gz",
        ".jsonl.gz",
        lambda: bz2.compress(_line(GOOD[2])),
        "{f}: bzip2-compressed, not gzip",
        fatal=True,
    ),
    Case("text-named-gz", ".jsonl.gz", lambda: _line(GOOD[2]), "{f}: not gzip (named .gz", fatal=True),
    Case("gzip-cut-short", ".jsonl.gz", _cut_gzip, "{f}: compressed data is damaged or cut short after line"),
]


def _state(database_url: str, schema: str, collection: str) -> tuple[object, ...]:
    return collection_state(database_url, schema, collection).comparable()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_by_place_and_nothing_half_written(
    case: Case, cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    collection = cli.collection
    assert cli("init")[0] == 0
    committed = tmp_path / "committed.jsonl"
    committed.write_bytes(b"".join(_line(r) for r in GOOD[:2]))
    assert cli("add", str(committed), "--batch-size", "1")[0] == 0
    before = _state(database_url, schema, collection)
    assert len(before[0]) == 2  # type: ignore[arg-type]

    bad = tmp_path / f"bad{case.suffix}"
    bad.write_bytes(case.content())
    status, _, err = cli("add", str(bad))
    assert status == 1
    assert err.count("\n") == 1
    assert err.startswith("neardup: error: ")
    assert case.message.format(f=bad) in err
    # The records read before the bad one were in the unfinished batch: none of them is stored.
    assert _state(database_url, schema, collection) == before

    rejects = tmp_path / "rejects.jsonl"
    status, _, err = cli("add", str(bad), "--skip-bad", "--rejects", str(rejects))
    if case.fatal:
        assert status == 1
        assert case.message.format(f=bad) in err
        assert _state(database_url, schema, collection) == before
        return
    assert status == 0, err
    assert f"rejected {case.rejected}," in err
    rejected = [json.loads(line) for line in rejects.read_text(encoding="utf-8").splitlines()]
    assert len(rejected) == case.rejected
    assert case.message.format(f=bad) in rejected[0]["reason"]
    docs = {row[0] for row in collection_state(database_url, schema, collection).documents}
    assert {r["id"] for r in GOOD[:2]} <= docs  # what was committed before is intact
    assert len(docs) == 2 + int(err.split("added ")[1].split(",")[0])


def test_a_50_mb_document_is_stored_whole_when_the_limit_allows_it(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    words = [f"w{i % 7919}" for i in range(BIG_CHARS // 6)]
    text = " ".join(words)
    cut = len(words) // 100
    edited = " ".join([*words[:cut], "changed", *words[cut + 1 :]])
    source = tmp_path / "big.jsonl"
    source.write_bytes(_line({"id": "big", "text": text}) + _line({"id": "big-edited", "text": edited}))
    assert cli("init")[0] == 0
    status, _, err = cli("add", str(source), "--max-text-length", str(60 * 1024 * 1024))
    assert status == 0, err
    assert "added 2" in err
    docs = collection_state(database_url, schema, cli.collection).documents
    assert [(d[0], d[1]) for d in docs] == [
        ("big", hashlib.md5(text.encode()).hexdigest()),
        ("big-edited", hashlib.md5(edited.encode()).hexdigest()),
    ]
    status, out, _ = cli("pairs", "--format", "jsonl")
    assert [(p["id_a"], p["id_b"]) for p in map(json.loads, out.splitlines())] == [("big", "big-edited")]


@pytest.mark.parametrize("command", ["add", "query", "check", "dedup"])
def test_a_max_text_length_past_what_postgresql_can_store_is_refused_before_reading(
    cli: Run, tmp_path: Path, command: str
) -> None:
    # 2**63 passed as a positive count, and then overflowed the line reader's bound.
    from neardup.text_limits import LONGEST_TEXT

    source = tmp_path / "one.jsonl"
    source.write_bytes(_line({"id": "a", "text": "some text"}))
    assert cli("init", "--exist-ok")[0] == 0
    for too_long in (str(2**63), str(LONGEST_TEXT + 1)):
        argv = ["--file", str(source)] if command == "query" else [str(source)]
        status, _, err = cli(command, *argv, "--max-text-length", too_long)
        assert status == 2, err
        assert f"max_text_length must be an integer in [1, {LONGEST_TEXT:,}]" in err
        assert "Traceback" not in err
    status, _, err = cli("add", str(source), "--max-text-length", str(LONGEST_TEXT))
    assert status == 0, err


def test_empty_and_blank_texts_are_stored_counted_and_kept_by_dedup(
    cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    # The Reuters-21578 archive has a story with an empty body: `neardup add` used to stop at it.
    source = tmp_path / "with-empty.jsonl"
    blank = {"id": "w", "text": " \t\n\u00a0\u2003 "}
    source.write_bytes(b"".join(_line(r) for r in [GOOD[0], {"id": "e", "text": ""}, blank, GOOD[1]]))
    assert cli("init")[0] == 0
    status, _, err = cli("add", str(source))
    assert status == 0, err
    assert err.startswith("added 4, replaced 0, unchanged 0, empty 2, rejected 0, new text pairs 1 in ")
    assert err.count("\n") == 1
    docs = {row[0] for row in collection_state(database_url, schema, cli.collection).documents}
    assert docs == {"ok-0", "ok-1", "e", "w"}
    assert cli("query", "--text", "")[1] == "id\tjaccard\n"  # nobody's duplicate, not even each other's
    out = tmp_path / "dedup.jsonl"
    assert cli("dedup", str(source), "--out", str(out))[0] == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [
        "ok-0",
        "e",
        "w",
    ]  # ok-1 is ok-0's near-copy
    status, _, err = cli("add", str(source))
    assert err.startswith("added 0, replaced 0, unchanged 4, empty 0,")  # empty counts what was written


BOM = b"\xef\xbb\xbf"
BOM_TEXT = "a document exported by a Windows tool with a byte-order mark"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bom.jsonl", BOM + _line({"id": "bom", "text": BOM_TEXT})),
        ("bom.csv", BOM + f'id,text\nbom,"{BOM_TEXT}"\n'.encode()),
        ("bom.tsv", BOM + f"id\ttext\nbom\t{BOM_TEXT}\n".encode()),
        ("bom.txt", BOM + BOM_TEXT.encode() + b"\n"),
        ("bom.jsonl.gz", gzip.compress(BOM + _line({"id": "bom", "text": BOM_TEXT}))),
        ("folder", BOM + BOM_TEXT.encode()),
        ("-", BOM + _line({"id": "bom", "text": BOM_TEXT})),
    ],
)
def test_a_utf8_byte_order_mark_opening_a_file_is_skipped(
    name: str, content: bytes, cli: Run, tmp_path: Path, database_url: str, schema: str
) -> None:
    assert cli("init")[0] == 0
    path = tmp_path / name
    if name == "folder":
        path.mkdir()
        (path / "bom").write_bytes(content)
        argument = str(path)
    elif name == "-":
        argument = "-"
    else:
        path.write_bytes(content)
        argument = str(path)
    status, _, err = cli("add", argument, stdin=content.decode("utf-8") if name == "-" else None)
    assert status == 0, err
    docs = collection_state(database_url, schema, cli.collection).documents
    expected_id = f"{path}:1" if name == "bom.txt" else "bom"
    assert [(d[0], d[1]) for d in docs] == [(expected_id, hashlib.md5(BOM_TEXT.encode()).hexdigest())]
    query = tmp_path / "query.txt"
    query.write_bytes(BOM + BOM_TEXT.encode())
    assert cli("query", "--file", str(query))[1].splitlines()[1:] == [f"{expected_id}\t1.0"]
