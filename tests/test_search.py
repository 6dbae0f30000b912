"""A query answers with the exact Jaccard of every stored text at or above its floor."""

from __future__ import annotations

from typing import Any

import pytest

from neardup.index import Index

pytestmark = pytest.mark.distributed_variant

BASE = (
    "the quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill "
    "and the birds sing in the old oak tree beside the river bank on a bright summer morning"
)


def test_query_agrees_with_brute_force_over_every_stored_text(make_index: Any) -> None:
    index: Index = make_index(threshold=0.5)
    docs = [(f"d{i}", BASE + " word" * i) for i in range(8)] + [("far", "an unrelated text " * 9)]
    index.add(docs)
    sketcher = index._collection.sketcher  # the collection's own shingles: the oracle's sets

    def shingles(text: str) -> set[int]:
        return set(sketcher.shingles([text], unique=True)[0].tolist())

    query = shingles(BASE)
    exact = {d: len(query & shingles(t)) / len(query | shingles(t)) for d, t in docs}
    expected = {d: j for d, j in exact.items() if j >= 0.5}
    assert "far" not in expected
    assert len(expected) >= 6
    # Near copies of short texts share a bucket at this threshold: the answer is the brute-force
    # one, each document with its exact Jaccard.
    assert dict(index.query(BASE, min_jaccard=0.5)) == pytest.approx(expected)


def test_a_limited_query_and_check_answer_the_true_best_outside_dense_clusters(
    make_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neardup import search

    # Two candidates read per dense cluster: a cap that, applied to every candidate, would leave
    # out most of this cluster's near-copies (under the dense size) and so the true best.
    monkeypatch.setattr(search, "QUERY_CANDIDATES", 2)
    monkeypatch.setattr(search, "CANDIDATES_PER_ANSWER", 1)
    index: Index = make_index(threshold=0.5)
    words = BASE.split()
    # Copies with ever fewer words changed, the closest stored last (highest content ids).
    docs = [
        (f"d{k:02d}", " ".join("changed" if i < k else w for i, w in enumerate(words)))
        for k in range(12, 0, -1)
    ]
    index.add(docs)
    assert not index.stats().dense_clusters
    everything = index.query(BASE)
    assert len(everything) == 12
    for limit in (1, 3):
        assert index.query(BASE, limit=limit) == everything[:limit]
    batch = [(f"q{i}", BASE) for i in range(10)]  # more than a few: one probe for the batch
    for result in index.check(batch, limit=1):
        assert result.matches == everything[:1]


def test_a_limited_query_of_a_dense_cluster_reads_a_few_of_its_members(
    make_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neardup import search

    monkeypatch.setattr(search, "QUERY_CANDIDATES", 2)
    monkeypatch.setattr(search, "CANDIDATES_PER_ANSWER", 1)
    index: Index = make_index(threshold=0.5, dense_cluster_size=4)
    words = BASE.split()
    docs = [
        (f"d{k:02d}", " ".join("changed" if i == k else w for i, w in enumerate(words))) for k in range(12)
    ]
    index.add(docs)
    assert index.stats().dense_clusters == 1
    found = index.query(BASE, limit=1)
    assert len(found) == 1
    assert found[0][1] >= 0.5
