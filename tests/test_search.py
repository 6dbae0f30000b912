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
    sketcher = index._writer.sketcher  # the collection's own shingles: the oracle's sets

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
