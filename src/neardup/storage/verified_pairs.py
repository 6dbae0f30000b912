"""The verified pairs table: (content_a < content_b, similarity, method) of each collection."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.storage.binary import Int8s, copy_stream
from neardup.storage.scope import Scope


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
        (scope.collection_id, Int8s(content_ids)),
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
        {"c": scope.collection_id, "ids": Int8s(content_ids)},
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


def delete_all(scope: Scope) -> None:
    """Remove every stored pair of the collection (before they are recomputed). A DELETE, not a
    TRUNCATE: a listing still open on another connection keeps reading its snapshot instead of
    blocking the rebuild (and TRUNCATE would not be safe for such snapshots)."""
    scope.conn.execute(scope.sql("DELETE FROM {pairs_p}"))
