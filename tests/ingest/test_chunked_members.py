"""Stored members in chunks: where a batch's buckets hold more stored rows than a chunk, the batch
reads them a chunk of contents at a time and pairs chunk by chunk (``bucket_members._Chunks``,
``pairing.Chunked``), so that what it holds follows the batch, not what is stored. Against brute
force, with chunks of a few contents, on the dense shapes (cliques, chains, mixtures) and on short
records of one template, by one writer and by concurrent ones, and under test_dense's state
machine of adds, replacements, removals and rebuilds; and the bound itself: no read and no
grouping holds more stored rows than a chunk."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from neardup.core.params import Params
from neardup.ingest import before_lock, bucket_members, pairing
from neardup.storage import buckets
from tests._corpus import brute_force_pairs, components
from tests.test_dense import EXHAUSTIVE, DenseMachine, chain, check, clique, mixture

pytestmark = pytest.mark.distributed_variant

CHUNK = 150  # stored bucket rows a chunk holds: two or three contents' under 64 bands


class Reads:
    """Every chunk read (rows the index gave), every chunk grouped (stored rows in it), and every
    chunk read again (rows) for the pairs left to complete."""

    def __init__(self) -> None:
        self.read: list[int] = []
        self.grouped: list[int] = []
        self.again: list[int] = []


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    """Chunks of ``CHUNK`` rows, groups of more than four members linked; what each chunk held."""
    monkeypatch.setattr(pairing, "SMALL_GROUP", 4)
    monkeypatch.setattr(bucket_members, "chunk_rows", lambda plan: CHUNK)
    monkeypatch.setattr(before_lock, "chunk_rows", lambda plan: CHUNK)
    seen = Reads()
    members_of, grouped = buckets.members_of, bucket_members._grouped_chunk

    def reading(*args: Any, **kwargs: Any) -> Any:
        rows = members_of(*args, **kwargs)
        if kwargs.get("most") is not None:
            seen.read.append(int(rows[2].size))
        elif "most" in kwargs:
            seen.again.append(int(rows[2].size))
        return rows

    def grouping(stored: Any, rows: Any, first_new: int) -> Any:
        seen.grouped.append(int(stored[2].size))
        return grouped(stored, rows, first_new)

    monkeypatch.setattr(buckets, "members_of", reading)
    monkeypatch.setattr(bucket_members, "_grouped_chunk", grouping)
    return seen


def _bounded(seen: Reads) -> None:
    """Chunks were read and grouped, none of more stored rows than a chunk (64 bands: a
    content's rows and one more at least)."""
    assert len(seen.grouped) > 3
    assert max(seen.read) <= CHUNK
    assert max(seen.grouped) <= CHUNK


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(lambda: mixture(seed=2), id="mixture"),
        pytest.param(lambda: clique("a", 30, 3) + chain("c", 20, 4), id="clique-and-chain"),
    ],
)
@pytest.mark.parametrize("batch_size", [7, 40])
@pytest.mark.parametrize("concurrent", [False, True], ids=["probe", "concurrent"])
def test_chunked_stored_members_cluster_as_brute_force_says(
    make_index: Callable[..., Any],
    reads: Reads,
    shape: Callable[[], list[tuple[str, str]]],
    batch_size: int,
    concurrent: bool,
) -> None:
    docs = shape()
    random.Random(batch_size).shuffle(docs)
    index = make_index(**EXHAUSTIVE)
    index.add(docs[:30])
    index.add(docs[30:], batch_size=batch_size, concurrent=concurrent)
    check(index, docs)
    _bounded(reads)


def template(n: int, start: int) -> list[tuple[str, str]]:
    """Short records of one template (issue 39's shape): nearly every pair a candidate."""
    text = "record {} of the large request, topic {} and {}"
    return [(f"r{i:04d}", text.format(i, i % 7, i % 3)) for i in range(start, start + n)]


def test_template_records_added_again_in_chunks_store_every_pair_brute_force_finds(
    make_index: Callable[..., Any], reads: Reads
) -> None:
    index = make_index(threshold=0.8, bands=64, rows=2)
    first, second = template(60, 0), template(60, 60)
    index.add(first)
    index.add(second, batch_size=25)
    docs = first + second
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    pairs = {(min(a, b), max(a, b)): j for a, b, j in index.pairs()}
    assert pairs.keys() == truth.keys()
    assert all(pairs[p] == pytest.approx(truth[p], abs=1e-12) for p in truth)
    assert sorted(sorted(c) for c in index.clusters()) == components(set(truth))
    _bounded(reads)
    # Each batch read its stored members in several chunks, from fewer rows than it would hold
    # read at once.
    assert len(reads.read) >= 2 * 3
    assert int(np.median(reads.grouped)) < CHUNK


def test_chunks_are_read_again_only_for_the_buckets_of_clusters_under_the_bound(
    make_index: Callable[..., Any], reads: Reads
) -> None:
    # Copies of a dense cluster complete no pair (a dense cluster stores a connecting subset), so
    # its crowded buckets are read once; a clique under the bound in linked groups is completed,
    # its buckets alone read again.
    dense, small = clique("a", 30, 3), clique("d", 5, 4)
    index = make_index(**EXHAUSTIVE)
    index.add(dense[:20] + small[:3])
    stored_rows = 23 * EXHAUSTIVE["bands"]
    reads.read.clear()
    index.add(dense[20:25], batch_size=5)
    assert sum(reads.read) >= 20 * EXHAUSTIVE["bands"]  # read in chunks, once
    assert reads.again == []
    index.add(dense[25:] + small[3:], batch_size=7)
    # Read again: the small clique's rows (its three stored members', its two new ones' counted
    # as the index gives them), not the dense cluster's.
    assert 0 < sum(reads.again) <= 5 * EXHAUSTIVE["bands"] < stored_rows
    check(index, dense + small)


def test_dense_clusters_in_chunks_match_brute_force_under_any_interleaving(
    database_url: str, schema: str, reads: Reads
) -> None:
    DenseMachine.url, DenseMachine.schema = database_url, schema
    run_state_machine_as_test(
        DenseMachine,
        settings=settings(
            max_examples=10,
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
    assert max(reads.grouped) <= CHUNK
