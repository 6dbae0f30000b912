"""Listings of pairs and clusters, streamed on a connection of their own.

A listing gets its own connection, so that an iterator left open never holds a transaction on the
index's connection: writes made meanwhile commit on their own, and the listing keeps reading the one
snapshot it began with (a repeatable-read transaction).
"""

from __future__ import annotations

from collections.abc import Iterator
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
    url: str, where: Scope, doing: str, query: str, params: dict[str, Any]
) -> Iterator[tuple[Any, ...]]:
    size = _STREAM_ROWS if pq.version() >= _CHUNKS_FROM_LIBPQ else 1
    with translated(doing), closing(connect(url)) as conn, conn.transaction():
        read_snapshot(conn)
        scope = Scope(conn, where.schema, where.collection_id, where.distributed)
        yield from conn.cursor(binary=True).stream(scope.sql(query), params, size=size)


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
    yield from _stream(
        url,
        where,
        doing,
        "SELECT x.cluster, x.id, x.representative, k.cluster IS NOT NULL FROM {s}.cluster_list x "
        "LEFT JOIN (SELECT cluster FROM {s}.dense_clusters WHERE collection_id = %(c)s) k "
        "ON k.cluster = x.cluster WHERE x.collection_id = %(c)s ORDER BY x.cluster, x.id",
        {"c": where.collection_id},
    )
