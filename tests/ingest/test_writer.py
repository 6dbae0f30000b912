"""The writer's turn at the collection's lock with other writers about (``concurrent``): what a
batch verified before its turn is reused, and what another writer committed meanwhile is still
paired with it. Against a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from neardup.core.params import Params
from neardup.core.sketch import Sketch
from neardup.index import Index
from neardup.ingest.plan import Batch, BatchPlan
from neardup.ingest.writer import Prework, Writer, pair_keys
from tests._corpus import brute_force_pairs, planted_corpus

pytestmark = pytest.mark.distributed_variant

Verdicts = dict[tuple[int, int], float]


def test_pairs_with_what_another_writer_commits_between_prework_and_turn_are_found(
    make_index: Callable[..., Any], database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = planted_corpus(n_sources=40, copies=2, seed=9)  # 120 documents, shuffled
    mine, theirs = docs[::2], docs[1::2]  # near-copies of one source on both sides
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(mine[:20])  # stored before: the later batch's prework pairs with these
    other = Index.open(database_url, index.name, schema=schema)
    prework, unjudged = Writer._prework, Writer._verify_unjudged
    seen: list[Prework | None] = []
    reused: list[tuple[int, int]] = []

    def then_another_writer_commits(self: Writer, batch: Batch, sketch: Sketch) -> Prework | None:
        pre = prework(self, batch, sketch)
        if not seen:
            seen.append(pre)
            other.add(theirs)  # commits between this batch's prework and its turn at the lock
        return pre

    def counting(
        self: Writer, cand: np.ndarray, plan: BatchPlan, sketch: Sketch, verdicts: Verdicts
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        reused.append((sum(k in verdicts for k in pair_keys(cand, plan)), len(cand)))
        return unjudged(self, cand, plan, sketch, verdicts)

    monkeypatch.setattr(Writer, "_prework", then_another_writer_commits)
    monkeypatch.setattr(Writer, "_verify_unjudged", counting)
    try:
        index.add(mine[20:], concurrent=True)
    finally:
        other.close()
    assert seen[0] is not None
    assert seen[0].verdicts  # pairs with the stored documents were judged before the lock
    ((judged, total),) = reused
    assert 0 < judged < total  # those were not verified again; the pairs with `theirs` were
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)
