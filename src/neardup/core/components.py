"""Clusters: connected components of the graph of verified pairs."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.core.distinct import distinct
from neardup.errors import ParamsError


def component_labels(
    nodes: npt.ArrayLike, left: npt.ArrayLike, right: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """For each node, the smallest node of its connected component under edges (left[i], right[i]).

    Every edge end must be one of ``nodes``. Labels by the smallest member are deterministic: the
    same graph gives the same labels whatever the order of nodes and edges.
    """
    ids = distinct(np.asarray(nodes, dtype=np.int64))
    a = np.asarray(left, dtype=np.int64)
    b = np.asarray(right, dtype=np.int64)
    ia, ib = np.searchsorted(ids, a), np.searchsorted(ids, b)
    if a.size and (
        ia.max(initial=0) >= ids.size
        or ib.max(initial=0) >= ids.size
        or (ids[ia] != a).any()
        or (ids[ib] != b).any()
    ):
        raise ParamsError("every edge end must be one of the nodes")
    # Imported here: only writes form clusters, and a command that only reads need not load scipy.
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    graph = coo_array((np.ones(a.size, dtype=np.int8), (ia, ib)), shape=(ids.size, ids.size))
    _, component = connected_components(graph, directed=False)
    # Smallest id per component: ids are sorted, so the first occurrence of each component wins.
    first = np.full(component.max(initial=-1) + 1, ids.size, dtype=np.int64)
    np.minimum.at(first, component, np.arange(ids.size))
    labels = ids[first[component]]
    # Map back to the caller's node order (which may repeat nodes).
    return labels[np.searchsorted(ids, np.asarray(nodes, dtype=np.int64))]  # type: ignore[no-any-return]


class Forest:
    """A union-find over int64 keys (cluster labels), grown as keys come: ``parent`` holds each
    key's root as an index into ``keys`` (sorted), flattened after every change."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.parent = np.zeros(0, dtype=np.int64)

    def add(self, keys: npt.ArrayLike) -> None:
        """Take in ``keys`` not held yet, each its own root."""
        fresh = np.setdiff1d(np.asarray(keys, dtype=np.int64), self.keys)
        if fresh.size == 0:
            return
        merged = np.union1d(self.keys, fresh)
        moved = np.searchsorted(merged, self.keys)  # old index -> new index
        parent = np.arange(merged.size, dtype=np.int64)
        parent[moved] = moved[self.parent]
        self.keys, self.parent = merged, parent

    def index(self, keys: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The index of each of ``keys`` (all held) in ``keys``."""
        return np.searchsorted(self.keys, np.asarray(keys, dtype=np.int64))

    def flatten(self) -> None:
        """Point every key at its root (after unions made in ``parent`` directly)."""
        out = self.parent
        while True:
            up = out[out]
            if np.array_equal(up, out):
                break
            out = up
        self.parent = out

    def union(self, left: npt.ArrayLike, right: npt.ArrayLike) -> None:
        """Join the classes of ``left[i]`` and ``right[i]`` (taken in if new); each class's root
        is its smallest key."""
        a, b = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
        if a.size == 0:
            return
        self.add(np.concatenate([a, b]))
        nodes = np.arange(self.keys.size, dtype=np.int64)
        ia, ib = self.index(a), self.index(b)
        labels = component_labels(nodes, np.concatenate([nodes, ia]), np.concatenate([self.parent, ib]))
        self.parent = labels

    def roots(self, keys: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The root key of each of ``keys`` (all held)."""
        return self.keys[self.parent[self.index(keys)]]
