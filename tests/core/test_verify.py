"""Exact Jaccard of many pairs, signature agreement and the prefilter floor."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import MinHasher, Ragged, agreement
from neardup.core.ragged import concat
from neardup.core.verify import (
    PREFILTER_SIGMAS,
    agreement_with,
    exact_jaccard,
    exact_jaccard_across,
    exact_jaccard_unsorted,
    prefilter_floor,
    signature_agreement,
)
from neardup.errors import ParamsError

sets_strategy = st.lists(st.frozensets(st.integers(0, 60), max_size=30), min_size=1, max_size=12)


@given(sets=sets_strategy, data=st.data())
def test_exact_jaccard_equals_python_sets(sets: list[frozenset[int]], data: st.DataObject) -> None:
    ragged = Ragged.from_arrays([sorted(s) for s in sets], np.uint32)
    n = len(sets)
    left = data.draw(st.lists(st.integers(0, n - 1), max_size=20))
    right = data.draw(st.lists(st.integers(0, n - 1), min_size=len(left), max_size=len(left)))
    got = exact_jaccard(ragged, left, right)
    for g, a, b in zip(got, left, right, strict=True):
        union = sets[a] | sets[b]
        assert g == (len(sets[a] & sets[b]) / len(union) if union else 0.0)


@given(first=sets_strategy, second=sets_strategy, data=st.data())
def test_jaccard_across_two_batches_equals_jaccard_within_their_concatenation(
    first: list[frozenset[int]], second: list[frozenset[int]], data: st.DataObject
) -> None:
    a = Ragged.from_arrays([sorted(s) for s in first], np.uint32)
    b = Ragged.from_arrays([sorted(s) for s in second], np.uint32)
    left = data.draw(st.lists(st.integers(0, len(first) - 1), max_size=20))
    right = data.draw(st.lists(st.integers(0, len(second) - 1), min_size=len(left), max_size=len(left)))
    both = concat(a, b)
    within = exact_jaccard(both, left, [len(first) + r for r in right])
    assert np.array_equal(exact_jaccard_across(a, b, left, right), within)
    with pytest.raises(ParamsError, match="pair indices"):
        exact_jaccard_across(a, b, [0], [len(second)])


# Shingle lists as shingled: repeats, any order, and values that share their high bits (and so
# their first slot in the pair kernel's table) as well as values spread over all 32 bits.
shingled_strategy = st.lists(
    st.lists(
        st.integers(0, 40) | st.integers(0, 31).map(lambda v: v << 27) | st.integers(0, 2**32 - 1),
        max_size=40,
    ),
    min_size=1,
    max_size=10,
)


@given(first=shingled_strategy, second=shingled_strategy, data=st.data())
def test_unsorted_jaccard_equals_jaccard_of_the_distinct_sets(
    first: list[list[int]], second: list[list[int]], data: st.DataObject
) -> None:
    left = data.draw(st.lists(st.integers(0, len(first) - 1), max_size=20))
    right = data.draw(st.lists(st.integers(0, len(second) - 1), min_size=len(left), max_size=len(left)))
    got = exact_jaccard_unsorted(
        Ragged.from_arrays(first, np.uint32), Ragged.from_arrays(second, np.uint32), left, right
    )
    distinct = exact_jaccard_across(
        Ragged.from_arrays([sorted(set(s)) for s in first], np.uint32),
        Ragged.from_arrays([sorted(set(s)) for s in second], np.uint32),
        left,
        right,
    )
    assert np.array_equal(got, distinct)  # float for float: the same counts, the same division

    # Either batch in parts, as a threaded sketch keeps it (empty parts too), gives the same.
    def parts(batch: list[list[int]]) -> list[Ragged]:
        cuts = sorted(data.draw(st.lists(st.integers(0, len(batch)), max_size=3)))
        bounds = [0, *cuts, len(batch)]
        return [Ragged.from_arrays(batch[a:b], np.uint32) for a, b in itertools.pairwise(bounds)]

    assert np.array_equal(
        exact_jaccard_unsorted(parts(first), Ragged.from_arrays(second, np.uint32), left, right), got
    )
    assert np.array_equal(exact_jaccard_unsorted(parts(first), parts(second), left, right), got)
    for g, a, b in zip(got, left, right, strict=True):
        union = set(first[a]) | set(second[b])
        assert g == (len(set(first[a]) & set(second[b])) / len(union) if union else 0.0)


def test_unsorted_jaccard_of_long_near_copies_equals_the_sorted_merge() -> None:
    """Thousands of shingles a side, many repeated (the compiled kernel's table well used)."""
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 2**32, size=n, dtype=np.uint32) for n in (0, 1, 3_000, 5_000, 12_000)]
    edited = [
        np.concatenate([d[: d.size * 9 // 10], d[: d.size // 5], rng.integers(0, 2**32, 50, np.uint32)])
        for d in docs
    ]
    first, second = (
        Ragged.from_arrays(docs, np.uint32),
        Ragged.from_arrays([rng.permutation(e) for e in edited], np.uint32),
    )
    left, right = np.repeat(np.arange(5), 5), np.tile(np.arange(5), 5)
    expected = exact_jaccard_across(
        Ragged.from_arrays([np.unique(d) for d in docs], np.uint32),
        Ragged.from_arrays([np.unique(e) for e in edited], np.uint32),
        left,
        right,
    )
    got = exact_jaccard_unsorted(first, second, left, right)
    assert np.array_equal(got, expected)
    assert 0.8 < got[2 * 5 + 2] < 1.0  # a near copy, not all or nothing
    assert got[0] == 0.0  # two empty lists
    with pytest.raises(ParamsError, match="pair indices"):
        exact_jaccard_unsorted(first, second, [0], [5])
    with pytest.raises(ParamsError, match="pair indices"):
        exact_jaccard_unsorted([first, second], second, [10], [0])
    # A batch against itself (one values array for both sides).
    distinct_edited = Ragged.from_arrays([np.unique(e) for e in edited], np.uint32)
    assert np.array_equal(
        exact_jaccard_unsorted(second, second, left, right),
        exact_jaccard_across(distinct_edited, distinct_edited, left, right),
    )


@given(seed=st.integers(0, 2**32 - 1))
def test_signature_agreement_equals_row_wise_agreement(seed: int) -> None:
    rng = np.random.default_rng(seed)
    mh = MinHasher(64, seed=3)
    sigs = mh.signatures([rng.integers(0, 1000, rng.integers(0, 50)) for _ in range(8)])
    left, right = rng.integers(0, 8, 30), rng.integers(0, 8, 30)
    assert np.array_equal(signature_agreement(sigs, left, right), agreement(sigs[left], sigs[right]))


@given(seed=st.integers(0, 2**32 - 1))
def test_agreement_with_one_signature_equals_pairwise_agreement(seed: int) -> None:
    # Empty sets among them: their all-EMPTY rows agree with nothing, as signature_agreement says.
    rng = np.random.default_rng(seed)
    sigs = MinHasher(64, seed=3).signatures([rng.integers(0, 1000, rng.integers(0, 50)) for _ in range(8)])
    others = np.arange(1, 8)
    expected = signature_agreement(sigs, np.zeros(7, np.int64), others)
    assert np.array_equal(agreement_with(sigs[0], sigs[others]), expected)


def test_agreement_with_refuses_rows_of_another_length() -> None:
    sigs = MinHasher(64, seed=3).signatures([[1, 2, 3], [4, 5]])
    with pytest.raises(ParamsError, match="rows of its length"):
        agreement_with(sigs[0], sigs[:, :32])


def test_bad_indices_are_refused() -> None:
    ragged = Ragged.from_arrays([[1, 2], [2, 3]], np.uint32)
    with pytest.raises(ParamsError, match=r"pair indices must lie in \[0, 2\)"):
        exact_jaccard(ragged, [0], [2])
    with pytest.raises(ParamsError, match="one length"):
        exact_jaccard(ragged, [0, 1], [1])


def test_prefilter_floor_is_sigmas_below_the_threshold() -> None:
    assert prefilter_floor(0.8, 128) == pytest.approx(0.8 - PREFILTER_SIGMAS * math.sqrt(0.8 * 0.2 / 128))
    assert prefilter_floor(1.0, 128) == 1.0
    with pytest.raises(ParamsError):
        prefilter_floor(0.0, 128)


def test_prefilter_loses_almost_no_pair_at_the_threshold() -> None:
    # Pairs with J exactly 0.8 (400 of 500 shared): at most a tiny share fall below the floor.
    rng = np.random.default_rng(5)
    mh = MinHasher(128, seed=1)
    floor = prefilter_floor(0.8, 128)
    below = 0
    for _ in range(400):
        universe = rng.choice(2**31, 500, replace=False)
        a, b = universe[:450], universe[50:]  # |A & B| = 400, |A | B| = 500
        sig = mh.signatures([a, b])
        below += float(agreement(sig[0], sig[1])) < floor
    assert below <= 2
