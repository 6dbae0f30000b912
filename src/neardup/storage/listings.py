"""Listings of pairs and clusters, streamed on a connection of their own.

A listing gets its own connection, so that an iterator left open never holds a transaction on the
index's connection: writes made meanwhile commit on their own, and the listing keeps reading the one
snapshot it began with (a repeatable-read transaction).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
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


def pairs(url: str, where: Scope, min_similarity: float, doing: str) -> Iterator[tuple[str, str, float]]:
    """Every pair of documents at or above ``min_similarity`` (copies included), by (id_a, id_b), of
    the collection of ``where`` (whose connection is not used: the listing opens its own)."""
    for id_a, id_b, sim in _stream(
        url,
        where,
        doing,
        f"WITH {pair_list.cte(where)} "
        "SELECT id_a, id_b, similarity FROM dp WHERE similarity >= %(m)s ORDER BY id_a, id_b",
        {"c": where.collection_id, "m": min_similarity},
    ):
        yield id_a, id_b, float(sim)


def clusters(url: str, where: Scope, doing: str) -> Iterator[tuple[int, str, bool]]:
    """(cluster, id, representative) of every document in a cluster of two or more, clusters in the
    order of their smallest id, ids sorted within; the cluster is its stored, lasting id."""
    yield from _stream(
        url,
        where,
        doing,
        "SELECT cluster, id, representative FROM (SELECT cluster, id, representative, "
        "min(id) OVER (PARTITION BY cluster) AS first FROM {s}.cluster_list WHERE collection_id = %(c)s) x "
        "ORDER BY first, id",
        {"c": where.collection_id},
    )
