"""Statistics of a collection: row counts, the fullest buckets and the size on disk."""

from __future__ import annotations

from neardup.errors import InternalError
from neardup.storage.scope import Scope


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
    if row is None:
        raise InternalError("the statistics query returned no row")
    keys = ("documents", "contents", "pairs", "identical_pairs", "clusters")
    return {k: int(v) for k, v in zip(keys, row, strict=True)}


_SIZED_TABLES = ("contents", "documents", "signatures", "buckets", "pairs")


def sizes(scope: Scope) -> dict[str, tuple[int, int]]:
    """Bytes on disk of each of the collection's partitions: (rows with their TOAST, indexes); on
    every node when the collection is distributed."""
    prefix = "citus" if scope.distributed else "pg"
    rows = scope.conn.execute(
        scope.sql(
            f"SELECT t, {prefix}_table_size(p), {prefix}_total_relation_size(p) - {prefix}_table_size(p) "
            "FROM unnest(%s::text[], ARRAY[%s::regclass, %s::regclass, %s::regclass, %s::regclass, "
            "%s::regclass]) AS x(t, p)"
        ),
        [list(_SIZED_TABLES), *(scope.sql(f"{{{t}_p}}").as_string(scope.conn) for t in _SIZED_TABLES)],
    ).fetchall()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def largest_buckets(scope: Scope, limit: int) -> list[tuple[int, int, int]]:
    """The ``limit`` fullest buckets: (band, bucket, contents)."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT band, bucket, count(*) AS n FROM {buckets_p} WHERE collection_id = %s "
            "GROUP BY band, bucket ORDER BY n DESC, band, bucket LIMIT %s"
        ),
        (scope.collection_id, limit),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def bucket_rows(scope: Scope) -> int:
    """Number of bucket rows of the collection."""
    row = scope.conn.execute(scope.sql("SELECT count(*) FROM {buckets_p}")).fetchone()
    return int(row[0]) if row else 0
