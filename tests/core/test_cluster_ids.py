"""decide_clusters against the rule stated plainly over Python sets (the oracle)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.cluster_ids import ALONE, NEW, SHOWN, decide_clusters


def _fresh_from(start: int) -> tuple[list[int], Callable[[int], int]]:
    taken: list[int] = []

    def fresh(n: int) -> int:
        first = start + sum(taken)
        taken.append(n)
        return first

    return taken, fresh


def _no_fresh(n: int) -> int:
    raise AssertionError(f"{n} fresh ids asked for where no cluster split")


@st.composite
def changes(draw: st.DrawFn) -> tuple[list[int], list[int], list[bool]]:
    n = draw(st.integers(0, 30))
    old = draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))
    comp = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    new = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    # A new node is a cluster of its own, labelled by an id no old cluster has.
    old = [100 + i if is_new else o for i, (o, is_new) in enumerate(zip(old, new, strict=True))]
    return old, comp, new


@given(changes())
def test_the_rule_holds(case: tuple[list[int], list[int], list[bool]]) -> None:
    old, comp, new = case
    taken, fresh = _fresh_from(1000)
    got = decide_clusters(old, comp, fresh, [NEW if n else SHOWN for n in new])
    labels = got.labels.tolist()
    assert len(taken) <= 1
    members: dict[int, set[int]] = {}
    for i, c in enumerate(comp):
        members.setdefault(c, set()).add(i)
    parts_of: dict[int, set[int]] = {}
    for o, c in zip(old, comp, strict=True):
        parts_of.setdefault(o, set()).add(c)
    by_comp = {}
    for c, nodes in members.items():
        ids = {labels[i] for i in nodes}
        assert len(ids) == 1  # one id per component
        by_comp[c] = ids.pop()
        whole = {old[i] for i in nodes if len(parts_of[old[i]]) == 1}
        carried = {o for o in whole if not any(new[i] for i in nodes if old[i] == o)}
        if carried:
            assert by_comp[c] == min(carried)  # the oldest survives a merge
        elif whole:
            assert by_comp[c] == min(whole)
        else:
            assert by_comp[c] >= 1000  # every cluster in it split: an id never used
    assert len(set(by_comp.values())) == len(by_comp)  # distinct components, distinct ids
    for o, parts in parts_of.items():
        if len(parts) > 1:
            assert o not in by_comp.values()  # a split cluster's id goes with none of its parts
    assert sorted(o for o, _ in got.split) == sorted(o for o, p in parts_of.items() if len(p) > 1)
    for survivor, absorbed in got.merged:
        assert survivor < min(absorbed)
        assert survivor in by_comp.values()


def test_join_merge_and_split_in_words() -> None:
    # Clusters 5 and 9 merge with a new content (id 20): 5 survives, 9 is absorbed.
    got = decide_clusters([5, 5, 9, 20], [0, 0, 0, 0], _no_fresh, [SHOWN, SHOWN, SHOWN, NEW])
    assert got.labels.tolist() == [5, 5, 5, 5]
    assert got.merged == [(5, [9])]
    assert got.split == []
    # A cluster people see (9) keeps its id over an older content that was alone (3), which joins it.
    got = decide_clusters([3, 9, 9], [0, 0, 0], _no_fresh, [ALONE, SHOWN, SHOWN])
    assert got.labels.tolist() == [9, 9, 9]
    assert got.merged == []
    # Cluster 5 splits in two: both parts get ids never used (30, 31).
    got = decide_clusters([5, 5, 5], [1, 1, 2], lambda n: 30)
    assert got.labels.tolist() == [30, 30, 31]
    assert got.split == [(5, [30, 31])]
    # Cluster 5 loses a member but stays connected: it keeps its id.
    got = decide_clusters(np.array([5, 5]), np.array([3, 3]), _no_fresh)
    assert got.labels.tolist() == [5, 5]
    assert got.merged == []
    assert got.split == []
