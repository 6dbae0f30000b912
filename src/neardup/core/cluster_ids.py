"""Cluster identities that last: which id each cluster keeps when documents join, clusters merge or
a cluster splits. Exact (no approximation): a pure function of the old ids and the new components.

The rule, in one place (``decide_clusters``):

- a cluster keeps its id as contents join it, and as contents leave it while it stays connected;
- when clusters merge, the survivor keeps the oldest id among them (ids are taken from one
  counter, so the smallest id is the oldest), a cluster people can see (two or more documents)
  before a content that was alone, and either before a content new in this write;
- when a cluster splits, none of its parts keeps its id: each part that no other cluster
  carries over gets an id never used before (from ``fresh``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from neardup.core.distinct import distinct

# Ranks of old clusters, the lowest keeping its id in a merge (``decide_clusters``): one people can
# see (two or more documents), a content alone, a content new in this write.
SHOWN, ALONE, NEW = 0, 1, 2


@dataclass(frozen=True)
class ClusterChanges:
    """What ``decide_clusters`` decided: the new id of every node, and the merges and splits."""

    labels: npt.NDArray[np.int64]
    """The cluster id of each node, in the nodes' order."""
    merged: list[tuple[int, list[int]]] = field(default_factory=list)
    """(surviving id, the ids it absorbed) of each merge of clusters that existed before."""
    split: list[tuple[int, list[int]]] = field(default_factory=list)
    """(old id, the ids of its parts) of each cluster that split."""


def decide_clusters(
    old: npt.ArrayLike,
    component: npt.ArrayLike,
    fresh: Callable[[int], int],
    rank: npt.ArrayLike | None = None,
) -> ClusterChanges:
    """The cluster id of each node after a change, from its id before (``old``) and its connected
    component after (``component``: any label shared by exactly the nodes of one component).

    The nodes must be every node of each old cluster that still exists (an old cluster seen only in
    part would look split). ``rank`` (default 0 for all) orders the old clusters a component may
    keep the id of, lowest first, then by id: the writer ranks clusters of two or more documents
    0, contents alone 1 and a batch's new contents 2 (``SHOWN``, ``ALONE``, ``NEW``), one rank
    per old cluster; only clusters of rank 0 that
    meet are reported merged (the others join). ``fresh(n)`` returns the first of ``n``
    consecutive ids never used (called once, only when a cluster split)."""
    old_ids = np.asarray(old, dtype=np.int64)
    comp = np.asarray(component, dtype=np.int64)
    ranks = np.zeros(old_ids.size, dtype=np.int64) if rank is None else np.asarray(rank, dtype=np.int64)
    if old_ids.size == 0:
        return ClusterChanges(np.empty(0, dtype=np.int64))
    # The (old cluster, component) pairs present, and for each old cluster how many components it
    # spans: more than one is a split.
    links = np.unique(np.stack([old_ids, comp, ranks], axis=1), axis=0)
    link_old, link_comp, link_rank = links[:, 0], links[:, 1], links[:, 2]
    olds, spans = np.unique(link_old, return_counts=True)
    whole = spans[np.searchsorted(olds, link_old)] == 1
    # Per component, the id it keeps: its whole old cluster of lowest (rank, id), else (every
    # cluster in it split) a fresh id.
    comps = distinct(comp)
    at = np.searchsorted(comps, link_comp)
    order = np.lexsort((link_old[whole], link_rank[whole], at[whole]))
    firsts = np.unique(at[whole][order], return_index=True)
    big = np.iinfo(np.int64).max
    chosen = np.full(comps.size, big, dtype=np.int64)
    chosen[firsts[0]] = link_old[whole][order][firsts[1]]
    orphans = np.flatnonzero(chosen == big)
    if orphans.size:
        chosen[orphans] = fresh(int(orphans.size)) + np.arange(orphans.size, dtype=np.int64)
    labels = chosen[np.searchsorted(comps, comp)]
    # Events, grouped by sorting (links are sorted by old id, then component): a merge is a
    # component reached by two or more whole old clusters, a split an old cluster that spans two
    # or more components.
    carried = whole & (link_rank == 0)
    by_comp = np.lexsort((link_old[carried], link_comp[carried]))
    carried_comp, carried_old = link_comp[carried][by_comp], link_old[carried][by_comp]
    merged = [
        (int(ids[0]), ids[1:].tolist())
        for ids in np.split(carried_old, np.flatnonzero(np.diff(carried_comp)) + 1)
        if ids.size > 1
    ]
    parted = ~whole
    split_old, split_comp = link_old[parted], link_comp[parted]
    split = [
        (int(split_old[group[0]]), sorted(chosen[np.searchsorted(comps, split_comp[group])].tolist()))
        for group in np.split(np.arange(split_old.size), np.flatnonzero(np.diff(split_old)) + 1)
        if group.size
    ]
    return ClusterChanges(labels, merged, split)
