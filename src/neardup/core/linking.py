"""Linking hot groups: the connected components of a group's verified pairs without its pairs.

A group (the members of one LSH bucket) of k near-copies holds k²/2 candidate pairs. Clusters
are the connected components of the candidates at or above the threshold, and a component needs
only one verified pair to take in a member: ``link`` tests each new member, in its group, against
one member of each class (a set of members already connected) of the members before it, and on
a failure against that class's other members there, until one passes. So a group of near-copies
costs about one test a member, and exactness holds: a member with a pair at or above the
threshold in some class is joined to it, whatever the shape (a chain, where each copy matches
only its neighbours, included). The tests run in a numba kernel (``_kernels.link_groups``) on
the members' signatures and shingle sets; stored members' are asked of the caller (``Load``)
only for the members tested, in rounds. A group whose members fall in many classes (short texts
of one template: nearly every pair a candidate, few a pair) is given up and left to the caller's
exact enumeration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.core import _kernels
from neardup.core.distinct import distinct
from neardup.core.ragged import Ragged, concat

Ids = npt.NDArray[np.int64]
Sigs = npt.NDArray[np.uint32]
Load = Callable[[Ids], tuple[Sigs, Ragged | None]]
"""Signatures and sorted distinct shingle sets (None without texts) of contents, in their order."""

# Classes a group may hold before it is given up: past it, a member is tested against too many.
MAX_CLASSES = 32
# Tests a group may cost per member before it is given up (its pairs then enumerated): near-copies
# cost about one, a chain a few; far more means classes that are not pairs of each other.
TESTS_PER_MEMBER = 16


@dataclass(frozen=True)
class Linked:
    """What ``link`` found: the pairs that passed (member ids, smaller first as in the groups,
    and their similarities), every pair tested, and the groups given up."""

    left: Ids
    right: Ids
    similarity: npt.NDArray[np.float64]
    tested: npt.NDArray[np.int64]
    """Pairs tested (n x 2, member ids as in the groups), passed or not, in any order, repeats
    possible."""
    given_up: npt.NDArray[np.bool_]
    """Per group: given up, its pairs left to the caller."""


def link(
    groups: Ragged,
    first_new: int,
    node: Ids,
    parent: Ids,
    load: Load,
    threshold: float,
    floor: float,
    exact: bool,
    loaded: tuple[Ids, Sigs, Ragged | None] | None = None,
) -> Linked:
    """Join the new members (ids at or above ``first_new``) of ``groups`` (each sorted ascending,
    as ``candidates.bucket_groups`` makes them; stored members below ``first_new``, negative ones
    included) to the classes of the members before them in each group, in the union-find
    ``parent`` (updated in place) over nodes: member position q is node ``node[q]``; nodes already
    joined in ``parent`` are one class. A test passes where the signature agreement reaches
    ``floor`` and, with ``exact``, the exact Jaccard reaches ``threshold`` (without ``exact``, the
    agreement itself). ``load(ids)`` gives the signatures and sets of contents (their ids, made
    positive); ``loaded``: those of some contents given at once (ids sorted)."""
    members, offsets, lengths, group_of = _laid_out(groups)
    is_new = members >= first_new
    positions = np.flatnonzero(is_new)
    steps = positions[np.lexsort((group_of[positions], members[positions]))]
    rows = _Rows(np.abs(members), loaded)
    # Every new member's row, and the latest stored member of each class in each group (the hub a
    # new member is tested against first), before the first step.
    rows.load(load, np.abs(members[is_new]))
    rows.load(load, np.abs(members[_stored_hubs(group_of, node, is_new, parent)]))
    scratch = _Scratch.sized(members.size, lengths, steps.size)
    cursor = 0
    node = np.ascontiguousarray(node, dtype=np.int64)
    while True:
        status, cursor = _kernels.link_groups(
            members,
            offsets,
            group_of,
            node,
            rows.row,
            is_new,
            steps,
            rows.set_values,
            rows.set_offsets,
            rows.sigs,
            float(threshold),
            float(floor),
            bool(exact),
            parent,
            scratch.head,
            scratch.tail,
            scratch.next_pos,
            scratch.count,
            scratch.state,
            scratch.work,
            MAX_CLASSES,
            scratch.cap_work,
            scratch.found,
            scratch.found_sim,
            scratch.tested,
            scratch.counters,
            scratch.need,
            int(cursor),
        )
        if status == _kernels.LINK_DONE:
            break
        if status == _kernels.LINK_NEED:
            # Every stored member of the groups that wait not loaded yet, at once: a hub that
            # failed there is likely to fail again, and a round trip a member would cost more.
            waiting = np.isin(group_of, distinct(group_of[scratch.need[: scratch.counters[2]]]))
            rows.load(load, np.abs(members[waiting & ~is_new & (rows.row < 0)]))
        else:
            scratch.grow()
    n_found, n_tested = int(scratch.counters[0]), int(scratch.counters[1])
    pairs = members[scratch.found[:n_found]]
    return Linked(
        pairs[:, 0],
        pairs[:, 1],
        scratch.found_sim[:n_found].copy(),
        members[scratch.tested[:n_tested]],
        scratch.state == 2,
    )


def _laid_out(groups: Ragged) -> tuple[Ids, Ids, Ids, Ids]:
    """(members, offsets, lengths, group of each member position) of ``groups`` as the kernel
    takes them."""
    members = np.asarray(groups.values, dtype=np.int64)
    offsets = np.asarray(groups.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    return members, offsets, lengths, np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)


@dataclass
class _Scratch:
    """The linking kernel's working arrays: per member position (class lists and what a waiting
    group needs), per group (its classes, state and work against its cap), and the pairs found
    and tested, grown when full; ``counters``: pairs found, pairs tested, members needed."""

    head: Ids
    tail: Ids
    next_pos: Ids
    count: Ids
    state: Ids
    work: Ids
    cap_work: Ids
    found: Ids
    found_sim: npt.NDArray[np.float64]
    tested: Ids
    counters: Ids
    need: Ids

    @classmethod
    def sized(cls, size: int, lengths: Ids, steps: int) -> _Scratch:
        """Arrays for ``size`` member positions in groups of ``lengths``, with room for twice as
        many pairs as the ``steps`` (new members) to start with."""
        capacity = max(16, 2 * steps)
        return cls(
            head=np.zeros(size, dtype=np.int64),
            tail=np.zeros(size, dtype=np.int64),
            next_pos=np.full(size, -1, dtype=np.int64),
            count=np.zeros(lengths.size, dtype=np.int64),
            state=np.zeros(lengths.size, dtype=np.int64),
            work=np.zeros(lengths.size, dtype=np.int64),
            cap_work=TESTS_PER_MEMBER * lengths,
            found=np.zeros((capacity, 2), dtype=np.int64),
            found_sim=np.zeros(capacity, dtype=np.float64),
            tested=np.zeros((capacity, 2), dtype=np.int64),
            counters=np.zeros(3, dtype=np.int64),
            need=np.zeros(max(size, 1), dtype=np.int64),
        )

    def grow(self) -> None:
        """Room for twice as many pairs found and tested (the kernel stopped, full)."""
        self.found = np.concatenate([self.found, np.zeros_like(self.found)])
        self.found_sim = np.concatenate([self.found_sim, np.zeros_like(self.found_sim)])
        self.tested = np.concatenate([self.tested, np.zeros_like(self.tested)])


def crowded(groups: Ragged, first_new: int, roots: Ids) -> npt.NDArray[np.bool_]:
    """Per group: whether its stored members (below ``first_new``) fall in more than
    ``MAX_CLASSES`` classes (``roots[q]``: member position q's class), so that ``link`` would give
    it up at its first step, or later at best: its caller gives it up at once, before ``link``
    holds a row per member and loads every class's latest member. A group of short records of
    one template (singletons by the hundred thousand) is one; merges made while linking could
    only have brought its classes down to the cap, and its enumeration is exact too."""
    members = np.asarray(groups.values, dtype=np.int64)
    group = np.repeat(np.arange(len(groups), dtype=np.int64), groups.lengths())
    stored = members < first_new
    g, r = group[stored], np.asarray(roots, dtype=np.int64)[stored]
    order = np.lexsort((r, g))
    g, r = g[order], r[order]
    first = np.r_[True, (g[1:] != g[:-1]) | (r[1:] != r[:-1])] if g.size else np.zeros(0, bool)
    return np.bincount(g[first], minlength=len(groups)) > MAX_CLASSES


def _stored_hubs(group_of: Ids, node: Ids, is_new: npt.NDArray[np.bool_], parent: Ids) -> Ids:
    """Positions of the latest stored member of each class (root of its node) in each group."""
    stored = np.flatnonzero(~is_new)
    if stored.size == 0:
        return stored
    root = _roots(parent, node[stored])
    # Within a group, members of one root need not be adjacent: the largest position of each.
    order = np.lexsort((stored, root, group_of[stored]))
    g, r, q = group_of[stored][order], root[order], stored[order]
    last = np.r_[(g[1:] != g[:-1]) | (r[1:] != r[:-1]), True]
    return q[last]


def _roots(parent: Ids, nodes: Ids) -> Ids:
    """The root of each node in the union-find ``parent`` (vectorised pointer jumping)."""
    out = parent[nodes]
    while True:
        up = parent[out]
        if np.array_equal(up, out):
            return out
        out = up


class _Rows:
    """Signatures and sets loaded so far, one row per content, and each member position's row."""

    def __init__(self, ids: Ids, loaded: tuple[Ids, Sigs, Ragged | None] | None) -> None:
        self._ids = ids
        self.row = np.full(ids.size, -1, dtype=np.int64)
        self.sigs = np.zeros((0, 1), dtype=np.uint32)
        self.set_values = np.zeros(0, dtype=np.uint32)
        self.set_offsets = np.zeros(1, dtype=np.int64)
        self._sets: Ragged | None = None
        self._rows = 0
        self._loaded = np.zeros(0, dtype=np.int64)
        if loaded is not None:
            self._add(*loaded)

    def load(self, load: Load, ids: Ids) -> None:
        """Load the contents ``ids`` not loaded yet."""
        wanted = distinct(ids)
        wanted = wanted[~np.isin(wanted, self._loaded)]
        if wanted.size:
            sigs, sets = load(wanted)
            self._add(wanted, sigs, sets)

    def _add(self, ids: Ids, sigs: Sigs, sets: Ragged | None) -> None:
        first = self._rows
        self.sigs = sigs.astype(np.uint32) if first == 0 else np.concatenate([self.sigs, sigs])
        if sets is not None:
            self._sets = sets if self._sets is None else concat(self._sets, sets)
            self.set_values = np.ascontiguousarray(self._sets.values, dtype=np.uint32)
            self.set_offsets = np.asarray(self._sets.offsets, dtype=np.int64)
        self._rows += ids.size
        self._loaded = np.union1d(self._loaded, ids)
        order = np.argsort(ids, kind="stable")
        at = np.searchsorted(ids, self._ids, sorter=order)
        at = np.minimum(at, ids.size - 1)
        hit = ids[order[at]] == self._ids
        self.row[hit] = first + order[at[hit]]
