"""Listings of pairs and clusters, streamed on a connection of their own.

A listing reads through a server-side cursor, which needs an open transaction. It gets its own
connection, so that an iterator left open never holds a transaction on the index's connection:
writes made meanwhile commit on their own, and the listing keeps reading the one snapshot it began
with.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from typing import Any

from neardup.storage.connect import connect, translated
from neardup.storage.scope import Scope, read_snapshot

# Rows fetched per round trip when streaming listings through a server-side cursor.
_STREAM_ROWS = 10_000


def _stream(
    url: str, schema: str, collection_id: int, doing: str, query: str, params: dict[str, Any]
) -> Iterator[tuple[Any, ...]]:
    with translated(doing), closing(connect(url)) as conn, conn.transaction():
        read_snapshot(conn)
        scope = Scope(conn, schema, collection_id)
        with conn.cursor(name="neardup_stream") as cur:
            cur.itersize = _STREAM_ROWS
            cur.execute(scope.sql(query), params)
            yield from cur


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
    """(cluster, id, representative) of every document in a cluster of two or more, clusters in the
    order of their representatives (smallest id), ids sorted within."""
    yield from _stream(
        url,
        schema,
        collection_id,
        doing,
        "SELECT cluster, id, representative FROM (SELECT cluster, id, representative, "
        "min(id) OVER (PARTITION BY cluster) AS first FROM {s}.cluster_list WHERE collection_id = %(c)s) x "
        "ORDER BY first, id",
        {"c": collection_id},
    )
