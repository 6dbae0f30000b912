"""Index.check: each input's stored near-duplicates, equal to brute force, with nothing stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import search, verification
from neardup.core import shingles
from neardup.errors import InputError, ParamsError
from neardup.index import CheckResult, Index
from neardup.storage import buckets, documents
from tests._corpus import planted_corpus
from tests._state import collection_state

pytestmark = pytest.mark.distributed_variant

MakeIndex = Callable[..., Index]
# Every pair at or above 0.5 is a candidate with probability > 0.99999 (64 bands of 2 rows).
EXHAUSTIVE: dict[str, Any] = {"threshold": 0.5, "bands": 64, "rows": 2}


def brute_force_matches(
    stored: list[tuple[str, str]], text: str, index: Index, floor: float
) -> list[tuple[str, float]]:
    """Stored ids whose exact Jaccard with ``text`` reaches ``floor``, best first, ties by id."""
    p = index.params

    def shingle_set(t: str) -> set[int]:
        return set(shingles(t, p.shingle, p.k, p.normalization).tolist())

    probe = shingle_set(text)
    out = []
    for doc_id, stored_text in stored:
        other = shingle_set(stored_text)
        if probe and other and len(probe & other) / len(probe | other) >= floor:
            out.append((doc_id, len(probe & other) / len(probe | other)))
    return sorted(out, key=lambda m: (-m[1], m[0]))


@pytest.mark.parametrize("batch_size", [4, 100])  # documents one by one, and one batch of 13
def test_check_equals_brute_force_and_stores_nothing(
    make_index: MakeIndex, database_url: str, schema: str, batch_size: int
) -> None:
    docs = planted_corpus(n_sources=12, copies=2, seed=3)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:24])
    before = collection_state(database_url, schema, index.name)
    # The unstored documents, a stored one, the same record twice, and an empty text.
    inputs = [*docs[24:], docs[0], docs[24], ("blank", "   ")]
    results = list(index.check(inputs, batch_size=batch_size))
    assert [r.id for r in results] == [d[0] for d in inputs]
    for (doc_id, text), result in zip(inputs, results, strict=True):
        expected = brute_force_matches(docs[:24], text, index, 0.5)
        assert [m[0] for m in result.matches] == [m[0] for m in expected], doc_id
        assert [m[1] for m in result.matches] == pytest.approx([m[1] for m in expected])
    assert results[-3].matches[0] == (docs[0][0], 1.0)
    assert results[-2] == results[0]
    assert results[-1] == CheckResult("blank", [])
    assert collection_state(database_url, schema, index.name) == before
    # check answers as query does, one text at a time.
    for (_, text), result in zip(inputs, results, strict=True):
        assert result.matches == index.query(text)


@pytest.mark.parametrize("read_ahead", [0, 10**9])  # stored texts shingled ahead, or read here
@pytest.mark.parametrize("pairs_per_text", [0, 10**9])  # shingle sets sorted first, or as shingled
def test_check_answers_the_same_whichever_way_shingles_are_compared(
    make_index: MakeIndex, monkeypatch: pytest.MonkeyPatch, pairs_per_text: int, read_ahead: int
) -> None:
    docs = planted_corpus(n_sources=12, copies=2, seed=3)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:24])
    inputs = [*docs[24:], docs[0]]
    monkeypatch.setattr(verification, "UNSORTED_PAIRS_PER_TEXT", pairs_per_text)
    monkeypatch.setattr(verification, "READ_AHEAD", read_ahead)
    results = list(index.check(inputs, batch_size=100))
    assert any(r.matches for r in results)
    for (doc_id, text), result in zip(inputs, results, strict=True):
        expected = brute_force_matches(docs[:24], text, index, 0.5)
        assert [m[0] for m in result.matches] == [m[0] for m in expected], doc_id
        assert [m[1] for m in result.matches] == pytest.approx([m[1] for m in expected])


def test_check_floor_limit_and_bad_input(make_index: MakeIndex) -> None:
    docs = planted_corpus(n_sources=5, copies=3, seed=8)
    index = make_index(**EXHAUSTIVE)
    index.add(docs)
    probe = docs[0]
    (top,) = index.check([probe], limit=1)
    assert len(top.matches) == 1
    (high,) = index.check([probe], min_jaccard=0.99)
    assert high.matches == [(probe[0], 1.0)]
    with pytest.raises(InputError, match="record 1"):
        list(index.check([probe, ("x", 5)]))  # type: ignore[list-item]
    with pytest.raises(ParamsError, match="min_jaccard"):
        list(index.check([probe], min_jaccard=1.5))
    with pytest.raises(ParamsError, match="batch_size"):
        list(index.check([probe], batch_size=0))
    # One rule for a similarity floor in the library too: query, check and pairs alike.
    for bad in (1.5, -0.1, "0.5", True):
        with pytest.raises(ParamsError, match="min_jaccard"):
            index.query(probe[1], min_jaccard=bad)  # type: ignore[arg-type]
        with pytest.raises(ParamsError, match="min_jaccard"):
            index.pairs(min_jaccard=bad)  # type: ignore[arg-type]
    with pytest.raises(ParamsError, match="limit"):
        index.query(probe[1], limit=-1)


# The collection is made once and only read: the fixture outliving examples is what is wanted.
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    picks=st.lists(st.integers(0, 35), min_size=1, max_size=30),
    batch_size=st.integers(1, 20),  # batches over 8 take the one-probe path
)
def test_check_in_batches_equals_one_query_per_text(
    make_index: MakeIndex, picks: list[int], batch_size: int
) -> None:
    docs = planted_corpus(n_sources=12, copies=2, seed=11)
    index = _shared(make_index, docs[:20])
    inputs = [docs[i] for i in picks]
    results = list(index.check(inputs, batch_size=batch_size))
    assert [r.matches for r in results] == [index.query(t) for _, t in inputs]


_SHARED: dict[int, Index] = {}


def _shared(make_index: MakeIndex, docs: list[tuple[str, str]]) -> Index:
    """One collection for every example of the property (hypothesis reruns the test body)."""
    if id(make_index) not in _SHARED:
        _SHARED.clear()
        _SHARED[id(make_index)] = make_index(**EXHAUSTIVE)
        _SHARED[id(make_index)].add(docs)
    return _SHARED[id(make_index)]


def _connections_of(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """The connection of each call of storage function ``module.name`` from now on, in order."""
    used: list[int] = []
    original = getattr(module, name)

    def recorded(scope: Any, *args: Any) -> Any:
        used.append(id(scope.conn))
        return original(scope, *args)

    monkeypatch.setattr(module, name, recorded)
    return used


def test_a_probe_split_over_two_connections_gives_the_same_answers(
    make_index: MakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = planted_corpus(n_sources=12, copies=2, seed=5)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:24])
    inputs = [*docs[24:], *docs[:6]]
    used = _connections_of(monkeypatch, buckets, "members_of")
    whole = list(index.check(inputs, batch_size=100))
    assert len(set(used)) == 1
    used.clear()
    monkeypatch.setattr(search, "SPLIT_PROBE_KEYS", 1)  # every batch's keys in two halves
    split = list(index.check(inputs, batch_size=100))
    # On Citus the probe is spread over the workers already and is never split.
    assert len(set(used)) == (1 if index.distributed else 2)
    assert split == whole
    assert any(r.matches for r in split)


def test_stored_texts_read_ahead_on_the_second_connection_give_the_same_answers(
    make_index: MakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every batch's stored texts read and shingled on the second connection (in the batch's
    snapshot) while the first reads signatures, the answers are those read on one connection; a
    failure there is the check's, and the next check runs on both connections as before."""
    docs = planted_corpus(n_sources=12, copies=2, seed=9)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:24])
    inputs = [*docs[24:], *docs[:6]]
    used = _connections_of(monkeypatch, documents, "texts")
    recording = documents.texts
    alone = list(index.check(inputs, batch_size=100))
    first = set(used)
    assert len(first) == 1
    used.clear()
    monkeypatch.setattr(verification, "READ_AHEAD", 0)  # every batch's texts read ahead
    ahead = list(index.check(inputs, batch_size=100))
    assert ahead == alone
    assert any(r.matches for r in ahead)
    # On Citus the texts are read where they live, on the first connection, and never ahead.
    assert len(set(used)) == 1
    assert (set(used) == first) == index.distributed

    def failing(scope: Any, content_ids: Any) -> Any:
        raise RuntimeError("the texts' read failed")

    monkeypatch.setattr(documents, "texts", failing)
    with pytest.raises(RuntimeError, match="the texts' read failed"):
        list(index.check(inputs, batch_size=100))
    monkeypatch.setattr(documents, "texts", recording)
    assert list(index.check(inputs, batch_size=100)) == alone
