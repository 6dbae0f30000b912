"""Linking hot groups finds exactly the connected components brute force finds: cliques of
near-copies, chains (each member matches only its neighbours), mixtures, members stored before
and members new, groups given up and left to enumeration."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import linking
from neardup.core.ragged import Ragged

from .test_kernels import forced

THRESHOLD = 0.85


def _sets(shapes: list[tuple[str, int]], seed: int) -> list[np.ndarray]:
    """Shingle sets: per shape, ``n`` members of a clique (a base set with a few values replaced
    each), a chain (windows sliding by one: neighbours at 0.905, two apart at 0.82) or singletons."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    base_value = 0
    for kind, n in shapes:
        base_value += 1_000_000
        if kind == "clique":
            base = base_value + np.arange(60)
            for _ in range(n):
                s = base.copy()
                s[rng.choice(60, 2, replace=False)] = base_value + 500 + rng.integers(0, 10_000, 2)
                out.append(np.unique(s))
        elif kind == "chain":
            out += [base_value + np.arange(i, i + 20) for i in range(n)]
        else:
            out += [base_value + 10_000 * i + np.arange(30) for i in range(n)]
    return [np.asarray(s, dtype=np.uint32) for s in out]


def _shapes(largest: int, most: int) -> st.SearchStrategy[list[tuple[str, int]]]:
    """Up to ``most`` shapes for ``_sets``, each of up to ``largest`` members."""
    kinds = st.sampled_from(["clique", "chain", "alone"])
    return st.lists(st.tuples(kinds, st.integers(1, largest)), min_size=1, max_size=most)


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    common = np.intersect1d(a, b).size
    return common / (a.size + b.size - common)


def _components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(n)]


def _same_partition(a: list[int], b: list[int]) -> bool:
    return len(set(zip(a, b, strict=True))) == len(set(a)) == len(set(b))


@settings(max_examples=60, deadline=None)
@given(
    shapes=_shapes(30, 5),
    seed=st.integers(0, 10**6),
    n_groups=st.integers(1, 6),
    stored_share=st.floats(0, 1),
    max_classes=st.sampled_from([2, 32]),
)
def test_linked_components_equal_brute_force(
    shapes: list[tuple[str, int]], seed: int, n_groups: int, stored_share: float, max_classes: int
) -> None:
    sets = _sets(shapes, seed)
    n = len(sets)
    rng = np.random.default_rng(seed + 1)
    # Ids in a random order, so that stored and new members mix within each shape.
    ids = rng.permutation(n)
    first_new = round(stored_share * n)
    by_id = [sets[i] for i in np.argsort(ids)]  # the set of content id j
    # Groups: each content in one or two random groups (as a content sits in one bucket a band).
    group_lists: list[set[int]] = [set() for _ in range(n_groups)]
    for content in range(n):
        for g in rng.choice(n_groups, size=int(rng.integers(1, 3)), replace=True):
            group_lists[int(g)].add(content)
    groups = [sorted(g) for g in group_lists if len(g) > 1]
    candidates = {(a, b) for g in groups for a, b in itertools.combinations(g, 2)}
    edges = [(a, b) for a, b in candidates if _jaccard(by_id[a], by_id[b]) >= THRESHOLD]
    truth = _components(n, edges)
    # Stored contents arrive joined as their own pairs make them (a stored cluster is exact).
    stored_edges = [(a, b) for a, b in edges if b < first_new]
    parent = np.asarray(_components(n, stored_edges), dtype=np.int64)
    ragged = Ragged.from_arrays(groups, np.int64) if groups else Ragged.from_arrays([], np.int64)
    sigs = np.zeros((n, 4), dtype=np.uint32)
    loads: list[int] = []

    def load(wanted: np.ndarray) -> tuple[np.ndarray, Ragged]:
        loads.append(wanted.size)
        return sigs[wanted], Ragged.from_arrays([by_id[i] for i in wanted.tolist()], np.uint32)

    linking.MAX_CLASSES, old = max_classes, linking.MAX_CLASSES
    try:
        node = np.asarray(ragged.values, dtype=np.int64)
        linked = linking.link(ragged, first_new, node, parent, load, THRESHOLD, 0.0, True)
    finally:
        linking.MAX_CLASSES = old
    # Every pair found passes, and was tested.
    for a, b, j in zip(linked.left.tolist(), linked.right.tolist(), linked.similarity.tolist(), strict=True):
        assert j == _jaccard(by_id[a], by_id[b]) >= THRESHOLD
    # The caller enumerates the groups given up.
    extra = [
        (a, b)
        for g, gone in zip(groups, linked.given_up.tolist(), strict=True)
        if gone
        for a, b in itertools.combinations(g, 2)
        if b >= first_new and _jaccard(by_id[a], by_id[b]) >= THRESHOLD
    ]
    got = _components(
        n, [*zip(linked.left.tolist(), linked.right.tolist(), strict=True), *extra, *stored_edges]
    )
    roots = [int(x) for x in parent]
    assert _same_partition(got, truth)
    # The union-find agrees with the pairs found (the given-up groups' aside).
    if not extra:
        assert _same_partition([linking._roots(parent, np.array([x]))[0] for x in range(n)], truth)
    del roots


def test_a_clique_of_near_copies_costs_about_one_test_a_member() -> None:
    sets = _sets([("clique", 400)], seed=3)
    n = len(sets)
    groups = Ragged.from_arrays([np.arange(n)], np.int64)
    parent = np.arange(n, dtype=np.int64)
    sigs = np.zeros((n, 4), dtype=np.uint32)

    def load(wanted: np.ndarray) -> tuple[np.ndarray, Ragged]:
        return sigs[wanted], Ragged.from_arrays([sets[i] for i in wanted.tolist()], np.uint32)

    linked = linking.link(groups, 0, np.arange(n, dtype=np.int64), parent, load, 0.8, 0.0, True)
    assert linked.left.size == n - 1  # a spanning tree
    assert linked.tested.shape[0] < 2 * n
    assert not linked.given_up.any()


def test_many_classes_give_the_group_up() -> None:
    sets = _sets([("alone", 100)], seed=4)
    n = len(sets)
    groups = Ragged.from_arrays([np.arange(n)], np.int64)
    sigs = np.zeros((n, 4), dtype=np.uint32)

    def load(wanted: np.ndarray) -> tuple[np.ndarray, Ragged]:
        return sigs[wanted], Ragged.from_arrays([sets[i] for i in wanted.tolist()], np.uint32)

    linked = linking.link(
        groups, 0, np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64), load, 0.8, 0.0, True
    )
    assert linked.given_up.tolist() == [True]
    assert linked.tested.shape[0] <= linking.MAX_CLASSES * (linking.MAX_CLASSES + 1)


@settings(max_examples=25, deadline=None)
@given(
    shapes=_shapes(120, 4),
    seed=st.integers(0, 10**6),
    n_groups=st.integers(1, 5),
    stored_share=st.floats(0, 1),
    max_classes=st.sampled_from([2, 32]),
)
def test_the_kernel_links_alike_compiled_and_interpreted(
    shapes: list[tuple[str, int]], seed: int, n_groups: int, stored_share: float, max_classes: int
) -> None:
    sets = _sets(shapes, seed)
    n = len(sets)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(rng.random(n) < 0.6) for _ in range(n_groups)]
    ragged = Ragged.from_arrays([g for g in groups if g.size > 1] or [np.arange(n)], np.int64)
    sigs = rng.integers(0, 4, size=(n, 8), dtype=np.uint32)  # agreements spread around the floor
    # Stored members joined as their shapes make them: a clique or a chain one class, each other
    # member its own, so that groups hold few classes and link rather than give up.
    first_new = round(stored_share * n)
    sizes = [
        size if kind != "alone" else 1 for kind, size in shapes for _ in range(1 if kind != "alone" else size)
    ]
    block = np.repeat(np.arange(len(sizes)), sizes)
    first_of_block = np.r_[0, np.cumsum(sizes)[:-1]]
    start = np.where(np.arange(n) < first_new, first_of_block[block], np.arange(n))

    def load(wanted: np.ndarray) -> tuple[np.ndarray, Ragged]:
        return sigs[wanted], Ragged.from_arrays([sets[i] for i in wanted.tolist()], np.uint32)

    results = []
    linking.MAX_CLASSES, old = max_classes, linking.MAX_CLASSES
    try:
        for mode in ("compiled", "interpreted"):
            parent = start.astype(np.int64)
            with forced(mode):
                linked = linking.link(
                    ragged, first_new, np.asarray(ragged.values), parent, load, THRESHOLD, 0.25, True
                )
            results.append((linked, parent))
    finally:
        linking.MAX_CLASSES = old
    (a, parent_a), (b, parent_b) = results
    for name in ("left", "right", "similarity", "tested", "given_up"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(parent_a, parent_b)
