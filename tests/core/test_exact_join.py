"""The exact set-similarity join equals brute force over every pair."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import Ragged
from neardup.core.exact_join import SetJoin, similar_pairs
from neardup.errors import ParamsError

# Small universes make large overlaps (and every Jaccard value near a floor) likely.
sets = st.lists(st.frozensets(st.integers(0, 40), max_size=25), max_size=14)
# Floors on achievable values (exact boundaries) as well as arbitrary ones.
floors = st.one_of(st.sampled_from([0.2, 0.25, 1 / 3, 0.5, 0.6, 2 / 3, 0.75, 0.8, 1.0]), st.floats(0.01, 1.0))


def brute_force(
    left: list[frozenset[int]], right: list[frozenset[int]], floor: float
) -> dict[tuple[int, int], float]:
    out = {}
    for i, a in enumerate(left):
        for j, b in enumerate(right):
            if a and b:
                jaccard = len(a & b) / len(a | b)
                if jaccard >= floor:
                    out[(i, j)] = jaccard
    return out


def ragged(sets: list[frozenset[int]]) -> Ragged:
    return Ragged.from_arrays([sorted(s) for s in sets], np.uint32)


@given(left=sets, right=sets, floor=floors)
def test_join_equals_brute_force(
    left: list[frozenset[int]], right: list[frozenset[int]], floor: float
) -> None:
    i, j, jaccard = similar_pairs(ragged(left), ragged(right), floor)
    got = dict(zip(zip(i.tolist(), j.tolist(), strict=True), jaccard.tolist(), strict=True))
    assert got == brute_force(left, right, floor)  # the same floats, not approximately
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == sorted(got)


@given(right=sets, batches=st.lists(sets, max_size=4), floor=floors)
def test_one_prepared_side_joins_many_batches(
    right: list[frozenset[int]], batches: list[list[frozenset[int]]], floor: float
) -> None:
    join = SetJoin(ragged(right), floor)
    assert len(join) == len(right)
    for left in batches:
        i, j, _ = join.pairs(ragged(left))
        assert set(zip(i.tolist(), j.tolist(), strict=True)) == set(brute_force(left, right, floor))


def test_large_random_sets_with_planted_copies() -> None:
    rng = np.random.default_rng(5)
    base = [
        frozenset(rng.choice(3000, size=int(rng.integers(50, 300)), replace=False).tolist())
        for _ in range(150)
    ]
    edited = [frozenset(list(s)[: int(len(s) * 0.85)] + rng.integers(3000, 6000, 20).tolist()) for s in base]
    left, right = base + edited[::2], edited + base[:40]
    i, j, jaccard = similar_pairs(ragged(left), ragged(right), 0.4)
    got = dict(zip(zip(i.tolist(), j.tolist(), strict=True), jaccard.tolist(), strict=True))
    truth = brute_force(left, right, 0.4)
    assert len(truth) > 150
    assert got == truth


def test_empty_sides_and_empty_sets_give_no_pairs() -> None:
    nothing = Ragged.from_arrays([], np.uint32)
    some = ragged([frozenset(), frozenset({1, 2}), frozenset()])
    for left, right in ((nothing, some), (some, nothing), (nothing, nothing)):
        assert all(a.size == 0 for a in similar_pairs(left, right, 0.5))
    i, j, jaccard = similar_pairs(some, some, 0.5)
    assert (i.tolist(), j.tolist(), jaccard.tolist()) == ([1], [1], [1.0])


@pytest.mark.parametrize("floor", [0.0, -0.1, 1.5, float("nan")])
def test_floor_must_lie_in_0_1(floor: float) -> None:
    with pytest.raises(ParamsError, match="floor must be in"):
        SetJoin(ragged([frozenset({1})]), floor)
