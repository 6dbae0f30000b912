"""Listings of pairs and clusters, streamed on a connection of their own.

A listing gets its own connection, so that an iterator left open never holds a transaction on the
index's connection: writes made meanwhile commit on their own, and the listing keeps reading the one
snapshot it began with (a repeatable-read transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any

from psycopg import pq

from neardup.storage import pair_list
from neardup.storage.connect import connect, translated
from neardup.storage.scope import Scope, read_snapshot

# Rows libpq hands over at a time when it can stream in chunks (libpq 17 and later; before that, one
# row at a time). The listing is one statement the server runs to its end, rows flowing as the reader
# takes them; a server-side cursor (DECLARE) instead kept PostgreSQL from a parallel plan and cost a
# round trip per fetch.
_STREAM_ROWS = 10_000
_CHUNKS_FROM_LIBPQ = 170_000


def _stream(
    url: str, where: Scope, doing: str, query: str | Callable[[Scope], str], params: dict[str, Any]
) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query`` (or of the query it makes on the listing's scope, reading in its
    snapshot first and binding into ``params`` what it read) as they come."""
    size = _STREAM_ROWS if pq.version() >= _CHUNKS_FROM_LIBPQ else 1
    with translated(doing), closing(connect(url)) as conn, conn.transaction():
        read_snapshot(conn)
        scope = Scope(conn, where.schema, where.collection_id, where.distributed)
        text = query if isinstance(query, str) else query(scope)
        yield from conn.cursor(binary=True).stream(scope.sql(text), params, size=size)


@contextmanager
def snapshot(url: str, scope: Scope, doing: str) -> Iterator[Scope]:
    """``scope``'s collection on a connection of its own, in one repeatable-read snapshot, for a
    listing made in Python from several reads (a cluster's complete pairs)."""
    with translated(doing), closing(connect(url)) as conn, conn.transaction():
        read_snapshot(conn)
        yield Scope(conn, scope.schema, scope.collection_id, scope.distributed)


def pairs(
    url: str, where: Scope, min_similarity: float, doing: str, cluster: int | None = None
) -> Iterator[tuple[str, str, float]]:
    """Every stored pair of documents at or above ``min_similarity`` (copies included), by (id_a,
    id_b), of the collection of ``where`` (whose connection is not used: the listing opens its
    own); with ``cluster``, those of that cluster only."""
    among = "SELECT content_id FROM {contents_p} WHERE cluster_id = %(k)s" if cluster is not None else None
    for id_a, id_b, sim in _stream(
        url,
        where,
        doing,
        f"WITH {pair_list.cte(where, among)} "
        "SELECT id_a, id_b, similarity FROM dp WHERE similarity >= %(m)s ORDER BY id_a, id_b",
        {"c": where.collection_id, "m": min_similarity, "k": cluster},
    ):
        yield id_a, id_b, float(sim)


def clusters(url: str, where: Scope, doing: str) -> Iterator[tuple[int, str, bool, bool]]:
    """(cluster, id, representative, dense) of every document in a cluster of two or more, by
    cluster (its stored, lasting id: the oldest first), ids sorted within; dense says it is one of
    ``dense_clusters`` (its stored pairs a connecting subset)."""
    if where.distributed:
        yield from _distributed_clusters(url, where, doing)
        return
    yield from _stream(
        url,
        where,
        doing,
        "SELECT x.cluster, x.id, x.representative, k.cluster IS NOT NULL FROM {s}.cluster_list x "
        "LEFT JOIN (SELECT cluster FROM {s}.dense_clusters WHERE collection_id = %(c)s) k "
        "ON k.cluster = x.cluster WHERE x.collection_id = %(c)s ORDER BY x.cluster, x.id",
        {"c": where.collection_id},
    )


# The cluster_list view numbers each cluster's documents in a window by cluster, which Citus
# computes on the coordinator after moving there every document of every collection of the schema
# (its filters are not pushed into the view). On a distributed collection the listing reads the
# clusters instead by ranges of their ids, each range's documents selected on the shards by the
# contents' cluster index and numbered on the coordinator as the view numbers them (the
# representative by the collection's ``keep``, migration 0009): the first rows come after one
# small range, and the whole listing reads each document once.
_CLUSTER_RANGE = """
WITH m AS MATERIALIZED (
    SELECT t.cluster_id AS cluster, d.external_id AS id, d.doc_id, d.meta,
           CASE WHEN %(keep)s = 'longest' THEN coalesce(length(d.text), t.shingle_count) END AS length
    FROM {contents_p} t
    JOIN {documents_p} d ON d.collection_id = t.collection_id AND d.content_id = t.content_id
    WHERE t.collection_id = %(c)s AND t.cluster_id >= %(lo)s AND t.cluster_id < %(hi)s
        AND t.shingle_count > 0
), dense AS MATERIALIZED (
    SELECT cluster_id AS cluster FROM {contents_p}
    WHERE collection_id = %(c)s AND cluster_id >= %(lo)s AND cluster_id < %(hi)s
    GROUP BY cluster_id HAVING count(*) >= %(dense)s
)
SELECT x.cluster, x.id, x.representative, x.cluster IN (SELECT cluster FROM dense) FROM (
    SELECT cluster, id, row_number() OVER w = 1 AS representative,
           count(*) OVER (PARTITION BY cluster) AS size
    FROM m
    WINDOW w AS (PARTITION BY cluster ORDER BY
        length DESC NULLS LAST,
        CASE WHEN %(keep)s = 'id' THEN id END,
        CASE WHEN %(keep)s LIKE 'meta:%%' AND %(keep)s NOT LIKE '%%:desc'
            THEN meta -> split_part(%(keep)s, ':', 2) END NULLS LAST,
        CASE WHEN %(keep)s LIKE 'meta:%%:desc' THEN meta -> split_part(%(keep)s, ':', 2) END DESC NULLS LAST,
        doc_id)
) x WHERE x.size > 1 ORDER BY x.cluster, x.id
"""

# Cluster ids read in the first range; each next range is twice as wide.
_FIRST_RANGE = 4096


def _settings(scope: Scope) -> tuple[str, int, int] | None:
    """The collection's keep policy, next content id and dense cluster size."""
    row = scope.conn.execute(
        scope.sql(
            "SELECT keep, next_content_id, coalesce((params ->> 'dense_cluster_size')::bigint, 128) "
            "FROM {s}.collections WHERE collection_id = %s"
        ),
        (scope.collection_id,),
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]), int(row[2]))


def cluster_range(scope: Scope, lo: int, hi: int) -> list[tuple[int, str, bool, bool]]:
    """``clusters``' rows of the clusters with ids in [lo, hi), read as on a distributed collection."""
    found = _settings(scope)
    if found is None:
        return []
    keep, _, dense = found
    return _range(scope, keep, dense, lo, hi)


def _range(scope: Scope, keep: str, dense: int, lo: int, hi: int) -> list[tuple[int, str, bool, bool]]:
    params = {"c": scope.collection_id, "keep": keep, "dense": dense, "lo": lo, "hi": hi}
    return [
        (int(cluster), str(doc_id), bool(representative), bool(is_dense))
        for cluster, doc_id, representative, is_dense in scope.conn.execute(scope.sql(_CLUSTER_RANGE), params)
    ]


# The same of given clusters: their ids sent to every shard as one array (a page's worth).
_CLUSTERS_LISTED = _CLUSTER_RANGE.replace(
    "cluster_id >= %(lo)s AND cluster_id < %(hi)s", "cluster_id = ANY(%(ks)s::int8[])"
).replace("t.cluster_id >= %(lo)s AND t.cluster_id < %(hi)s", "t.cluster_id = ANY(%(ks)s::int8[])")


def clusters_listed(scope: Scope, clusters: list[int]) -> list[tuple[int, str, bool, bool]]:
    """``clusters``' rows of the given clusters (those of two or more documents), read as on a
    distributed collection."""
    found = _settings(scope)
    if found is None or not clusters:
        return []
    keep, _, dense = found
    params = {"c": scope.collection_id, "keep": keep, "dense": dense, "ks": sorted(clusters)}
    return [
        (int(cluster), str(doc_id), bool(representative), bool(is_dense))
        for cluster, doc_id, representative, is_dense in scope.conn.execute(
            scope.sql(_CLUSTERS_LISTED), params
        )
    ]


# The size (documents with a shingle) of every cluster of two or more documents, in one task a
# shard: the contents that say their cluster has two documents or more, each with its documents
# (grouped by the distribution column, so on its shard): one whose cluster id is not its own (only
# a cluster's first content has its id), one of two documents, and one that is the first content
# of a stored pair (the clusters are the stored pairs' components, so the first content of a
# cluster of two texts or more is the first of a pair; the pair lives on its shard). A cluster
# found without its first content, should one be left so, has that content's documents looked up
# by its id (sent to every shard as one intermediate result). Grouping every content by its cluster
# would move a row for each content of the collection to the coordinator.
_CLUSTER_MEMBERS = """
SELECT t.cluster_id, t.content_id = t.cluster_id, count(*) FROM {contents_p} t
JOIN {documents_p} d ON d.collection_id = t.collection_id AND d.content_id = t.content_id
LEFT JOIN (SELECT content_a FROM {pairs_p} WHERE collection_id = %(c)s GROUP BY content_a) p
    ON p.content_a = t.content_id
WHERE t.collection_id = %(c)s AND t.shingle_count > 0
GROUP BY t.content_id, t.cluster_id, p.content_a
HAVING t.cluster_id <> t.content_id OR count(*) > 1 OR p.content_a IS NOT NULL"""
_CLUSTER_FIRSTS = """
WITH k AS MATERIALIZED (SELECT unnest(%(ks)s::int8[]) AS content_id)
SELECT t.content_id, count(*) FROM {contents_p} t JOIN k ON k.content_id = t.content_id
JOIN {documents_p} d ON d.collection_id = t.collection_id AND d.content_id = t.content_id
WHERE t.collection_id = %(c)s AND t.cluster_id = t.content_id AND t.shingle_count > 0
GROUP BY t.content_id"""


def cluster_sizes(scope: Scope, most: int = pair_list.HELD_MOST) -> dict[int, int] | None:
    """The documents of each cluster of two or more, by cluster id (as ``cluster_list`` counts them);
    None past ``most`` rows read, for the caller to let the server group them instead."""
    sizes: dict[int, int] = {}
    counted: set[int] = set()
    cursor = scope.conn.execute(scope.sql(_CLUSTER_MEMBERS), {"c": scope.collection_id})
    read = 0
    while batch := cursor.fetchmany(10_000):
        read += len(batch)
        if read > most:
            cursor.close()
            return None
        for cluster, first, n in batch:
            sizes[int(cluster)] = sizes.get(int(cluster), 0) + int(n)
            if first:
                counted.add(int(cluster))
    missing = sorted(set(sizes) - counted)
    if missing:
        params = {"c": scope.collection_id, "ks": missing}
        for cluster, n in scope.conn.execute(scope.sql(_CLUSTER_FIRSTS), params):
            sizes[int(cluster)] += int(n)
    return {k: n for k, n in sizes.items() if n > 1}


def _distributed_clusters(url: str, where: Scope, doing: str) -> Iterator[tuple[int, str, bool, bool]]:
    with snapshot(url, where, doing) as scope:
        found = _settings(scope)
        if found is None:
            return
        keep, end, dense = found
        lo, width = 0, _FIRST_RANGE
        while lo < end:
            yield from _range(scope, keep, dense, lo, lo + width)
            lo, width = lo + width, width * 2
