"""Candidate pairs from bucket groups: each pair once, only pairs involving new documents."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import Ragged
from neardup.core.candidates import Membership, candidate_pairs, candidate_parts, pair_count

groups_strategy = st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True), max_size=15)


@given(groups=groups_strategy, first_new=st.integers(0, 41))
def test_candidate_pairs_equal_a_plain_enumeration(groups: list[list[int]], first_new: int) -> None:
    expected = set()
    for group in groups:
        for a, b in itertools.combinations(sorted(group), 2):
            if b >= first_new:
                expected.add((a, b))
    got = candidate_pairs(Ragged.from_arrays(groups, np.int64), first_new)
    assert got.shape[1] == 2
    assert [tuple(p) for p in got.tolist()] == sorted(expected)


def test_large_ids_take_the_general_path() -> None:
    big = 2**40
    got = candidate_pairs(Ragged.from_arrays([[big, big + 1], [big + 1, big]], np.int64))
    assert got.tolist() == [[big, big + 1]]


def test_unsorted_groups_and_empty_groups_are_handled() -> None:
    # Group 0 descends inside; group 1 is empty; the last group is empty too.
    groups = Ragged(np.array([5, 2, 9, 1, 3], dtype=np.int64), np.array([0, 2, 2, 5, 5], dtype=np.int64))
    assert candidate_pairs(groups).tolist() == [[1, 3], [1, 9], [2, 5], [3, 9]]


@given(groups=groups_strategy, first_new=st.integers(0, 41), budget=st.integers(1, 30))
def test_candidate_parts_hold_each_pair_once_within_the_budget(
    groups: list[list[int]], first_new: int, budget: int
) -> None:
    ragged = Ragged.from_arrays(groups, np.int64)
    parts = [[tuple(p) for p in part.tolist()] for part in candidate_parts(ragged, first_new, budget)]
    together = [p for part in parts for p in part]
    assert sorted(together) == [tuple(p) for p in candidate_pairs(ragged, first_new).tolist()]
    # Each part covers a range of larger ids of its own, in order.
    larger = [(min(b for _, b in part), max(b for _, b in part)) for part in parts]
    assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(larger))
    # A part holds more than the budget (repeats counted) only when one larger id alone has more.
    for part in parts:
        ids = {b for _, b in part}
        assert len(ids) == 1 or len(part) <= budget


@given(groups=groups_strategy, first_new=st.integers(0, 41))
def test_pair_count_is_the_enumerations_length(groups: list[list[int]], first_new: int) -> None:
    expected = sum(
        1 for group in groups for a, b in itertools.combinations(sorted(group), 2) if b >= first_new
    )
    assert pair_count(Ragged.from_arrays(groups, np.int64), first_new) == expected


@given(groups=groups_strategy, pairs=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=30))
def test_membership_says_whether_two_members_share_a_group(
    groups: list[list[int]], pairs: list[tuple[int, int]]
) -> None:
    members = {m for group in groups for m in group}
    pairs = [(a, b) for a, b in pairs if a in members and b in members]
    membership = Membership(Ragged.from_arrays(groups, np.int64))
    left = np.array([a for a, _ in pairs], dtype=np.int64)
    right = np.array([b for _, b in pairs], dtype=np.int64)
    expected = [any(a in g and b in g for g in groups) for a, b in pairs]
    assert membership.share(left, right).tolist() == expected
