"""Contents (one row per distinct normalised text) with their signatures and cluster labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.storage.binary import Int8s, copy_stream, signature_bytes, signature_matrix
from neardup.storage.scope import Scope


def _copy(scope: Scope, table_and_columns: str, data: memoryview) -> None:
    with (
        scope.conn.cursor() as cur,
        cur.copy(scope.sql(f"COPY {table_and_columns} FROM STDIN (FORMAT BINARY)")) as cp,
    ):
        cp.write(data)


def insert(
    scope: Scope,
    content_ids: npt.NDArray[np.int64],
    hashes: Sequence[bytes],
    shingle_counts: npt.NDArray[np.int64],
    signatures: npt.NDArray[np.uint32],
) -> None:
    """Insert new contents (each its own cluster) and their signatures, with binary COPY; contents
    in hash order, so the index on the hash takes them in sequence, not at random."""
    n = content_ids.shape[0]
    by_hash = np.asarray(sorted(range(n), key=hashes.__getitem__), dtype=np.int64)
    coll = np.full(n, scope.collection_id, dtype=np.int32)
    digest = (
        np.frombuffer(b"".join(hashes), dtype=np.uint8).reshape(n, -1) if n else np.empty((0, 16), np.uint8)
    )
    _copy(
        scope,
        "{contents_p} (collection_id, content_id, content_hash, shingle_count, cluster_id)",
        copy_stream(
            [
                ("int4", coll),
                ("int8", content_ids[by_hash]),
                ("bytea", digest[by_hash]),
                ("int4", shingle_counts[by_hash]),
                ("int8", content_ids[by_hash]),
            ]
        ),
    )
    _copy(
        scope,
        "{signatures_p} (collection_id, content_id, signature)",
        copy_stream([("int4", coll), ("int8", content_ids), ("bytea", signature_bytes(signatures))]),
    )


def signatures(
    scope: Scope, content_ids: Sequence[int] | None, num_perm: int
) -> tuple[np.ndarray, np.ndarray]:
    """Stored signatures of the given contents (all of them for None): (sorted ids, one row per id).
    Given contents are read as one value (one ``bytea`` of their signatures end to end, not a row
    each); all of them row by row, since one PostgreSQL value has a size limit that a large
    collection's signatures together pass."""
    with scope.conn.cursor(binary=True) as cur:
        if content_ids is not None:
            row = cur.execute(
                scope.sql(
                    "SELECT array_agg(content_id ORDER BY content_id), "
                    "string_agg(signature, ''::bytea ORDER BY content_id) FROM {signatures_p} "
                    "WHERE collection_id = %s AND content_id IN (SELECT unnest(%s::int8[]))"
                ),
                (scope.collection_id, Int8s(content_ids)),
            ).fetchone()
            if row is None or row[0] is None:
                return np.empty(0, dtype=np.int64), np.empty((0, num_perm), dtype=np.uint32)
            return row[0], signature_matrix([row[1]], num_perm)
        rows = cur.execute(
            scope.sql(
                "SELECT content_id, signature FROM {signatures_p} "
                "WHERE collection_id = %s ORDER BY content_id"
            ),
            (scope.collection_id,),
        ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, signature_matrix([r[1] for r in rows], num_perm)


def bearing_ids(scope: Scope) -> npt.NDArray[np.int64]:
    """Sorted ids of every content with at least one shingle (the ones that can have pairs)."""
    with scope.conn.cursor(binary=True) as cur:
        row = cur.execute(
            scope.sql(
                "SELECT array_agg(content_id ORDER BY content_id) FROM {contents_p} "
                "WHERE collection_id = %s AND shingle_count > 0"
            ),
            (scope.collection_id,),
        ).fetchone()
    if row is None or row[0] is None:
        return np.empty(0, dtype=np.int64)
    return np.asarray(row[0], dtype=np.int64)


def bearing_among(scope: Scope, content_ids: Sequence[int]) -> list[int]:
    """Those of the given contents with at least one shingle."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT content_id FROM {contents_p} WHERE collection_id = %s "
            "AND content_id IN (SELECT unnest(%s::int8[])) AND shingle_count > 0"
        ),
        (scope.collection_id, Int8s(content_ids)),
    ).fetchall()
    return [r[0] for r in rows]


def orphans(scope: Scope, content_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """Those of the given contents that no document points at: (content ids, their cluster ids)."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT t.content_id, t.cluster_id FROM {contents_p} t "
            "WHERE t.collection_id = %s AND t.content_id IN (SELECT unnest(%s::int8[])) AND NOT EXISTS "
            "(SELECT 1 FROM {documents_p} d "
            "WHERE d.collection_id = t.collection_id AND d.content_id = t.content_id)"
        ),
        (scope.collection_id, Int8s(content_ids)),
    ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def delete(scope: Scope, content_ids: Sequence[int]) -> None:
    """Delete contents with their signatures and pairs, in one statement (the caller deletes their
    documents and buckets first)."""
    scope.conn.execute(
        scope.sql(
            "WITH ids AS (SELECT unnest(%(ids)s::int8[]) AS id), "
            "sigs AS (DELETE FROM {signatures_p} WHERE collection_id = %(c)s "
            "AND content_id IN (SELECT id FROM ids)), "
            "edges AS (DELETE FROM {pairs_p} WHERE collection_id = %(c)s "
            "AND (content_a IN (SELECT id FROM ids) OR content_b IN (SELECT id FROM ids))) "
            "DELETE FROM {contents_p} "
            "WHERE collection_id = %(c)s AND content_id IN (SELECT id FROM ids)"
        ),
        {"c": scope.collection_id, "ids": Int8s(content_ids)},
    )


def cluster_labels(scope: Scope, content_ids: Sequence[int]) -> dict[int, int]:
    """The cluster label of each given content."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT content_id, cluster_id FROM {contents_p} "
            "WHERE collection_id = %s AND content_id IN (SELECT unnest(%s::int8[]))"
        ),
        (scope.collection_id, Int8s(content_ids)),
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def label_array(scope: Scope, content_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The cluster label of each given content (all stored), in their order."""
    found = cluster_labels(scope, content_ids.tolist())
    return np.fromiter((found[i] for i in content_ids.tolist()), dtype=np.int64, count=content_ids.size)


def cluster_sizes(scope: Scope, cluster_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """How many contents each given cluster holds (0 for none), in their order."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT cluster_id, count(*) FROM {contents_p} "
            "WHERE collection_id = %s AND cluster_id IN (SELECT unnest(%s::int8[])) GROUP BY cluster_id"
        ),
        (scope.collection_id, Int8s(cluster_ids.tolist())),
    ).fetchall()
    found = {r[0]: r[1] for r in rows}
    return np.fromiter(
        (found.get(i, 0) for i in cluster_ids.tolist()), dtype=np.int64, count=cluster_ids.size
    )


def cluster_members(
    scope: Scope, cluster_ids: Sequence[int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every content in the given clusters: (content ids, sorted; their cluster ids)."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT content_id, cluster_id FROM {contents_p} "
            "WHERE collection_id = %s AND cluster_id IN (SELECT unnest(%s::int8[])) ORDER BY content_id"
        ),
        (scope.collection_id, Int8s(cluster_ids)),
    ).fetchall()
    return _id_columns(rows)


def shown_clusters(scope: Scope, cluster_ids: Sequence[int]) -> list[int]:
    """Those of the given clusters that have two or more documents (the ones listings show)."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT t.cluster_id FROM {contents_p} t JOIN {documents_p} d "
            "ON d.collection_id = t.collection_id AND d.content_id = t.content_id "
            "WHERE t.collection_id = %s AND t.cluster_id IN (SELECT unnest(%s::int8[])) "
            "GROUP BY t.cluster_id HAVING count(*) > 1"
        ),
        (scope.collection_id, Int8s(cluster_ids)),
    ).fetchall()
    return [r[0] for r in rows]


def all_labels(scope: Scope) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every content of the collection: (content ids, sorted; their cluster ids)."""
    with scope.conn.cursor(binary=True) as cur:
        rows = cur.execute(
            scope.sql(
                "SELECT content_id, cluster_id FROM {contents_p} WHERE collection_id = %s ORDER BY content_id"
            ),
            (scope.collection_id,),
        ).fetchall()
    return _id_columns(rows)


def _id_columns(rows: Sequence[tuple[int, int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))


def relabel_clusters(scope: Scope, old: Sequence[int], new: Sequence[int]) -> None:
    """Merge clusters: every content labelled ``old[i]`` is labelled ``new[i]``."""
    scope.conn.execute(
        scope.sql(
            "UPDATE {contents_p} t SET cluster_id = m.new "
            "FROM unnest(%s::int8[], %s::int8[]) AS m(old, new) "
            "WHERE t.collection_id = %s AND t.cluster_id = m.old"
        ),
        (Int8s(old), Int8s(new), scope.collection_id),
    )


def set_labels(scope: Scope, content_ids: Sequence[int], labels: Sequence[int]) -> None:
    """Set the cluster label of each given content (rows already right are not rewritten)."""
    scope.conn.execute(
        scope.sql(
            "UPDATE {contents_p} t SET cluster_id = m.label "
            "FROM unnest(%s::int8[], %s::int8[]) AS m(id, label) "
            "WHERE t.collection_id = %s AND t.content_id = m.id AND t.cluster_id <> m.label"
        ),
        (Int8s(content_ids), Int8s(labels), scope.collection_id),
    )
