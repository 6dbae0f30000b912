"""Checking records (no database but the last test): Document, the memory-flat record of ids
already read, and the one rule for a repeated id, the same in ``Index.add`` and the command line."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import readers, records
from neardup.errors import InputError
from neardup.readers import SourceRecord, checked
from neardup.records import Document, SeenIds, documents, to_document
from tests._state import collection_state

pytestmark = pytest.mark.distributed_variant


@given(
    ids=st.lists(st.text(max_size=4), max_size=60),
    merge_every=st.integers(1, 7),
    files=st.lists(
        st.sampled_from(["a.jsonl", "dir/b c.csv", "x:y.tsv", "record", "dir/f 0"]), min_size=60, max_size=60
    ),
)
def test_seen_ids_agree_with_a_dict_across_merges(ids: list[str], merge_every: int, files: list[str]) -> None:
    old = records._MERGE_EVERY
    records._MERGE_EVERY = merge_every
    try:
        seen = SeenIds()
        reference: dict[str, str] = {}
        for n, (doc_id, name) in enumerate(zip(ids, files, strict=False), 1):
            assert seen.place_of(doc_id) == reference.get(doc_id)
            if doc_id not in reference:
                where = f"{name}:{n}" if n % 3 else (f"{name} {n}" if n % 2 else name)
                seen.add(doc_id, where)
                reference[doc_id] = where
    finally:
        records._MERGE_EVERY = old


@given(st.text(st.sampled_from("ab: 0123456789"), max_size=20))
def test_a_place_is_given_back_exactly(where: str) -> None:
    seen = SeenIds()
    seen.add("x", where)
    assert seen.place_of("x") == where


@settings(max_examples=50)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a.jsonl:", "b c ", "x:", "record ", "f"]), st.text("0123456789", max_size=14)
        ),
        max_size=40,
    )
)
def test_one_reader_gives_each_place_back_exactly(places: list[tuple[str, str]]) -> None:
    """Places read one after another from one SeenIds (whose parse of ``file:line`` is shortcut for
    the same file as the last line) come back as they were given, leading zeros and long numbers
    included."""
    seen = SeenIds()
    for n, (name, number) in enumerate(places):
        seen.add(f"id{n}", name + number)
    assert [seen.place_of(f"id{n}") for n in range(len(places))] == [name + num for name, num in places]


def test_seen_ids_find_every_repeat_among_many_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough ids that the bitmap in front of the sorted arrays grows several times: every id read
    is found with its place, and ids never read are not (each one checked, so a bitmap bit left
    unset or a lookup that stopped at the bitmap would show)."""
    monkeypatch.setattr(records, "_MERGE_EVERY", 997)
    monkeypatch.setattr(records, "_MIN_BITMAP_BYTES", 64)
    seen = SeenIds()
    sizes = []
    for i in range(20_000):
        seen.add(f"doc-{i}", f"in.jsonl:{i + 1}")
        sizes.append(len(seen._bitmap))
    assert len(set(sizes)) >= 4  # the bitmap grew with the ids
    assert all(seen.place_of(f"doc-{i}") == f"in.jsonl:{i + 1}" for i in range(20_000))
    assert not any(seen.place_of(f"other-{i}") for i in range(20_000))


def test_a_repeat_far_apart_is_named_with_its_first_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_MERGE_EVERY", 10)
    source = [SourceRecord(f"id{i}", f"text {i}", None, f"in.jsonl:{i + 1}", "") for i in range(100)]
    source.append(SourceRecord("id7", "again", None, "other.jsonl:3", ""))
    with pytest.raises(InputError, match=r"^other.jsonl:3: id 'id7' repeats in.jsonl:8$"):
        list(checked(source))
    bad: list[readers.BadRecord] = []
    assert len(list(checked(source, bad.append))) == 100
    assert [b.where for b in bad] == ["other.jsonl:3"]


def test_documents_refuse_an_id_repeated_anywhere_naming_both_places(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_MERGE_EVERY", 3)
    given_records: list[Any] = [(f"r{i}", f"text {i}") for i in range(9)]
    given_records.append({"id": "r2", "text": "again"})
    stream = documents(given_records)
    assert [d.id for d in (next(stream) for _ in range(9))] == [f"r{i}" for i in range(9)]
    with pytest.raises(InputError, match=r"^record 9: id 'r2' repeats record 2$"):
        next(stream)
    with pytest.raises(InputError, match=r"^record 15: id 'r2' repeats record 8$"):
        list(documents(given_records[2:], start=8))


def test_a_document_is_not_checked_again() -> None:
    document = to_document(("a", "text", {"n": (1, 2), "k": 1.5}), "here")
    assert document == Document("a", "text", {"n": [1, 2], "k": 1.5})  # meta as jsonb will store it
    assert to_document(document, "there") is document
    with pytest.raises(InputError, match=r"^there: field 'id' must be a non-empty string"):
        to_document(("", "text", None), "there")  # a plain tuple is checked


@pytest.mark.parametrize("text", ["", " ", " \t\n\u00a0\u2003 "])
def test_an_empty_or_blank_text_is_a_document(text: str) -> None:
    assert to_document(("e", text), "here") == Document("e", text, None)
    source = [SourceRecord("e", text, None, "in.jsonl:1", "")]
    assert list(checked(source)) == [Document("e", text, None)]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (("a\x00b", "text"), r"^here \(id 'a\\x00b'\): field 'id' contains a NUL character$"),
        (("a\ud800", "text"), r"^here \(id 'a\\ud800'\): field 'id' is not valid Unicode \(a lone"),
        (("a", "t\x00"), r"^here \(id 'a'\): field 'text' contains a NUL character$"),
        (("a", "t\udfff"), r"^here \(id 'a'\): field 'text' is not valid Unicode \(a lone surrogate\)$"),
        (("a", 7), r"^here \(id 'a'\): field 'text' must be a string, got int$"),
        (("a", "t", [1]), r"^here \(id 'a'\): field 'meta' must be a mapping, got list$"),
        (("a", "t", {"k": "\x00"}), r"^here \(id 'a'\): field 'meta' contains a NUL character"),
    ],
)
def test_a_bad_field_is_named_with_its_place_and_id(record: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        to_document(record, "here")
    source = [SourceRecord(record[0], record[1], record[2] if len(record) == 3 else None, "here", "")]
    with pytest.raises(InputError, match=message):
        list(checked(source))


def test_metadata_nested_too_deeply_is_refused_in_one_line() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(InputError, match=r"^here \(id 'm'\): field 'meta' is nested too deeply"):
        to_document(("m", "text", deep), "here")


def test_index_add_refuses_a_repeat_across_batches_whatever_the_batch_size(
    make_index: Callable[..., Any], database_url: str
) -> None:
    """A repeat 3 records apart, batches of 2: records 0-1 and 2-3 are batches that commit before
    the batch of records 4-5, where record 5 repeats record 2; that batch is refused whole (record 4
    is not stored either), naming both places. Before, only a repeat inside one batch was refused:
    across batches the second silently replaced the first, so the result depended on batch_size."""
    index = make_index(bands=64, rows=2)
    given_records = [(f"d{i}", f"document number {i} with some words") for i in range(5)]
    given_records.append(("d2", "the same id again, another text"))
    with pytest.raises(InputError, match=r"^record 5: id 'd2' repeats record 2$"):
        index.add(given_records, batch_size=2)
    stored = collection_state(database_url, index.schema, index.name)
    assert [d[0] for d in stored.documents] == ["d0", "d1", "d2", "d3"]
    assert {d[1] for d in stored.documents if d[0] == "d2"} == {
        hashlib.md5(given_records[2][1].encode()).hexdigest()
    }  # not replaced
    assert stored.dangling == 0


@settings(max_examples=30)
@given(
    ids=st.lists(st.sampled_from("abcdefg"), max_size=12),
    batch_size=st.integers(1, 5),
)
def test_the_repeat_rule_is_the_same_in_the_library_and_the_command_line(
    ids: list[str], batch_size: int
) -> None:
    def refusal(run: Callable[[], object]) -> str | None:
        try:
            run()
        except InputError as exc:
            return str(exc)
        return None

    library = refusal(lambda: list(documents([(i, "t") for i in ids])))
    source = [SourceRecord(i, "t", None, f"record {n}", "") for n, i in enumerate(ids)]
    command_line = refusal(lambda: list(checked(source)))
    assert library == command_line
    assert (library is None) == (len(set(ids)) == len(ids))


def test_one_input_keeps_one_table_of_seen_ids(make_index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []
    original = records.SeenIds.__init__

    def counted(self: records.SeenIds) -> None:
        made.append(self)
        original(self)

    monkeypatch.setattr(records.SeenIds, "__init__", counted)
    rows = [
        SourceRecord(f"d{i}", f"text number {i} of a few words", None, f"in:{i + 1}", "") for i in range(5)
    ]
    docs = readers.checked(rows)
    assert records.documents(docs) is docs  # handed on: the reader checked the ids already
    result = make_index().add(docs, batch_size=2)
    assert result.added == 5
    assert len(made) == 1
    assert len(list(records.documents([("a", "x"), ("b", "y")]))) == 2
    assert len(made) == 2  # records that are not Checked get their own
