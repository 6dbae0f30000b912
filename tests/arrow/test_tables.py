"""``Index.add`` of a pyarrow table, record batch reader or pandas DataFrame, and listings as Arrow
tables, against a real PostgreSQL (issue 40): a table stores what the same rows as tuples store,
column names given as keywords; a bad row is named by its position and stores nothing."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import neardup.arrow
from neardup.errors import InputError, ParamsError

pytestmark = pytest.mark.distributed_variant

TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "the quick brown fox jumps over the lazy dog near the river bank!",
    "an entirely different sentence about the weather in the mountains",
    "the quick brown fox jumped over the lazy dog near the river bank",
]


def _state(index: Any) -> tuple[list[Any], list[Any]]:
    return sorted(index.pairs()), sorted(index.clusters())


def test_a_table_a_reader_and_a_dataframe_store_what_tuples_store(make_index: Any) -> None:
    table = pa.table(
        {
            "doc_id": pa.array([3, 1, 4, 15], pa.int64()),
            "body": TEXTS,
            "lang": ["en", "en", "fr", "en"],
            "year": [2020, 2021, 2022, 2023],
        }
    )
    plain = make_index(threshold=0.7)
    result = plain.add(
        [
            (str(i), t, {"lang": g})
            for i, t, g in zip([3, 1, 4, 15], TEXTS, table["lang"].to_pylist(), strict=True)
        ]
    )
    assert result.added == 4
    expected = _state(plain)
    assert len(expected[0]) == 3

    from_table = make_index(threshold=0.7)
    assert from_table.add(table, id="doc_id", text="body", meta=["lang"]).added == 4
    reader = make_index(threshold=0.7)
    batches = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=3))
    assert reader.add(batches, id="doc_id", text="body", meta=["lang"], batch_size=2).added == 4
    for index in (from_table, reader):
        assert _state(index) == expected
        # the same rows again change nothing: metadata is what the tuples gave
        assert index.add(table, id="doc_id", text="body", meta=["lang"]).unchanged == 4
    assert plain.add(table, id="doc_id", text="body", meta=["lang"]).unchanged == 4

    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {"doc_id": [3, 1, 4, 15], "body": TEXTS, "lang": ["en", "en", "fr", "en"]}, index=[9, 8, 7, 6]
    )
    frame["lang"] = frame["lang"].astype("category")
    from_frame = make_index(threshold=0.7)
    assert from_frame.add(frame, id="doc_id", text="body").added == 4
    assert _state(from_frame) == expected
    assert from_frame.add(frame, id="doc_id", text="body").unchanged == 4


def test_a_bad_row_is_named_by_position_and_stores_nothing(make_index: Any) -> None:
    index = make_index()
    nulls = pa.table({"id": ["a", "b", None], "text": ["x", "y", "z"]})
    with pytest.raises(InputError, match=r"^row 2: column 'id' is null$"):
        index.add(nulls, batch_size=None)
    repeated = pa.table({"id": ["a", "b", "a"], "text": ["x", "y", "z"]})
    with pytest.raises(InputError, match=r"^row 2: id 'a' repeats row 0$"):
        index.add(repeated, batch_size=None)
    with pytest.raises(InputError, match=r"^table: column 'body' is missing \(columns: 'id', 'text'\)$"):
        index.add(repeated, text="body")
    with pytest.raises(InputError, match=r"^table: column 'lang' is missing"):
        index.add(repeated, meta=["lang"])
    with pytest.raises(InputError, match=r"column 'text' \(the text\) is int64, not a string"):
        index.add(pa.table({"id": ["a"], "text": [1]}))
    assert index.stats().documents == 0
    with pytest.raises(ParamsError, match="name a table's columns"):
        index.add([("a", "x")], id="doc_id")
    pd = pytest.importorskip("pandas")
    with pytest.raises(InputError, match=r"^table: column 'body' is missing"):
        index.add(pd.DataFrame({"id": ["a"], "text": ["x"]}), text="body")
    with pytest.raises(InputError, match=r"^row 1: column 'text' is null$"):
        index.add(pd.DataFrame({"id": ["a", "b"], "text": ["x", None]}))
    assert index.stats().documents == 0


def test_listings_as_arrow_tables(make_index: Any) -> None:
    index = make_index(threshold=0.7)
    index.add(pa.table({"id": ["a", "b", "c", "d"], "text": TEXTS}))
    pairs = neardup.arrow.pairs_table(index)
    assert pairs.schema.names == ["id_a", "id_b", "jaccard"]
    assert [tuple(r.values()) for r in pairs.to_pylist()] == list(index.pairs())
    assert neardup.arrow.pairs_table(index, min_jaccard=1.0).num_rows == 0
    clusters = neardup.arrow.clusters_table(index).to_pylist()
    (cluster,) = index.clusters()
    assert clusters == [
        {"cluster": cluster.id, "id": "a", "representative": True},  # the first added, by default
        {"cluster": cluster.id, "id": "b", "representative": False},
        {"cluster": cluster.id, "id": "d", "representative": False},
    ]
