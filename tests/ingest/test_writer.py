"""The writer's turn at the collection's lock with other writers about (``concurrent``): what a
batch verified and wrote before its turn is reused, what another writer committed meanwhile is
still paired with it, and contents written before the turn are written again when another writer
stored or dropped one the batch counted on. Against a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from neardup.core.params import Params
from neardup.core.sketch import Sketch
from neardup.index import Index
from neardup.ingest import before_lock as prework_module
from neardup.ingest.before_lock import Prework, pair_keys
from neardup.ingest.context import BatchContext
from neardup.ingest.plan import Batch, BatchPlan
from neardup.verification import Verified
from tests._corpus import brute_force_pairs, planted_corpus
from tests._state import collection_state
from tests.ingest._hooks import count_withdrawals

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
    prework, unjudged = prework_module.before_turn, prework_module.verify_unjudged
    seen: list[Prework | None] = []
    reused: list[tuple[int, int]] = []

    def then_another_writer_commits(
        ctx: BatchContext, batch: Batch, sketch: Sketch, *, deferring: bool
    ) -> Prework | None:
        pre = prework(ctx, batch, sketch, deferring=deferring)
        if not seen:
            seen.append(pre)
            other.add(theirs)  # commits between this batch's prework and its turn at the lock
        return pre

    def counting(
        ctx: BatchContext,
        cand: np.ndarray,
        plan: BatchPlan,
        sketch: Sketch,
        verdicts: Verdicts,
        held: Any = None,
    ) -> Verified:
        reused.append((sum(k in verdicts for k in pair_keys(cand, plan)), len(cand)))
        return unjudged(ctx, cand, plan, sketch, verdicts, held)

    monkeypatch.setattr(prework_module, "before_turn", then_another_writer_commits)
    monkeypatch.setattr(prework_module, "verify_unjudged", counting)
    withdrawn = count_withdrawals(monkeypatch)
    try:
        index.add(mine[20:], concurrent=True)
    finally:
        other.close()
    assert seen[0] is not None
    assert seen[0].verdicts  # pairs with the stored documents were judged before the lock
    # Its contents were written before the lock, with ids taken before `theirs` took theirs, and
    # they stood: nobody stored or dropped a text it counted on.
    assert seen[0].written is not None
    assert seen[0].bucket_rows  # and their bucket rows, into the index
    assert withdrawn == []
    ((judged, total),) = reused
    assert 0 < judged < total  # those were not verified again; the pairs with `theirs` were
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)


def _between_prework_and_turn(
    monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]
) -> list[Prework | None]:
    """Run ``act`` once, after the first batch's prework and before its turn at the lock."""
    prework = prework_module.before_turn
    seen: list[Prework | None] = []

    def then_act(ctx: BatchContext, batch: Batch, sketch: Sketch, *, deferring: bool) -> Prework | None:
        pre = prework(ctx, batch, sketch, deferring=deferring)
        if not seen:
            seen.append(pre)
            act()
        return pre

    monkeypatch.setattr(prework_module, "before_turn", then_act)
    return seen


def test_a_new_text_another_writer_stores_meanwhile_is_written_once(
    make_index: Callable[..., Any], database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = planted_corpus(n_sources=20, copies=1, seed=4)
    stored, mine = docs[:20], docs[20:]
    same_text = ("theirs", mine[5][1])  # another id, exactly the text of one of mine
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(stored)
    other = Index.open(database_url, index.name, schema=schema)
    seen = _between_prework_and_turn(monkeypatch, lambda: other.add([same_text]))
    withdrawn = count_withdrawals(monkeypatch)
    try:
        index.add(mine, concurrent=True)
    finally:
        other.close()
    assert seen[0] is not None
    assert seen[0].written is not None
    assert withdrawn == [1]  # the content it wrote for that text went; the others stood
    # The state one writer reaches adding the same in the order they committed: the text stored once.
    one = make_index(threshold=0.8, bands=64, rows=2)
    one.add(stored)
    one.add([same_text])
    one.add(mine)
    got = collection_state(database_url, schema, index.name)
    assert got.comparable() == collection_state(database_url, schema, one.name).comparable()
    assert got.contents == len({text for _, text in [*docs, same_text]})
    assert got.dangling == 0
    truth = brute_force_pairs([*docs, same_text], Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)


def test_a_stored_text_another_writer_drops_meanwhile_is_written_again(
    make_index: Callable[..., Any], database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = planted_corpus(n_sources=20, copies=1, seed=5)
    stored, mine = docs[:20], docs[20:]
    reused = ("again", stored[3][1])  # one of mine has a stored document's exact text
    index = make_index(threshold=0.8, bands=64, rows=2)
    index.add(stored)
    other = Index.open(database_url, index.name, schema=schema)
    seen = _between_prework_and_turn(monkeypatch, lambda: other.remove([stored[3][0]]))
    withdrawn = count_withdrawals(monkeypatch)
    try:
        index.add([*mine, reused], concurrent=True)
    finally:
        other.close()
    assert seen[0] is not None
    assert seen[0].written is not None
    assert withdrawn == [seen[0].written.new_ids.size]  # all went, and were written again
    one = make_index(threshold=0.8, bands=64, rows=2)
    one.add(stored)
    one.remove([stored[3][0]])
    one.add([*mine, reused])
    got = collection_state(database_url, schema, index.name)
    assert got.comparable() == collection_state(database_url, schema, one.name).comparable()
    assert got.dangling == 0
    kept = [d for d in [*docs, reused] if d[0] != stored[3][0]]
    truth = brute_force_pairs(kept, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in index.pairs()} == set(truth)
