"""A collection's listings as Arrow tables: its pairs and its clusters, with the columns and
names the command line writes (``neardup pairs --format parquet``); each is read whole into
memory, as a table is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa

from neardup.arrow.writing import table_of


class Cluster(Protocol):
    """What ``Index.clusters`` yields (``neardup.index.Cluster``): its ids, its id, its representative."""

    id: int
    representative: str

    def __iter__(self) -> Iterator[str]: ...


class Index(Protocol):
    """The listings of ``neardup.index.Index`` read here (a protocol: the index imports this package)."""

    def pairs(self, min_jaccard: float | None = None) -> Iterator[tuple[str, str, float]]: ...

    def clusters(self) -> Iterator[Cluster]: ...


PAIRS = (("id_a", "string"), ("id_b", "string"), ("jaccard", "double"))
CLUSTERS = (("cluster", "int64"), ("id", "string"), ("representative", "bool"))


def cluster_rows(clusters: Iterator[Cluster]) -> Iterator[tuple[int, str, bool]]:
    """(the cluster's lasting id, id, whether it is the representative) of each cluster member."""
    for cluster in clusters:
        for doc_id in cluster:
            yield cluster.id, doc_id, doc_id == cluster.representative


def pairs_table(index: Index, min_jaccard: float | None = None) -> pa.Table:
    """Every stored pair as ``Index.pairs`` lists it (id_a, id_b, jaccard), as one table in memory."""
    names, types = zip(*PAIRS, strict=True)
    return table_of(names, types, index.pairs(min_jaccard))


def clusters_table(index: Index) -> pa.Table:
    """Every cluster as ``Index.clusters`` lists it, one row a member: cluster (its lasting id),
    id, and whether it is the representative (the keep policy's); one table in memory."""
    names, types = zip(*CLUSTERS, strict=True)
    return table_of(names, types, cluster_rows(index.clusters()))
