"""The prefix filter: every pair of sets at or above the threshold shares a prefix group, for any
sets and thresholds (a law, against brute force); pairs below it may or may not."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import Ragged
from neardup.core.candidates import candidate_pairs, pair_count
from neardup.core.params import Params
from neardup.core.prefix_filter import prefix_groups, prefix_lengths, prefix_parts, prefixes
from neardup.core.sketch import Sketcher
from neardup.errors import ParamsError

# Small alphabets make many overlapping sets, and pairs right at the threshold.
sets_strategy = st.lists(st.sets(st.integers(0, 12), max_size=10), min_size=2, max_size=14)
thresholds = st.sampled_from([0.1, 0.25, 1 / 3, 0.5, 0.6, 2 / 3, 0.7, 0.75, 0.8, 0.9, 1.0]) | st.floats(
    0.01, 1.0
)


def _ragged(sets: list[set[int]]) -> Ragged:
    return Ragged.from_arrays([sorted(s) for s in sets], np.uint32)


def _jaccard(a: set[int], b: set[int]) -> float:
    # As the verification kernels compute it: a float division of the two counts.
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@given(sets=sets_strategy, threshold=thresholds, first_new=st.integers(0, 14), budget=st.integers(1, 30))
def test_every_pair_at_or_above_the_threshold_shares_a_prefix_group_and_passes_the_positional_filter(
    sets: list[set[int]], threshold: float, first_new: int, budget: int
) -> None:
    ids = np.arange(len(sets), dtype=np.int64)
    groups = prefix_groups(ids, _ragged(sets), threshold)
    shared = {tuple(p) for p in candidate_pairs(groups.groups, first_new).tolist()}
    parts = list(prefix_parts(groups, threshold, first_new, budget))
    kept = [tuple(p) for part in parts for p in part.tolist()]
    assert len(kept) == len(set(kept))  # each pair in one part
    assert set(kept) <= shared
    for a, b in itertools.combinations(range(len(sets)), 2):
        if b >= first_new and _jaccard(sets[a], sets[b]) >= threshold:
            assert (a, b) in shared
            assert (a, b) in kept


@given(sets=sets_strategy, threshold=thresholds)
def test_prefixes_follow_one_order_and_the_lemmas_length(sets: list[set[int]], threshold: float) -> None:
    pre = prefixes(_ragged(sets), threshold)
    counts: dict[int, int] = {}
    for s in sets:
        for v in s:
            counts[v] = counts.get(v, 0) + 1
    rank = {v: r for r, v in enumerate(sorted(counts, key=lambda v: (counts[v], v)))}
    for s, got in zip(sets, pre, strict=True):
        need = -(-Fraction(threshold) * len(s) // 1)  # ceil(t * |A|) in exact arithmetic
        length = min(len(s), len(s) - max(int(need), 0) + 1)
        # One longer where t * |A| rounds to an integer (a float division may reach t from below).
        assert length <= len(got) <= min(len(s), length + 1)
        assert got.tolist() == sorted(rank[v] for v in s)[: len(got)]


def test_ids_keep_their_sign_and_singletons_make_no_group() -> None:
    sets = _ragged([{1, 2, 3}, {1, 2, 3}, {7, 8, 9}])
    groups = prefix_groups(np.array([-5, 4, 9]), sets, 0.8)
    assert candidate_pairs(groups.groups).tolist() == [[-5, 4]]
    assert [p.tolist() for p in prefix_parts(groups, 0.8)] == [[[-5, 4]]]
    assert pair_count(groups.groups) == 1


def test_prefix_lengths_at_integer_products_and_bounds() -> None:
    # 0.8 * 5 is 4.000000000000001 in floating point: the prefix must still be 5 - 4 + 1.
    assert prefix_lengths([5, 10, 0, 1], 0.8).tolist() == [2, 3, 0, 1]
    assert prefix_lengths([7], 1.0).tolist() == [1]
    with pytest.raises(ParamsError):
        prefix_lengths([3], 0.0)


def test_records_of_issue_39_share_far_fewer_prefix_groups_than_they_share_shingles() -> None:
    texts = [f"record {i} of the large request, topic {i % 997} and {i % 13}" for i in range(3_000)]
    sets = Sketcher(Params(bands=16, rows=8)).shingles(texts, unique=True)
    ids = np.arange(len(texts), dtype=np.int64)
    groups = prefix_groups(ids, sets, 0.8)
    assert pair_count(groups.groups) < len(texts) ** 2 // 2 // 20
    kept = sum(part.shape[0] for part in prefix_parts(groups, 0.8))
    assert kept < pair_count(groups.groups) // 4
