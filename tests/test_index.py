"""The Index against a real PostgreSQL: ingest, pairs, clusters, query, re-add, remove, rebuild."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from neardup import verification
from neardup.core import Params, Sketcher, agreement
from neardup.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseError,
    InputError,
    ParamsError,
    ParamsMismatchError,
)
from neardup.index import AddResult, Index
from neardup.storage import verified_pairs as pairs_storage
from tests._corpus import brute_force_pairs, components, planted_corpus
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

MakeIndex = Callable[..., Index]
# 64 bands of 2 rows: P(miss) at J = 0.5 is (1 - 0.25)**64 ~ 1e-8, so LSH finds every pair
# at or above 0.5 and the result must equal brute force exactly.
EXHAUSTIVE = {"threshold": 0.5, "bands": 64, "rows": 2}


def _pairs(index: Index, min_jaccard: float | None = None) -> dict[tuple[str, str], float]:
    return {(a, b): j for a, b, j in index.pairs(min_jaccard)}


def test_small_collection_pairs_clusters_and_query(make_index: MakeIndex) -> None:
    index = make_index(threshold=0.5)
    docs = [
        ("a", "the quick brown fox jumps over the lazy dog"),
        ("b", "the quick brown fox jumped over the lazy dog"),
        ("c", "THE  quick brown fox jumps over the lazy dog"),  # same normalised text as a
        ("d", "an entirely different sentence about nothing much"),
        ("e", ""),
        ("f", ""),
    ]
    result = index.add(docs)
    assert result == AddResult(added=6, replaced=0, unchanged=0, new_pairs=1, empty=2)
    truth = brute_force_pairs(docs, index.params, 0.5)
    assert _pairs(index) == pytest.approx(truth)
    assert set(truth) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert list(index.clusters()) == [["a", "b", "c"]]
    hits = index.query("the quick brown fox jumps over the lazy dog")
    assert [h[0] for h in hits] == ["a", "c", "b"]
    assert hits[0][1] == 1.0
    assert hits[2][1] == pytest.approx(truth[("a", "b")])
    assert index.query("the quick brown fox jumps over the lazy dog", limit=1) == [("a", 1.0)]
    assert index.query("") == []
    stats = index.stats()
    assert (stats.documents, stats.contents, stats.pairs, stats.identical_pairs, stats.clusters) == (
        6,
        4,
        1,
        1,
        1,
    )


@pytest.mark.parametrize("pairs_per_text", [0, verification.UNSORTED_PAIRS_PER_TEXT, 10**9])
def test_exact_verification_equals_brute_force(
    make_index: MakeIndex, pairs_per_text: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Float for float, whether the writer sorts every text's set (0), compares every pair's
    shingles as shingled (10**9) or picks one by the pairs per text (the default)."""
    monkeypatch.setattr(verification, "UNSORTED_PAIRS_PER_TEXT", pairs_per_text)
    docs = planted_corpus(n_sources=25, copies=3, seed=7)
    index = make_index(**EXHAUSTIVE)
    index.add(docs, batch_size=17)
    truth = brute_force_pairs(docs, index.params, 0.5)
    found = _pairs(index)
    assert len(truth) > 40
    assert found.keys() == truth.keys()
    for key, j in truth.items():
        assert found[key] == j  # exact, not approximately
    assert _pairs(index, 0.7) == {k: v for k, v in truth.items() if v >= 0.7}
    stats = index.stats()
    assert set(stats.bytes_by_table) == {"contents", "documents", "signatures", "buckets", "pairs"}
    assert sum(rows + indexes for rows, indexes in stats.bytes_by_table.values()) == stats.bytes_on_disk
    assert all(rows > 0 and indexes > 0 for rows, indexes in stats.bytes_by_table.values())
    assert sorted(index.clusters()) == components(set(truth))


def test_batches_give_the_same_pairs_as_one_batch(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=30, copies=2, seed=3)
    whole = make_index(threshold=0.6)
    whole.add(docs)
    for size in (1, 7, 40):
        split = make_index(threshold=0.6)
        split.add(docs, batch_size=size)
        assert _pairs(split) == _pairs(whole)
        assert sorted(split.clusters()) == sorted(whole.clusters())


def test_one_batch_per_call_with_the_bulk_path_then_incremental(make_index: MakeIndex) -> None:
    # The first call loads an empty collection (bulk path: index built afterwards); the later
    # ones go through the indexed lookup. Both must agree with brute force.
    docs = planted_corpus(n_sources=20, copies=3, seed=11)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:50])
    index.add(docs[50:60])
    index.add(docs[60:])
    assert _pairs(index) == brute_force_pairs(docs, index.params, 0.5)


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), split=st.integers(1, 60))
def test_re_adding_the_same_documents_changes_nothing(make_index: MakeIndex, seed: int, split: int) -> None:
    docs = planted_corpus(n_sources=12, copies=2, seed=seed)
    index = make_index(threshold=0.6)
    index.add(docs)
    before = (_pairs(index), list(index.clusters()), index.stats().contents)
    again = index.add(docs[split:] + docs[:split], batch_size=max(1, split))
    assert again == AddResult(unchanged=len(docs))
    assert (_pairs(index), list(index.clusters()), index.stats().contents) == before


def test_re_adding_with_another_text_replaces_document_and_pairs(make_index: MakeIndex) -> None:
    index = make_index(threshold=0.5)
    index.add(
        [
            ("a", "the quick brown fox jumps over the lazy dog"),
            ("b", "the quick brown fox jumped over the lazy dog"),
            ("c", "pack my box with five dozen liquor jugs"),
        ]
    )
    assert set(_pairs(index)) == {("a", "b")}
    result = index.add([("b", "pack my box with five dozen liquor jugs!")])
    assert result == AddResult(added=0, replaced=1, unchanged=0, new_pairs=1)
    assert set(_pairs(index)) == {("b", "c")}
    assert list(index.clusters()) == [["b", "c"]]
    assert index.stats().contents == 3  # b's old content is gone with its pairs and buckets
    hits = index.query("the quick brown fox jumped over the lazy dog")
    assert [h[0] for h in hits] == ["a"]
    assert hits[0][1] == pytest.approx(0.7556, abs=1e-4)
    # Only the metadata changes: the document is rewritten, its content and pairs stay.
    result = index.add([{"id": "c", "text": "pack my box with five dozen liquor jugs", "meta": {"k": 1}}])
    assert result.replaced == 1
    assert set(_pairs(index)) == {("b", "c")}


def test_remove_splits_clusters_and_keeps_copies(make_index: MakeIndex) -> None:
    index = make_index(threshold=0.5)
    base = "one two three four five six seven eight nine ten eleven twelve"
    index.add(
        [
            ("x1", base),
            ("x2", base.replace("six", "6")),
            ("x3", base.replace("six", "6").replace("ten", "10")),
            ("x4", base.replace("six", "6").replace("ten", "10").replace("two", "2").replace("nine", "9")),
            ("y1", "completely unrelated words in this line"),
            ("y2", "completely unrelated words in this line"),
            ("y3", "Completely  unrelated words in this line"),
        ]
    )
    before = _pairs(index)
    assert ("y1", "y2") in before
    assert before[("y1", "y3")] == 1.0
    assert index.remove(["x2", "x3", "missing"]) == 2
    after = _pairs(index)
    assert not any({"x2", "x3"} & {a, b} for a, b in after)
    assert after == {k: v for k, v in before.items() if not {"x2", "x3"} & set(k)}
    assert sorted(index.clusters()) == components(set(after))
    assert index.remove(["y1"]) == 1
    assert list(index.clusters())[-1] == ["y2", "y3"]
    assert index.remove([]) == 0


def test_exact_copies_are_listed_but_stored_once(
    make_index: MakeIndex, database_url: str, schema: str
) -> None:
    index = make_index(threshold=0.8)
    text = "a boilerplate paragraph repeated across many pages of the archive"
    index.add([(f"copy{i:02d}", text) for i in range(30)])
    stats = index.stats()
    assert (stats.contents, stats.pairs, stats.identical_pairs, stats.clusters) == (1, 0, 435, 1)
    listed = list(index.pairs())
    assert len(listed) == 435
    assert all(j == 1.0 for _, _, j in listed)
    with psycopg.connect(psycopg_url(database_url)) as conn:
        rows = conn.execute(
            f'SELECT id, representative FROM "{schema}".cluster_list WHERE collection = %s ORDER BY id',
            (index.name,),
        ).fetchall()
    assert [r[0] for r in rows] == [f"copy{i:02d}" for i in range(30)]
    assert [r[1] for r in rows] == [True] + [False] * 29
    assert index.query(text) == [(f"copy{i:02d}", 1.0) for i in range(30)]


def test_empty_texts_are_never_duplicates(make_index: MakeIndex) -> None:
    index = make_index(threshold=0.5)
    index.add([("e1", ""), ("e2", "   "), ("e3", "\n"), ("t", "some text")])
    assert _pairs(index) == {}
    assert list(index.clusters()) == []


def test_without_text_similarity_is_the_signature_estimate(
    make_index: MakeIndex, database_url: str, schema: str
) -> None:
    docs = planted_corpus(n_sources=15, copies=2, seed=5)
    index = make_index(threshold=0.6, store_text=False)
    index.add(docs)
    sketcher = Sketcher(index.params)
    texts = dict(docs)
    found = _pairs(index)
    assert found
    for (a, b), j in found.items():
        sigs = sketcher.signatures([texts[a], texts[b]])
        assert j == pytest.approx(float(agreement(sigs[0], sigs[1])))
        assert j >= 0.6
    with psycopg.connect(psycopg_url(database_url)) as conn:
        methods = conn.execute(
            f'SELECT DISTINCT method FROM "{schema}".pair_list WHERE collection = %s', (index.name,)
        ).fetchall()
        stored_texts = conn.execute(
            f'SELECT count(text) FROM "{schema}".document_list WHERE collection = %s', (index.name,)
        ).fetchone()
    assert methods == [("estimate",)]
    assert stored_texts == (0,)


def test_query_returns_exact_similarity_best_first(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=10, copies=3, seed=13)
    index = make_index(**EXHAUSTIVE)
    index.add(docs)
    texts = dict(docs)
    truth = brute_force_pairs(docs, index.params, 0.5)
    probe = "s004"
    expected = sorted(
        [(probe, 1.0)] + [(b if a == probe else a, j) for (a, b), j in truth.items() if probe in (a, b)],
        key=lambda r: (-r[1], r[0]),
    )
    assert index.query(texts[probe], min_jaccard=0.5) == expected
    assert index.query(texts[probe], min_jaccard=0.99) == [(probe, 1.0)]


def test_query_lists_every_document_of_a_shared_content_with_one_similarity(make_index: MakeIndex) -> None:
    # Three documents, one normalised text written three ways, stored out of id order; the query's
    # lookup reads any one of their texts and their ids unsorted, and must answer as if it had not.
    base = " ".join(f"word{i} token{i % 7}" for i in range(60))
    docs = [("z", base.upper()), ("a", base), ("m", base.replace(" ", "  \n "))]
    index = make_index(**EXHAUSTIVE)
    index.add(docs)
    assert index.stats().contents == 1
    near = base.replace("word7 ", "other ")
    shingles = Sketcher(index.params).shingles([near, base])
    expected = len(np.intersect1d(shingles[0], shingles[1])) / len(np.union1d(shingles[0], shingles[1]))
    assert 0.5 < expected < 1.0
    assert index.query(near, min_jaccard=0.5) == [("a", expected), ("m", expected), ("z", expected)]
    assert index.query(base.upper(), min_jaccard=0.5) == [("a", 1.0), ("m", 1.0), ("z", 1.0)]


def test_a_failing_batch_leaves_nothing_behind(
    make_index: MakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = planted_corpus(n_sources=10, copies=2, seed=17)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:10])
    before = (_pairs(index), index.stats())

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(pairs_storage, "insert", broken)
    with pytest.raises(RuntimeError):
        index.add(docs[10:])
    monkeypatch.undo()
    after_stats = index.stats()
    assert _pairs(index) == before[0]
    assert (after_stats.documents, after_stats.contents, after_stats.bucket_rows) == (
        before[1].documents,
        before[1].contents,
        before[1].bucket_rows,
    )
    index.add(docs[10:])  # and the collection still works
    assert _pairs(index) == brute_force_pairs(docs, index.params, 0.5)


def test_bad_records_are_refused_by_position_and_field(make_index: MakeIndex) -> None:
    index = make_index()
    cases: list[tuple[list[Any], str]] = [
        ([("a", "x"), ("b", 3)], "record 1 (id 'b'): field 'text' must be a string"),
        ([("", "x")], "record 0: field 'id' must be a non-empty string"),
        ([(7, "x")], "record 0: field 'id' must be a non-empty string, got 7"),
        ([{"id": "a"}], "record 0: field 'text' is missing"),
        ([("a", "x"), ("a", "y")], "record 1: id 'a' repeats record 0"),
        ([("a", "x\x00y")], "field 'text' contains a NUL character"),
        ([("a", "x", [1])], "field 'meta' must be a mapping"),
        (["just a string"], "record 0: expected (id, text)"),
    ]
    for records, message in cases:
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            index.add(records)
    assert index.stats().documents == 0


def test_parameters_are_stored_and_checked(make_index: MakeIndex, database_url: str, schema: str) -> None:
    index = make_index(threshold=0.7, num_perm=64, k=4, shingle="word")
    reopened = Index.open(database_url, index.name, schema=schema)
    assert reopened.params == index.params
    assert reopened.threshold == 0.7
    reopened.close()
    other = Params(bands=index.params.bands, rows=index.params.rows, num_perm=64, shingle="word", k=3)
    with pytest.raises(ParamsMismatchError, match="k: 4 != 3"):
        Index.open(database_url, index.name, schema=schema, params=other)
    with pytest.raises(CollectionExistsError):
        Index.create(database_url, index.name, 0.7, schema=schema)
    with pytest.raises(ParamsMismatchError, match="shingle: 'word' != 'char'"):
        Index.create(database_url, index.name, 0.7, num_perm=64, k=4, schema=schema, exist_ok=True)
    same = Index.create(
        database_url, index.name, 0.7, num_perm=64, k=4, shingle="word", schema=schema, exist_ok=True
    )
    same.close()
    with pytest.raises(CollectionNotFoundError):
        Index.open(database_url, "no-such-collection", schema=schema)


@pytest.mark.parametrize(("field", "value"), [("hash_version", 99), ("content_hash", 3)])
def test_a_collection_from_a_newer_version_is_refused_by_name(
    make_index: MakeIndex, database_url: str, schema: str, field: str, value: int
) -> None:
    index = make_index()
    index.add([("a", "some text to keep")])
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{schema}".collections SET params = jsonb_set(params, %s, %s) WHERE name = %s',
            [[field], Jsonb(value), index.name],
        )
    with pytest.raises(ParamsMismatchError, match=rf"{field}: the parameters say {value}.*newer neardup"):
        Index.open(database_url, index.name, schema=schema)
    with pytest.raises(ParamsMismatchError, match=field):
        Index.create(database_url, index.name, schema=schema, exist_ok=True)


def test_rebuild_with_new_banding_keeps_exact_pairs(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=20, copies=2, seed=19)
    index = make_index(threshold=0.5, bands=8, rows=8)  # misses some pairs on purpose
    index.add(docs)
    truth = brute_force_pairs(docs, index.params, 0.5)
    assert set(_pairs(index)) <= set(truth)
    index.rebuild(bands=64, rows=2)
    assert (index.params.bands, index.params.rows) == (64, 2)
    assert _pairs(index) == truth
    assert sorted(index.clusters()) == components(set(truth))
    index.rebuild(threshold=0.8, bands=64, rows=2)
    assert _pairs(index) == {k: v for k, v in truth.items() if v >= 0.8}


def test_rebuild_with_new_shingling_re_sketches_stored_text(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=10, copies=2, seed=23)
    index = make_index(**EXHAUSTIVE)
    index.add(docs)
    index.rebuild(k=3, shingle="char", bands=64, rows=2)
    assert index.params.k == 3
    assert _pairs(index) == brute_force_pairs(docs, index.params, 0.5)
    assert index.stats().documents == len(docs)


def test_query_agrees_with_pairs_for_every_document(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=8, copies=2, seed=29)
    index = make_index(threshold=0.6)
    index.add(docs)
    found = _pairs(index)
    for doc_id, text in random.Random(1).sample(docs, 8):
        hits = {i: j for i, j in index.query(text) if i != doc_id}
        expected = {(b if a == doc_id else a): j for (a, b), j in found.items() if doc_id in (a, b)}
        assert hits == pytest.approx(expected)
    assert np.isfinite(index.stats().expected_fp_rate)


def test_removed_contents_leave_no_rows_behind(make_index: MakeIndex, database_url: str, schema: str) -> None:
    docs = planted_corpus(n_sources=6, copies=2, seed=31)
    index = make_index(threshold=0.6)
    index.add(docs)
    index.remove([d for d, _ in docs[::2]])
    index.add([(docs[1][0], "a replacement text for this one")])
    with psycopg.connect(psycopg_url(database_url)) as conn:
        c = conn.execute(
            f'SELECT collection_id FROM "{schema}".collections WHERE name = %s', (index.name,)
        ).fetchone()
        assert c is not None
        counts = {
            table: conn.execute(
                f'SELECT count(*) FROM "{schema}".{table} WHERE collection_id = %s', c
            ).fetchone()
            for table in ("documents", "contents", "signatures", "buckets")
        }
        dangling = conn.execute(
            # Uncorrelated, so that Citus can run it too (buckets and contents live on other shards).
            f'SELECT count(*) FROM "{schema}".buckets b WHERE collection_id = %(c)s AND b.content_id NOT IN '
            f'(SELECT t.content_id FROM "{schema}".contents t WHERE t.collection_id = %(c)s)',
            {"c": c[0]},
        ).fetchone()
    n = len(docs) - len(docs[::2])
    assert counts["documents"] == (n,)
    (contents,) = counts["contents"] or (0,)
    assert 0 < contents <= n
    assert counts["signatures"] == (contents,)
    assert counts["buckets"] == (contents * index.params.bands,)
    assert dangling == (0,)


def test_a_bad_record_keeps_the_batches_before_it(make_index: MakeIndex) -> None:
    index = make_index(threshold=0.6)
    records: list[Any] = [(f"d{i:02d}", f"text number {i} with some words") for i in range(40)]
    records[25] = ("d25", None)
    with pytest.raises(InputError, match="record 25"):
        index.add(records, batch_size=10)
    assert index.stats().documents == 20  # batches 0-9 and 10-19 committed, 20-29 refused whole


def test_two_writers_at_once_end_with_the_pairs_of_one(
    make_index: MakeIndex, database_url: str, schema: str
) -> None:
    # Writers to one collection take turns on its row lock; each batch's probe of the stored
    # buckets (on a second connection) must still see every batch the other writer committed.
    docs = planted_corpus(n_sources=30, copies=3, seed=37)
    single = make_index(**EXHAUSTIVE)
    single.add(docs)
    shared = make_index(**EXHAUSTIVE)
    other = Index.open(database_url, shared.name, schema=schema)
    halves = [docs[0::2] + docs[1:20:2], docs[1::2] + docs[0:20:2]]  # overlapping on purpose
    errors: list[BaseException] = []

    def write(index: Index, records: list[tuple[str, str]]) -> None:
        try:
            index.add(records, batch_size=7)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(shared, halves[0])),
        threading.Thread(target=write, args=(other, halves[1])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    other.close()
    assert errors == []
    assert shared.stats().documents == len(docs)
    assert _pairs(shared) == _pairs(single)
    assert sorted(shared.clusters()) == sorted(single.clusters())


@pytest.mark.parametrize("listing", ["pairs", "clusters"])
@pytest.mark.parametrize("finish", [False, True])
def test_a_write_while_a_listing_is_open_is_committed(
    make_index: MakeIndex, database_url: str, schema: str, listing: str, finish: bool
) -> None:
    """Defect: a write made while a listing was still open ran inside the listing's transaction,
    as a savepoint, and was lost when the listing was closed before its end, after add() had
    acknowledged it."""
    docs = planted_corpus(n_sources=4, copies=2, seed=5)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:8])
    before = list(index.pairs() if listing == "pairs" else index.clusters())
    assert len(before) >= 2
    it: Any = index.pairs() if listing == "pairs" else index.clusters()
    first = next(it)
    result = index.add(docs[8:])
    assert result.added == len(docs) - 8
    if finish:  # the listing reads the snapshot it began with, whatever was written since
        assert [first, *it] == before
    it.close()
    with Index.open(database_url, index.name, schema=schema) as fresh:
        assert fresh.stats().documents == len(docs)
        assert _pairs(fresh) == pytest.approx(brute_force_pairs(docs, index.params, 0.5))
        new_id, new_text = docs[-1]
        assert new_id in {i for i, _ in fresh.query(new_text)}


def test_a_stage_clock_sees_where_an_add_spends_its_time(make_index: MakeIndex) -> None:
    import time

    from neardup.ingest import StageClock

    docs = planted_corpus(n_sources=12, copies=2, seed=21)
    index = make_index(**EXHAUSTIVE)
    clock = StageClock()
    start = time.perf_counter()
    index.add(docs, batch_size=12, clock=clock)
    wall = time.perf_counter() - start
    # Into an empty collection every batch goes in unindexed and the index is built once at the end.
    assert clock.entries["deferred: COPY bucket rows, no index"] == 3
    assert clock.entries["build the deferred bucket index"] == 1
    assert "bucket rows: binary COPY into the index" not in clock.entries
    assert clock.entries["batch transaction, commit included"] == 3
    assert clock.entries["pairs: binary COPY"] >= 1
    final = "build the deferred bucket index"  # in a transaction of its own, after the batches
    writer_stages = [
        s for name, s in clock.seconds.items() if not name.startswith(("worker:", "batch ")) and name != final
    ]
    assert (
        0
        < sum(writer_stages)
        <= clock.seconds["batch transaction, commit included"] + clock.seconds["wait for the next batch"]
        <= wall - clock.seconds[final]
    )
    assert 0 < sum(s for name, s in clock.seconds.items() if name.startswith("worker:")) <= wall
    # A later add finds the collection non-empty: it inserts into the index and probes it.
    later = StageClock()
    index.add([(f"later-{i}", f"{text} and {i} more") for i, text in docs[:5]], batch_size=3, clock=later)
    assert later.entries["bucket rows: binary COPY into the index"] == 2
    assert "deferred: COPY bucket rows, no index" not in later.entries


def _bucket_index_exists(index: Index) -> bool:
    from neardup.storage import buckets

    return buckets.has_index(index._scope)


@pytest.mark.parametrize("between", ["add", "remove", "nothing"])
def test_a_deferred_index_ingest_finds_every_pair_whoever_writes_between_batches(
    make_index: MakeIndex, database_url: str, between: str
) -> None:
    """An add into an empty collection holds its bucket rows in memory; another writer that comes
    between two of its batches makes it build the index and probe from then on."""
    docs = planted_corpus(n_sources=30, copies=3, seed=5)
    random.Random(2).shuffle(docs)
    ours, theirs = docs[:60], docs[60:]
    index = make_index(**EXHAUSTIVE)
    other = Index.open(database_url, index.name, schema=index._scope.schema)
    removed: list[str] = []
    calls = 0

    def meanwhile(_: AddResult) -> None:
        nonlocal calls
        calls += 1
        if calls == 2 and between == "add":
            other.add(theirs)
        elif calls == 2 and between == "remove":
            removed.extend(doc_id for doc_id, _ in ours[:5])
            assert other.remove(removed) == 5

    try:
        index.add(ours, batch_size=20, progress=meanwhile)
    finally:
        other.close()
    assert calls == 3
    stored = [d for d in ours if d[0] not in removed] + (theirs if between == "add" else [])
    assert _pairs(index) == pytest.approx(brute_force_pairs(stored, index.params, 0.5))
    assert sorted(map(sorted, index.clusters())) == sorted(
        map(sorted, components(set(brute_force_pairs(stored, index.params, 0.5))))
    )
    assert _bucket_index_exists(index)
    for doc_id, text in stored[:10]:
        assert doc_id in {hit for hit, _ in index.query(text)}


def test_a_failed_ingest_still_builds_the_deferred_index_for_what_it_committed(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=10, copies=2, seed=8)
    assert len(docs) % 10 == 0
    index = make_index(**EXHAUSTIVE)
    bad = [*docs, ("broken", 42)]  # the batch after the last whole one: a record without a text string
    with pytest.raises(InputError):
        index.add(bad, batch_size=10)
    assert index.stats().documents == len(docs)
    assert _bucket_index_exists(index)
    assert _pairs(index) == pytest.approx(brute_force_pairs(docs, index.params, 0.5))


@pytest.mark.parametrize("failing", ["documents COPY", "verification"])
def test_a_batch_failing_while_its_documents_are_written_alongside_leaves_nothing_behind(
    make_index: MakeIndex, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """An ingest into an empty collection writes each batch's documents on a worker while it
    verifies the batch's candidates: a failure on either side rolls the whole batch back, after
    the worker is done with the connection, and the batches before it stay."""
    from neardup import verification
    from neardup.storage import documents as document_rows

    docs = planted_corpus(n_sources=10, copies=2, seed=21)
    index = make_index(**EXHAUSTIVE)
    calls = {"insert": 0, "verify": 0}
    insert, verify = document_rows.insert, verification.verify_pairs

    def second_batch_repeats_a_key(
        scope: Any, doc_ids: np.ndarray, external_ids: Any, content_ids: np.ndarray, *rest: Any
    ) -> None:
        calls["insert"] += 1
        if calls["insert"] == 2:  # the server refuses the COPY: a repeated primary key, which is
            # (collection_id, doc_id) on one server and (collection_id, content_id, doc_id) on Citus
            doc_ids = np.r_[doc_ids[:-1], doc_ids[0]]
            content_ids = np.r_[content_ids[:-1], content_ids[0]]
        insert(scope, doc_ids, external_ids, content_ids, *rest)

    def second_batch_fails(*args: Any) -> Any:
        calls["verify"] += 1
        if calls["verify"] == 2:
            raise RuntimeError("verification failed")
        return verify(*args)

    if failing == "documents COPY":
        monkeypatch.setattr(document_rows, "insert", second_batch_repeats_a_key)
        expected: type[Exception] = DatabaseError
    else:
        monkeypatch.setattr(verification, "verify_pairs", second_batch_fails)
        expected = RuntimeError
    with pytest.raises(expected):
        index.add(docs, batch_size=10)
    monkeypatch.undo()
    first = docs[:10]
    assert calls["insert" if failing == "documents COPY" else "verify"] == 2  # the second batch failed
    stats = index.stats()
    assert (stats.documents, stats.contents) == (10, len({t for _, t in first}))
    assert _bucket_index_exists(index)
    assert _pairs(index) == pytest.approx(brute_force_pairs(first, index.params, 0.5))
    index.add(docs[10:])  # and the collection still works
    assert _pairs(index) == pytest.approx(brute_force_pairs(docs, index.params, 0.5))


@pytest.mark.parametrize("change", [{"threshold": 0.6}, {"k": 4}])  # re-band, and re-sketch
def test_a_rebuild_while_a_listing_is_open_neither_waits_nor_disturbs_it(
    make_index: MakeIndex, change: dict[str, Any]
) -> None:
    """Found by the state machine: a listing left open (on its own connection) held a lock that the
    rebuild's TRUNCATE waited for, while the only thread that could close it waited for the rebuild."""
    import threading

    docs = planted_corpus(n_sources=6, copies=2, seed=9)
    index = make_index(**EXHAUSTIVE)
    index.add(docs)
    before = list(index.pairs())
    listing = index.pairs()
    first = next(listing)
    failure: list[BaseException] = []

    def rebuild() -> None:
        try:
            index.rebuild(**change)
        except BaseException as exc:  # reported below
            failure.append(exc)

    worker = threading.Thread(target=rebuild, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "rebuild waited for the open listing"
    assert failure == []
    assert [first, *listing] == before  # the listing reads the snapshot it began with
    params = index.params
    expected = brute_force_pairs(docs, params, index.threshold)
    assert _pairs(index) == pytest.approx(expected)


def test_an_ingest_that_defers_the_index_reuses_contents_of_its_own_earlier_batches(
    make_index: MakeIndex,
) -> None:
    """Exact copies (other ids, the same normalised text) in later batches of one ingest: their
    contents are found in the ingest's memory, as the database would find them."""
    docs = planted_corpus(n_sources=12, copies=1, seed=4)
    copies = [(f"copy-{doc_id}", text.upper()) for doc_id, text in docs[:10]]  # case folds away
    index = make_index(**EXHAUSTIVE)
    index.add(docs + copies, batch_size=7)
    stats = index.stats()
    assert (stats.documents, stats.contents) == (len(docs) + 10, len(docs))
    pairs = _pairs(index)
    assert all(pairs[tuple(sorted((doc_id, f"copy-{doc_id}")))] == 1.0 for doc_id, _ in docs[:10])  # type: ignore[index]
    near = {k: v for k, v in pairs.items() if not (k[0].startswith("copy-") or k[1].startswith("copy-"))}
    assert near == pytest.approx(brute_force_pairs(docs, index.params, 0.5))


def _stored_hashes(database_url: str, schema: str, name: str) -> list[bytes]:
    with psycopg.connect(psycopg_url(database_url)) as conn:
        rows = conn.execute(
            f'SELECT t.content_hash FROM "{schema}".contents t JOIN "{schema}".collections c '
            "ON c.collection_id = t.collection_id WHERE c.name = %s ORDER BY t.content_id",
            (name,),
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def _blake(text: str, encoding: str) -> bytes:
    return hashlib.blake2b(text.encode(encoding), digest_size=16).digest()


def test_a_new_collection_hashes_contents_as_utf8(
    make_index: MakeIndex, database_url: str, schema: str
) -> None:
    index = make_index(threshold=0.5)
    assert index.params.content_hash == 2
    index.add([("a", "The  Quick brown fox"), ("b", "Ünïcode text, plus 😀")])
    expected = [_blake("the quick brown fox", "utf-8"), _blake("ünïcode text, plus 😀", "utf-8")]
    assert _stored_hashes(database_url, schema, index.name) == expected


def test_a_collection_stored_before_content_hash_versions_keeps_utf32(
    make_index: MakeIndex, database_url: str, schema: str
) -> None:
    name = make_index(threshold=0.5).name
    # What a collection made by an earlier neardup stores: params without the field.
    with psycopg.connect(psycopg_url(database_url)) as conn:
        conn.execute(
            f'UPDATE "{schema}".collections SET params = params - %s WHERE name = %s', ("content_hash", name)
        )
    index = make_index(name=name, threshold=0.5, exist_ok=True)  # not refused as a mismatch
    assert index.params.content_hash == 1
    index.add([("a", "The quick brown fox"), ("b", "an unrelated text entirely")])
    utf32 = [_blake("the quick brown fox", "utf-32-le"), _blake("an unrelated text entirely", "utf-32-le")]
    assert _stored_hashes(database_url, schema, name) == utf32
    # An exact copy added later is still found as one: no new content, a pair at 1.0.
    assert index.add([("c", "THE quick  brown fox")]).added == 1
    assert index.stats().contents == 2
    assert ("a", "c", 1.0) in set(index.pairs())
    # Rebuilds keep the collection's version: a re-banding, and a re-sketch that rewrites contents.
    index.rebuild(0.7)
    index.rebuild(k=4)
    assert index.params.content_hash == 1
    assert index.params.k == 4
    assert _stored_hashes(database_url, schema, name) == utf32
    # Opened with parameters built today (content_hash 2): the same in every field compared.
    asked = dataclasses.replace(index.params, content_hash=2)
    reopened = Index.open(database_url, name, schema=schema, params=asked)
    assert reopened.params.content_hash == 1
    reopened.close()


def _writes(database_url: str, schema: str, name: str) -> int:
    """The collection's write counter: it moves once for each committed batch."""
    with psycopg.connect(psycopg_url(database_url)) as conn:
        row = conn.execute(f'SELECT writes FROM "{schema}".collections WHERE name = %s', (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_batch_size_none_is_one_transaction_whatever_the_count(
    make_index: Callable[..., Any], database_url: str, schema: str
) -> None:
    index = make_index()
    records = [(f"d{i}", f"document number {i} of a large request") for i in range(9_000)]
    # A bad record at the very end: with batches, the batches before it stay (9,000 records ramp
    # up from an eighth of the default batch size); in one transaction, nothing is stored.
    bad = [*records[:-1], ("d8999", 8999)]
    with pytest.raises(InputError, match="record 8999"):
        index.add(bad, batch_size=None)
    assert index.stats().documents == 0
    with pytest.raises(InputError, match="record 8999"):
        index.add(bad)
    assert 0 < index.stats().documents < 8_999
    index.remove([f"d{i}" for i in range(9_000)])
    before = _writes(database_url, schema, index.name)
    assert index.add(records, batch_size=None).added == 9_000
    assert _writes(database_url, schema, index.name) == before + 1
    with pytest.raises(ParamsError, match="batch_size=None with jobs=1"):
        index.add(records, batch_size=None, jobs=2)
