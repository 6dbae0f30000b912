"""Reading input files by their standards (no database): TSV without quoting, CSV by RFC 4180 with
an unclosed quote refused at the line it opened on, lines split at ``\\n`` only, JSON objects with
a key given twice refused, compressed files named for what they are, and reading bounded in memory
by --max-text-length whatever the file holds."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.inputs import read_inputs
from neardup.readers import (
    BadRecord,
    SourceRecord,
    read_records,
    read_text,
)
from neardup.text_limits import record_limit, text_limit


def _read(path: Path, **options: object) -> list[SourceRecord]:
    return list(read_inputs([str(path)], **options))  # type: ignore[arg-type]


def _refusal(path: Path, **options: object) -> str:
    with pytest.raises(InputError) as refused:
        _read(path, **options)
    return str(refused.value)


# -- TSV: tab-separated values, no quoting --------------------------------------------------------


def test_tsv_has_no_quoting_a_quote_is_an_ordinary_character(tmp_path: Path) -> None:
    # Before: read with CSV quoting, q1's text lost its quotes and q3's open quote swallowed q4 and q5.
    source = tmp_path / "quotes.tsv"
    rows = [
        ("q1", '"Hello," he said'),
        ("q2", "plain"),
        ("q3", '"unbalanced quote start'),
        ("q4", 'she said "no"'),
        ("q5", 'a doubled "" quote stays doubled'),
    ]
    source.write_text("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in rows), encoding="utf-8")
    got = _read(source)
    assert [(r.id, r.text) for r in got] == rows
    assert [r.where for r in got] == [f"{source}:{n}" for n in range(2, 7)]


def test_tsv_rows_end_at_crlf_and_other_columns_are_metadata(tmp_path: Path) -> None:
    source = tmp_path / "crlf.tsv"
    source.write_bytes(b'id\ttext\tsource\r\na\t"x" y\tweb\r\nb\tz,\tnews\r\n')
    got = _read(source)
    assert [(r.id, r.text, r.meta) for r in got] == [
        ("a", '"x" y', {"source": "web"}),
        ("b", "z,", {"source": "news"}),
    ]


def test_a_tsv_row_with_another_number_of_fields_is_named(tmp_path: Path) -> None:
    source = tmp_path / "short.tsv"
    source.write_text('id\ttext\na\tone\nb\t"two\tcolumns"\nc\tthree\n')
    assert f"{source}:3: expected 2 columns, got 3" in _refusal(source)
    bad: list[BadRecord] = []
    assert [r.id for r in read_records([str(source)], on_bad=bad.append)] == ["a", "c"]
    assert [b.where for b in bad] == [f"{source}:3"]


# -- CSV: RFC 4180 ----------------------------------------------------------------------------------


def test_csv_quoted_fields_hold_commas_doubled_quotes_and_line_breaks(tmp_path: Path) -> None:
    source = tmp_path / "rfc.csv"
    source.write_bytes(b'id,text\r\nc1,"a, b"\r\nc2,"say ""hi"""\r\nc3,"two\r\nlines"\r\nc4,plain\r\n')
    got = _read(source)
    assert [(r.id, r.text) for r in got] == [
        ("c1", "a, b"),
        ("c2", 'say "hi"'),
        ("c3", "two\r\nlines"),
        ("c4", "plain"),
    ]
    assert [r.where for r in got] == [f"{source}:{n}" for n in (2, 3, 4, 6)]  # a record's first line


def test_a_csv_quote_left_open_to_the_end_is_refused_naming_its_line(tmp_path: Path) -> None:
    # Before: the rest of the file became c3's text, and the command said it added 3.
    source = tmp_path / "open.csv"
    source.write_text('id,text\nc1,one\nc2,two\nc3,"unbalanced quote start\nc4,four\nc5,five\n')
    message = _refusal(source)
    assert message.startswith(f"{source}:4: a quoted field opens on this line and is never closed")
    assert "on line 6" in message
    bad: list[BadRecord] = []
    assert [r.id for r in read_records([str(source)], on_bad=bad.append)] == ["c1", "c2"]
    assert [b.where for b in bad] == [f"{source}:4"]


def test_a_csv_quote_that_swallows_lines_and_closes_into_text_names_where_it_opened(tmp_path: Path) -> None:
    source = tmp_path / "swallow.csv"
    source.write_text('id,text\nc1,"unbalanced\nc2,two\nc3,"three"\nc4,four\n')
    message = _refusal(source)
    assert message.startswith(f"{source}:2: a quoted field opens on this line and runs on to line 4")
    bad: list[BadRecord] = []
    assert [r.id for r in read_records([str(source)], on_bad=bad.append)] == ["c4"]
    assert [b.where for b in bad] == [f"{source}:2"]


def test_text_after_a_closing_quote_on_one_line_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "after.csv"
    source.write_text('id,text\nc1,"quoted"tail\n')
    assert _refusal(source).startswith(f"{source}:2: not a readable row (',' expected after '\"')")


def test_an_unreadable_csv_header_is_refused_even_with_on_bad(tmp_path: Path) -> None:
    source = tmp_path / "header.csv"
    source.write_text('id,"text\nc1,one\n')
    with pytest.raises(InputError, match="a quoted field opens on this line and is never closed"):
        list(read_records([str(source)], on_bad=lambda bad: None))


# Any text a field can hold in a file: no NUL (the documents refuse it later), no lone surrogate
# (not UTF-8).
FIELD = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=30)
ANY_FOLDER = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@ANY_FOLDER
@given(rows=st.lists(st.tuples(FIELD.filter(bool), FIELD, FIELD), max_size=6))
def test_what_an_rfc_4180_writer_writes_is_read_back_exactly(
    rows: list[tuple[str, str, str]], tmp_path: Path
) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180's own line end
    writer.writerow(["id", "text", "note"])
    writer.writerows(rows)
    source = tmp_path / "written.csv"
    source.write_bytes(out.getvalue().encode("utf-8"))
    got = _read(source)
    assert [(r.id, r.text, (r.meta or {}).get("note")) for r in got] == rows


@ANY_FOLDER
@given(
    rows=st.lists(
        st.tuples(*(FIELD.filter(lambda f: not {"\t", "\n"} & set(f) and not f.endswith("\r")),) * 2).filter(
            lambda row: row[0] != ""
        ),
        max_size=6,
    )
)
def test_any_tsv_fields_without_tab_or_newline_are_read_verbatim(
    rows: list[tuple[str, str]], tmp_path: Path
) -> None:
    source = tmp_path / "written.tsv"
    source.write_bytes(("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in rows)).encode("utf-8"))
    assert [(r.id, r.text) for r in _read(source)] == rows


# -- lines end at \n only -------------------------------------------------------------------------

# What str.splitlines() breaks at besides \n and \r; JSON allows those beyond U+001F raw in strings.
SPLITLINES_ONLY = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def test_jsonl_lines_end_at_newline_only(tmp_path: Path) -> None:
    source = tmp_path / "seps.jsonl"
    texts = [f"before{c}after" for c in "\x85\u2028\u2029"]
    source.write_text(
        "".join(
            json.dumps({"id": f"s{n}", "text": t}, ensure_ascii=False) + "\n" for n, t in enumerate(texts)
        )
    )
    assert "\u2028" in source.read_text(encoding="utf-8")  # raw, not escaped
    assert [(r.id, r.text) for r in _read(source)] == [(f"s{n}", t) for n, t in enumerate(texts)]


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".txt"])
def test_table_and_text_lines_end_at_newline_only(suffix: str, tmp_path: Path) -> None:
    source = tmp_path / f"seps{suffix}"
    texts = [f"before{c}after" for c in SPLITLINES_ONLY]
    if suffix == ".txt":
        source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        expected = [(f"{source}:{n}", t) for n, t in enumerate(texts, 1)]
    else:
        separator = "\t" if suffix == ".tsv" else ","
        source.write_text(
            f"id{separator}text\n" + "".join(f"s{n}{separator}{t}\n" for n, t in enumerate(texts)),
            encoding="utf-8",
        )
        expected = [(f"s{n}", t) for n, t in enumerate(texts)]
    assert [(r.id, r.text) for r in _read(source)] == expected


# -- JSON: a key twice, an array ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('{"id": "k", "text": "first", "text": "second"}', "text"),
        ('{"id": "k", "id": "k2", "text": "t"}', "id"),
        ('{"id": "k", "text": "t", "meta": {"a": 1, "a": 2}}', "a"),
    ],
)
def test_a_key_given_twice_is_refused_naming_it_and_the_line(line: str, key: str, tmp_path: Path) -> None:
    # Before: the last value won silently.
    source = tmp_path / "twice.jsonl"
    source.write_text('{"id": "fine", "text": "t"}\n' + line + "\n")
    assert f"{source}:2: key {key!r} appears twice in one JSON object" in _refusal(source)


def test_a_json_array_is_named_as_one_with_the_way_out(tmp_path: Path) -> None:
    # Before: "not valid JSON (Expecting value, column 2)" for a .json file holding an array.
    records = [{"id": "a", "text": "one"}, {"id": "b", "text": "two"}]
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(records, indent=2))
    message = _refusal(pretty)
    assert message.startswith(f"{pretty}:1: expected a JSON object, got the start of a JSON array")
    assert "one object a line" in message
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(records) + "\n")
    assert _refusal(compact).startswith(f"{compact}:1: expected a JSON object, got a JSON array")


# -- compression ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "compress", "message"),
    [
        ("in.jsonl.gz", bz2.compress, "bzip2-compressed, not gzip"),
        ("in.jsonl.gz", lzma.compress, "xz-compressed, not gzip"),
        ("in.jsonl.bz2", bz2.compress, "bzip2-compressed, not gzip"),
        ("in.jsonl.gz", lambda data: data, "not gzip (named .gz"),
    ],
)
def test_a_file_that_is_not_gzip_is_named_so(
    name: str, compress: Callable[[bytes], bytes], message: str, tmp_path: Path
) -> None:
    # Before: a bzip2 file named .gz was read as text and refused as "not valid UTF-8".
    source = tmp_path / name
    source.write_bytes(compress(b'{"id": "a", "text": "t"}\n'))
    assert _refusal(source).startswith(f"{source}: {message}")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / name).write_bytes(source.read_bytes())
    assert message in _refusal(folder)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        read_text(str(source))


def test_gzip_is_still_found_by_its_content(tmp_path: Path) -> None:
    source = tmp_path / "named-plainly.jsonl"
    source.write_bytes(gzip.compress(b'{"id": "a", "text": "t"}\n'))
    assert [r.id for r in _read(source)] == ["a"]


# -- reading is bounded ---------------------------------------------------------------------------


def test_the_bounds_follow_max_text_length() -> None:
    assert record_limit(1000) == 12 * 1000 + 2**20
    assert text_limit(1000) == 4 * 1000 + 3


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv", ".txt"])
def test_a_line_longer_than_the_bound_stops_reading_there(suffix: str, tmp_path: Path) -> None:
    limit = record_limit(10)
    source = tmp_path / f"long{suffix}"
    header = b"" if suffix in (".jsonl", ".txt") else (b"id,text\n" if suffix == ".csv" else b"id\ttext\n")
    source.write_bytes(header + b"x" * (limit + 100))
    line = 1 if not header else 2
    message = _refusal(source, max_text_length=10)
    assert message.startswith(f"{source}:{line}: the line is longer than {limit:,} bytes")
    assert "(--max-text-length)" in message
    # Fatal even with on_bad: where the next record starts is past the bound.
    with pytest.raises(InputError, match="longer than"):
        list(read_records([str(source)], on_bad=lambda bad: None, max_text_length=10))


def test_a_csv_record_spread_over_lines_is_bounded_as_a_whole(tmp_path: Path) -> None:
    source = tmp_path / "open.csv"
    with source.open("w") as f:
        f.write('id,text\nc1,one\nc2,"never closed\n')
        for _ in range(40_000):  # 1.5 MB, over the bound of 1 MiB and 12 bytes
            f.write("a short line of the rest of the file\n")
    message = _refusal(source, max_text_length=1)
    assert message.startswith(f"{source}:3: the record, in a quoted field opened on line 3, is longer than")


def test_a_line_within_the_bound_is_read_and_its_text_checked_later(tmp_path: Path) -> None:
    source = tmp_path / "escaped.jsonl"
    text = "\U0001f600" * 1000  # 12 bytes a character as json.dumps escapes it
    source.write_text(json.dumps({"id": "e", "text": text}) + "\n")
    assert [r.text for r in _read(source, max_text_length=1000)] == [text]


def test_read_text_stops_at_the_bound(tmp_path: Path) -> None:
    source = tmp_path / "query.txt"
    source.write_text("é" * 10)
    assert read_text(str(source), 10) == "é" * 10
    with pytest.raises(InputError, match="the text has 10 characters, over the limit of 9"):
        read_text(str(source), 9)
    source.write_bytes(b"\x00" * 1000)
    with pytest.raises(InputError, match=f"{source}: the text is longer than 43 bytes"):
        read_text(str(source), 10)


def test_a_directory_file_longer_than_the_bound_is_a_bad_record(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"y" * 1000)
    (tmp_path / "small").write_bytes(b"fine")
    bad: list[BadRecord] = []
    got = list(read_inputs([str(tmp_path)], on_bad=bad.append, max_text_length=10))
    assert [(r.id, r.text) for r in got] == [("small", "fine")]
    assert [b.where for b in bad] == [str(tmp_path / "big")]
    assert "the text is longer than 43 bytes" in bad[0].reason
