"""Parquet and Arrow files read as records (issue 40): the same records as the same rows in JSONL,
bad rows named by file, row group (record batch) and row, bad columns named before a row is read,
directories of Parquet files, and memory that follows the batch (measured in a process of its own)."""

from __future__ import annotations

import datetime
import decimal
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.inputs import expand, kind_of, read_inputs
from neardup.readers import BadRecord, checked

SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def _records(*paths: Path, **kwargs: Any) -> list[tuple[str, str, Any]]:
    return [(r.id, r.text, r.meta) for r in read_inputs([str(p) for p in paths], **kwargs)]


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
_rows = st.lists(
    st.tuples(_text.filter(bool), _text, st.one_of(st.none(), st.integers(-(2**62), 2**62)), _text),
    max_size=30,
    unique_by=lambda r: r[0],
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, group=st.integers(1, 7))
def test_parquet_and_arrow_give_the_records_jsonl_gives(
    tmp_path: Path, rows: list[tuple[str, str, int | None, str]], group: int
) -> None:
    names, types = ("id", "text", "n", "s"), (pa.string(), pa.string(), pa.int64(), pa.string())
    table = pa.table(
        {n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types, strict=True))}
    )
    parquet, arrow, jsonl = tmp_path / "t.parquet", tmp_path / "t.arrow", tmp_path / "t.jsonl"
    pq.write_table(table, parquet, row_group_size=group)
    feather.write_feather(table, arrow, chunksize=group)
    jsonl.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in table.to_pylist()))
    if not rows:  # an empty file is refused in every format
        for path in (jsonl, parquet, arrow):
            with pytest.raises(InputError, match="the file is empty"):
                _records(path)
        return
    expected = _records(jsonl)
    assert len(expected) == len(rows)
    assert _records(parquet) == expected
    assert _records(arrow) == expected


def _table(**columns: Any) -> pa.Table:
    return pa.table(columns)


def test_a_null_id_or_text_is_named_by_file_row_group_and_row(tmp_path: Path) -> None:
    path = tmp_path / "news.parquet"
    pq.write_table(_table(id=["a", "b", None, "d", "e"], text=["t"] * 4 + [None]), path, row_group_size=2)
    with pytest.raises(InputError, match=r"news\.parquet: row group 1, row 0: column 'id' is null$"):
        list(read_inputs([str(path)]))
    bad: list[BadRecord] = []
    kept = list(read_inputs([str(path)], on_bad=bad.append))
    assert [r.id for r in kept] == ["a", "b", "d"]
    assert [b.where for b in bad] == [f"{path}: row group 1, row 0", f"{path}: row group 2, row 0"]
    assert "column 'text' is null" in bad[1].reason


def test_a_repeated_id_names_both_rows_across_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a.parquet", tmp_path / "b.arrow"
    pq.write_table(_table(id=["x", "y", "z"], text=["1", "2", "3"]), first, row_group_size=2)
    feather.write_feather(_table(id=["w", "z"], text=["4", "5"]), second)
    with pytest.raises(InputError) as caught:
        list(checked(read_inputs([str(first), str(second)])))
    assert str(caught.value) == f"{second}: record batch 0, row 1: id 'z' repeats {first}: row group 1, row 0"


def test_bad_columns_are_refused_before_a_row_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(_table(id=[1.5], text=["t"], body=[b"raw"], n=[3]), path)
    with pytest.raises(InputError, match=r"c\.parquet: column 'nothing' is missing \(columns: 'id', 'text'"):
        list(read_inputs([str(path)], text_field="nothing"))
    with pytest.raises(InputError, match=r"column 'id' \(the id\) is double, not a string or an integer"):
        list(read_inputs([str(path)]))
    with pytest.raises(InputError, match=r"column 'body' \(the text\) is binary, not a string \(decode"):
        list(read_inputs([str(path)], id_field="n", text_field="body"))
    with pytest.raises(InputError, match=r"column 'n' \(the text\) is int64, not a string$"):
        list(read_inputs([str(path)], id_field="text", text_field="n"))
    with pytest.raises(InputError, match=r"column 'body' is binary, which metadata .* --meta-fields"):
        list(read_inputs([str(path)], id_field="n"))
    assert _records(path, id_field="n", meta_fields=["id"]) == [("3", "t", {"id": 1.5})]


def test_metadata_columns_as_json_holds_them(tmp_path: Path) -> None:
    path = tmp_path / "m.parquet"
    table = _table(
        id=pa.array([7, 8], pa.int32()),
        text=pa.array(["one", "two"]).dictionary_encode(),
        when=[datetime.datetime(2024, 5, 1, 12, 30), None],
        day=[datetime.date(2024, 5, 1)] * 2,
        price=[decimal.Decimal("1.25"), decimal.Decimal("2.50")],
        tags=[["a", "b"], []],
        where_=[{"lat": 1.5, "lon": 2.0}, None],
        lang=pa.array(["en", "fr"]).dictionary_encode(),
    )
    pq.write_table(table, path)
    one, two = _records(path)
    assert one == (
        "7",
        "one",
        {
            "when": "2024-05-01 12:30:00.000000",
            "day": "2024-05-01",
            "price": "1.25",
            "tags": ["a", "b"],
            "where_": {"lat": 1.5, "lon": 2.0},
            "lang": "en",
        },
    )
    assert two[2]["when"] is None
    assert two[2]["where_"] is None
    assert _records(path, meta_fields=["lang", "id"]) == [
        ("7", "one", {"lang": "en"}),
        ("8", "two", {"lang": "fr"}),
    ]
    assert _records(path, meta_fields=[]) == [("7", "one", None), ("8", "two", None)]


def test_meta_fields_choose_the_fields_of_text_formats_too(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text(
        '{"id": "a", "text": "x", "lang": "en", "url": "u"}\n{"id": "b", "text": "y", "url": "v"}\n'
    )
    assert _records(path, meta_fields=["lang"]) == [("a", "x", {"lang": "en"}), ("b", "y", None)]


def test_a_directory_of_parquet_files_is_read_in_order_without_its_markers(tmp_path: Path) -> None:
    folder = tmp_path / "crawl"
    (folder / "lang=en").mkdir(parents=True)
    pq.write_table(_table(id=["b1"], text=["two"]), folder / "lang=en" / "part-1.parquet")
    pq.write_table(_table(id=["a1"], text=["one"]), folder / "part-0.parquet")
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.parquet.crc").write_bytes(b"\x00crc")
    assert kind_of(str(folder), None) == "directory"
    assert [r[0] for r in _records(folder)] == ["b1", "a1"]  # lang=en/part-1 sorts before part-0
    (folder / "notes.txt").write_text("a text file among them")
    with pytest.raises(InputError, match=r"notes\.txt: not a Parquet file that can be read"):
        list(read_inputs([str(folder)], "parquet"))  # --format parquet: every file is Parquet


def test_an_arrow_stream_and_a_file_that_is_neither_format(tmp_path: Path) -> None:
    stream = tmp_path / "s.arrows"
    table = _table(id=["a", "b", "c"], text=["x", "y", None])
    with pa.OSFile(str(stream), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=2):
            writer.write_batch(batch)
    with pytest.raises(InputError, match=r"s\.arrows: record batch 1, row 0: column 'text' is null"):
        list(read_inputs([str(stream)]))
    fake = tmp_path / "fake.parquet"
    fake.write_text('{"id": "a", "text": "not parquet"}\n')
    with pytest.raises(InputError, match=r"fake\.parquet: not a Parquet file that can be read"):
        list(read_inputs([str(fake)]))
    with pytest.raises(InputError, match=r"fake\.parquet: not an Arrow IPC file or stream"):
        list(read_inputs([str(fake)], "arrow"))


def test_memory_follows_the_batch_not_the_row_group(tmp_path: Path) -> None:
    # One row group of ~100 MB, uncompressed: without a read buffer its column chunk is read whole.
    path, small = tmp_path / "big.parquet", tmp_path / "small.parquet"
    rows = 66_000
    text = pa.array([f"{i:07d} " + "lorem ipsum dolor sit amet " * 55 for i in range(rows)])
    ids = pa.array([str(i) for i in range(rows)])
    pq.write_table(pa.table({"id": ids, "text": text}), path, row_group_size=rows, compression="none")
    pq.write_table(pa.table({"id": ids[:10], "text": text[:10]}), small)
    del text, ids
    assert pq.ParquetFile(path).num_row_groups == 1
    assert path.stat().st_size > 95 << 20
    # The small file first, so that what is measured is the big one's reading, not pyarrow's first
    # use; and the system allocator, since mimalloc (pyarrow's default) keeps pages it freed.
    script = textwrap.dedent(
        f"""
        import resource
        from neardup.inputs import read_inputs
        list(read_inputs([{str(small)!r}]))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        n = sum(1 for _ in read_inputs([{str(path)!r}]))
        print(n, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": SOURCE, "ARROW_DEFAULT_MEMORY_POOL": "system"},
    )
    assert done.returncode == 0, done.stderr
    count, grown = map(int, done.stdout.split())
    assert count == rows
    assert grown < 40 << 20, (
        f"reading grew by {grown >> 20} MiB for a {path.stat().st_size >> 20} MiB row group"
    )


def test_a_directory_gives_each_files_own_records_and_its_text_files_one_document_each(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mixed"
    (folder / "notes").mkdir(parents=True)
    pq.write_table(_table(id=["p1", "p2"], text=["one row", "two row"]), folder / "rows.parquet")
    (folder / "README").write_text("what this directory holds")  # no suffix: a text file
    (folder / "notes" / "day.md").write_text("a note")
    (folder / "wires.jsonl").write_text('{"id": "j1", "text": "a record"}\n{"id": "j2", "text": "another"}\n')
    (folder / "table.csv").write_text("id,text\nc1,a row of csv\n")
    (folder / ".hidden.txt").write_text("left out")
    assert [(f.path.removeprefix(str(folder)), f.kind) for f in expand([str(folder)])] == [
        ("/README", "document"),
        ("/notes/day.md", "document"),
        ("/rows.parquet", "parquet"),
        ("/table.csv", "csv"),
        ("/wires.jsonl", "jsonl"),
    ]
    assert _records(folder) == [
        ("README", "what this directory holds", None),
        ("notes/day.md", "a note", None),
        ("p1", "one row", None),
        ("p2", "two row", None),
        ("c1", "a row of csv", None),
        ("j1", "a record", None),
        ("j2", "another", None),
    ]
    # A file of no format read here is named before anything is read; --skip-bad leaves it out.
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    (folder / "tool.py").write_text("print('hello')")
    with pytest.raises(InputError, match=r"mixed/logo\.png, .*mixed/tool\.py: no format neardup reads"):
        _records(folder)
    bad: list[BadRecord] = []
    assert len(_records(folder, on_bad=bad.append)) == 7
    assert [Path(b.where).name for b in bad] == ["logo.png", "tool.py"]
    # A text file that is not text is named as such.
    (folder / "tool.py").unlink()
    (folder / "logo.png").rename(folder / "logo.txt")
    with pytest.raises(InputError, match=r"logo\.txt: not a text file \(not valid UTF-8"):
        _records(folder)


def test_bad_values_in_arrow_columns_are_named_by_file_row_group_row_and_column(tmp_path: Path) -> None:
    def not_utf8(*values: bytes) -> pa.Array:
        return pa.array(values, pa.binary()).view(pa.string())  # strings pyarrow never checked

    texts = tmp_path / "texts.parquet"
    pq.write_table(
        pa.table({"id": ["a", "b", "c"], "text": not_utf8(b"fine", b"bad \xff byte", b"ok")}), texts
    )
    with pytest.raises(
        InputError, match=r"texts\.parquet: row group 0, row 1: column 'text' is not valid UTF-8"
    ):
        _records(texts)
    bad: list[BadRecord] = []
    assert [r[0] for r in _records(texts, on_bad=bad.append)] == ["a", "c"]
    assert [b.where for b in bad] == [f"{texts}: row group 0, row 1"]
    meta = tmp_path / "meta.parquet"
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["x", "y"], "url": not_utf8(b"u", b"\xc3(")}),
        meta,
        row_group_size=1,
    )
    with pytest.raises(
        InputError, match=r"meta\.parquet: row group 1, row 0: column 'url' is not valid UTF-8"
    ):
        _records(meta)
    assert _records(meta, meta_fields=[]) == [("a", "x", None), ("b", "y", None)]  # url not read
    interval = tmp_path / "interval.arrow"
    when = pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval())
    feather.write_feather(pa.table({"id": ["a"], "text": ["x"], "when": when}), interval)
    with pytest.raises(InputError, match=r"interval\.arrow: column 'when' is month_day_nano_interval"):
        _records(interval)
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}), empty)
    with pytest.raises(InputError, match=r"empty\.parquet: the file is empty \(no rows\)"):
        _records(empty)
