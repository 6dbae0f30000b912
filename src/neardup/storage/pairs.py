"""Verified pairs (content_a < content_b, similarity, method) and the listings built on them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.storage.binary import copy_stream
from neardup.storage.scope import Scope

# Rows fetched per round trip when streaming listings through a server-side cursor.
_STREAM_ROWS = 10_000


def insert(
    scope: Scope,
    left: npt.NDArray[np.int64],
    right: npt.NDArray[np.int64],
    similarity: npt.NDArray[np.float64],
    method: str,
) -> None:
    """Store verified pairs (left < right) with binary COPY; ``method`` is 'exact' or 'estimate'."""
    n = left.shape[0]
    if n == 0:
        return
    label = np.frombuffer(method.encode(), dtype=np.uint8)
    data = copy_stream(
        [
            ("int4", np.full(n, scope.collection_id, dtype=np.int32)),
            ("int8", left),
            ("int8", right),
            ("float8", similarity),
            ("bytea", np.broadcast_to(label, (n, label.size))),  # text in binary COPY is its UTF-8 bytes
        ]
    )
    with (
        scope.conn.cursor() as cur,
        cur.copy(
            scope.sql(
                "COPY {pairs_p} (collection_id, content_a, content_b, similarity, method) "
                "FROM STDIN (FORMAT BINARY)"
            )
        ) as cp,
    ):
        cp.write(data)


def among(scope: Scope, content_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Pairs whose first content is one of ``content_ids`` (all edges inside those clusters)."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT content_a, content_b FROM {pairs_p} "
            "WHERE collection_id = %s AND content_a IN (SELECT unnest(%s::int8[]))"
        ),
        (scope.collection_id, list(content_ids)),
    ).fetchall()
    arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def touching(scope: Scope, content_ids: Sequence[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(content_a, content_b) of every stored pair with at least one of ``content_ids``, sorted."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT content_a, content_b FROM {pairs_p} "
            "WHERE collection_id = %(c)s AND content_a IN (SELECT unnest(%(ids)s::int8[])) "
            "UNION "
            "SELECT content_a, content_b FROM {pairs_p} "
            "WHERE collection_id = %(c)s AND content_b IN (SELECT unnest(%(ids)s::int8[])) "
            "ORDER BY 1, 2"
        ),
        {"c": scope.collection_id, "ids": list(content_ids)},
    ).fetchall()
    ends = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return ends[:, 0], ends[:, 1]


def histogram(scope: Scope, lower_edges: Sequence[float]) -> npt.NDArray[np.int64]:
    """Number of stored pairs whose similarity lies in each bin [lower_edges[i], lower_edges[i + 1]),
    the last bin reaching up to 1 inclusive; pairs below the first edge are not counted."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT width_bucket(similarity, %s::float8[]), count(*) FROM {pairs_p} "
            "WHERE collection_id = %s GROUP BY 1"
        ),
        (list(lower_edges), scope.collection_id),
    ).fetchall()
    counts = np.zeros(len(lower_edges) + 1, dtype=np.int64)
    for bucket, n in rows:
        counts[bucket] = n
    return counts[1:]


def truncate(scope: Scope) -> None:
    """Remove every stored pair of the collection (before they are recomputed)."""
    scope.conn.execute(scope.sql("TRUNCATE {pairs_p}"))


def _stream(scope: Scope, query: str, params: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    # A server-side cursor needs a transaction; it keeps memory flat for millions of rows.
    with scope.conn.transaction(), scope.conn.cursor(name="neardup_stream") as cur:
        cur.itersize = _STREAM_ROWS
        cur.execute(scope.sql(query), params)
        yield from cur


def listing(scope: Scope, min_similarity: float) -> Iterator[tuple[str, str, float]]:
    """Every pair of documents at or above ``min_similarity`` (copies included), by (id_a, id_b)."""
    for id_a, id_b, sim in _stream(
        scope,
        "SELECT id_a, id_b, similarity FROM {s}.pair_list WHERE collection_id = %(c)s "
        "AND similarity >= %(m)s ORDER BY id_a, id_b",
        {"c": scope.collection_id, "m": min_similarity},
    ):
        yield id_a, id_b, float(sim)


def clusters(scope: Scope) -> Iterator[tuple[int, str, bool]]:
    """(cluster, id, representative) of every document in a cluster of two or more, clusters in the
    order of their representatives (smallest id), ids sorted within."""
    yield from _stream(
        scope,
        "SELECT cluster, id, representative FROM (SELECT cluster, id, representative, "
        "min(id) OVER (PARTITION BY cluster) AS first FROM {s}.cluster_list WHERE collection_id = %(c)s) x "
        "ORDER BY first, id",
        {"c": scope.collection_id},
    )


def counts(scope: Scope) -> dict[str, int]:
    """Numbers of documents, contents, stored pairs, identical-copy pairs and clusters."""
    row = scope.conn.execute(
        scope.sql(
            """
SELECT (SELECT count(*) FROM {documents_p}),
       (SELECT count(*) FROM {contents_p}),
       (SELECT count(*) FROM {pairs_p}),
       (SELECT coalesce(sum(n * (n - 1) / 2), 0) FROM (
            SELECT count(*) AS n FROM {documents_p} d JOIN {contents_p} t USING (collection_id, content_id)
            WHERE t.shingle_count > 0 GROUP BY d.content_id HAVING count(*) > 1) x),
       (SELECT count(DISTINCT cluster) FROM {s}.cluster_list WHERE collection_id = %s)"""
        ),
        (scope.collection_id,),
    ).fetchone()
    assert row is not None
    keys = ("documents", "contents", "pairs", "identical_pairs", "clusters")
    return {k: int(v) for k, v in zip(keys, row, strict=True)}


def size_on_disk(scope: Scope) -> int:
    """Bytes on disk of the collection's partitions (tables, TOAST and indexes)."""
    row = scope.conn.execute(
        scope.sql(
            "SELECT sum(pg_total_relation_size(p)) FROM unnest(ARRAY["
            "%s::regclass, %s::regclass, %s::regclass, %s::regclass, %s::regclass]) AS p"
        ),
        [
            scope.sql(f"{{{t}_p}}").as_string(scope.conn)
            for t in ("contents", "documents", "signatures", "buckets", "pairs")
        ],
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
