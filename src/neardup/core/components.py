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
