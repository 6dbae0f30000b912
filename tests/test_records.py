"""Reading and checking records (no database): the memory-flat record of ids already read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import records
from neardup.errors import InputError
from neardup.records import SourceRecord, checked_records


@given(
    ids=st.lists(st.text(max_size=4), max_size=60),
    merge_every=st.integers(1, 7),
    files=st.lists(st.sampled_from(["a.jsonl", "dir/b c.csv", "x:y.tsv"]), min_size=60, max_size=60),
)
def test_seen_ids_agree_with_a_dict_across_merges(ids: list[str], merge_every: int, files: list[str]) -> None:
    old = records._MERGE_EVERY
    records._MERGE_EVERY = merge_every
    try:
        seen = records._SeenIds()
        reference: dict[str, str] = {}
        for n, (doc_id, name) in enumerate(zip(ids, files, strict=False), 1):
            assert seen.place_of(doc_id) == reference.get(doc_id)
            if doc_id not in reference:
                where = f"{name}:{n}"
                seen.add(doc_id, where)
                reference[doc_id] = where
    finally:
        records._MERGE_EVERY = old


def test_a_repeat_far_apart_is_named_with_its_first_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_MERGE_EVERY", 10)
    source = [SourceRecord(f"id{i}", f"text {i}", None, f"in.jsonl:{i + 1}", "") for i in range(100)]
    source.append(SourceRecord("id7", "again", None, "other.jsonl:3", ""))
    with pytest.raises(InputError, match=r"^other.jsonl:3: id 'id7' repeats in.jsonl:8$"):
        list(checked_records(source))
    bad: list[records.BadRecord] = []
    assert len(list(checked_records(source, bad.append))) == 100
    assert [b.where for b in bad] == ["other.jsonl:3"]


def test_a_checked_record_is_not_checked_again() -> None:
    checked = records.check_record(("a", "text", {"n": (1, 2), "k": 1.5}), "here")
    assert checked == ("a", "text", {"n": [1, 2], "k": 1.5})  # meta as jsonb will store it
    assert records.check_record(checked, "there") is checked
    with pytest.raises(InputError, match=r"^there: field 'id' must be a non-empty string"):
        records.check_record(("", "text", None), "there")  # a plain tuple is checked
