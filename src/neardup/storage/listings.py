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

from neardup.storage.connect import connect, translated
from neardup.storage.scope import Scope, read_snapshot

# Rows libpq hands over at a time when it can stream in chunks (libpq 17 and later; before that, one
# row at a time). The listing is one statement the server runs to its end, rows flowing as the reader
# takes them; a server-side cursor (DECLARE) instead kept PostgreSQL from a parallel plan and cost a
# round trip per fetch.
_STREAM_ROWS = 10_000
_CHUNKS_FROM_LIBPQ = 170_000


def _stream(
    url: str, schema: str, collection_id: int, doing: str, query: str, params: dict[str, Any]
) -> Iterator[tuple[Any, ...]]:
    size = _STREAM_ROWS if pq.version() >= _CHUNKS_FROM_LIBPQ else 1
    with translated(doing), closing(connect(url)) as conn, conn.transaction():
        read_snapshot(conn)
        scope = Scope(conn, schema, collection_id)
        yield from conn.cursor(binary=True).stream(scope.sql(query), params, size=size)


def pairs(
    url: str, schema: str, collection_id: int, min_similarity: float, doing: str
) -> Iterator[tuple[str, str, float]]:
    """Every pair of documents at or above ``min_similarity`` (copies included), by (id_a, id_b)."""
    for id_a, id_b, sim in _stream(
        url,
        schema,
        collection_id,
        doing,
        "SELECT id_a, id_b, similarity FROM {s}.pair_list WHERE collection_id = %(c)s "
        "AND similarity >= %(m)s ORDER BY id_a, id_b",
        {"c": collection_id, "m": min_similarity},
    ):
        yield id_a, id_b, float(sim)


def clusters(url: str, schema: str, collection_id: int, doing: str) -> Iterator[tuple[int, str, bool]]:
    """(cluster, id, representative) of every document in a cluster of two or more, by cluster
    (its stored, lasting id: the oldest first), ids sorted within."""
    yield from _stream(
        url,
        schema,
        collection_id,
        doing,
        "SELECT cluster, id, representative FROM {s}.cluster_list WHERE collection_id = %(c)s "
        "ORDER BY cluster, id",
        {"c": collection_id},
    )
