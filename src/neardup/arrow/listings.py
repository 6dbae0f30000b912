"""A collection's listings as Arrow tables: its pairs and its clusters, with the columns and
names the command line writes (``neardup pairs --format parquet``); each is read whole into
memory, as a table is.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from neardup.arrow.writing import table_of
from neardup.index import Index

PAIRS = (("id_a", "string"), ("id_b", "string"), ("jaccard", "double"))
CLUSTERS = (("cluster", "int64"), ("id", "string"), ("representative", "bool"))


def cluster_rows(clusters: Iterator[list[str]]) -> Iterator[tuple[int, str, bool]]:
    """(cluster number from 1, id, whether it is the representative) of each member of each cluster."""
    for n, ids in enumerate(clusters, 1):
        for i, doc_id in enumerate(ids):
            yield n, doc_id, i == 0


def pairs_table(index: Index, min_jaccard: float | None = None) -> pa.Table:
    """Every stored pair as ``Index.pairs`` lists it (id_a, id_b, jaccard), as one table in memory."""
    names, types = zip(*PAIRS, strict=True)
    return table_of(names, types, index.pairs(min_jaccard))


def clusters_table(index: Index) -> pa.Table:
    """Every cluster as ``Index.clusters`` lists it, one row a member: cluster (numbered from 1 in
    the listing's order), id, and whether it is the representative; one table in memory."""
    names, types = zip(*CLUSTERS, strict=True)
    return table_of(names, types, cluster_rows(index.clusters()))
