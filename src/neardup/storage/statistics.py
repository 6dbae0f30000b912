"""Statistics of a collection: row counts, the fullest buckets and the size on disk."""

from __future__ import annotations

from neardup.errors import InternalError
from neardup.storage import pair_list
from neardup.storage.scope import Scope

# The clusters of two or more documents (as ``cluster_list`` has them): grouped by their cluster
# id where the view numbers every document of the collection in a window, which Citus can run only
# on the coordinator, after moving every document there.
CLUSTER_COUNT = (
    "SELECT count(*) FROM (SELECT t.cluster_id FROM {documents_p} d "
    "JOIN {contents_p} t ON t.content_id = d.content_id WHERE t.shingle_count > 0 "
    "GROUP BY t.cluster_id HAVING count(*) > 1) k"
)


def counts(scope: Scope) -> dict[str, int]:
    """Numbers of documents, contents (distinct texts), pairs (stored pairs of distinct texts),
    identical pairs (pairs of documents with one text) and clusters (of two or more documents)."""
    row = scope.conn.execute(
        scope.sql(
            f"""
SELECT (SELECT count(*) FROM {{documents_p}}),
       (SELECT count(*) FROM {{contents_p}}),
       (SELECT count(*) FROM {{pairs_p}}),
       (SELECT coalesce(sum(n * (n - 1) / 2), 0) FROM (
            SELECT count(*) AS n FROM {{documents_p}} d
            JOIN {{contents_p}} t USING (collection_id, content_id)
            WHERE t.shingle_count > 0 GROUP BY d.content_id HAVING count(*) > 1) x),
       ({CLUSTER_COUNT})"""
        ),
    ).fetchone()
    if row is None:
        raise InternalError("the statistics query returned no row")
    keys = ("documents", "contents", "pairs", "identical_pairs", "clusters")
    return {k: int(v) for k, v in zip(keys, row, strict=True)}


def dense_clusters(scope: Scope) -> list[tuple[int, int, int]]:
    """(cluster, contents, documents) of each dense cluster (``dense_clusters``), largest first."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT k.cluster, k.contents, count(d.doc_id) FROM {s}.dense_clusters k "
            "JOIN {contents_p} t ON t.collection_id = k.collection_id AND t.cluster_id = k.cluster "
            "JOIN {documents_p} d ON d.collection_id = t.collection_id AND d.content_id = t.content_id "
            "WHERE k.collection_id = %s GROUP BY k.cluster, k.contents ORDER BY 2 DESC, 1"
        ),
        (scope.collection_id,),
    ).fetchall()
    return [(int(c), int(n), int(m)) for c, n, m in rows]


def clusters_of(scope: Scope, external_ids: list[str]) -> dict[str, tuple[int, int]]:
    """The cluster of each stored document named (by external id) and its contents."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT d.external_id, t.cluster_id, (SELECT count(*) FROM {contents_p} u "
            "WHERE u.collection_id = t.collection_id AND u.cluster_id = t.cluster_id) "
            "FROM {documents_p} d JOIN {contents_p} t USING (collection_id, content_id) "
            "WHERE d.collection_id = %s AND d.external_id = ANY(%s)"
        ),
        (scope.collection_id, external_ids),
    ).fetchall()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def listed_counts(
    scope: Scope, collection_ids: list[int], distributed: bool = False
) -> dict[int, dict[str, int]]:
    """Documents, pairs (stored pairs of distinct texts), clusters and pairs of documents
    (``document_pairs``) of several collections of the scope's schema (``distributed`` if its
    collections are), as ``counts`` and ``document_pairs`` have them: each a statement that reads
    the schema's tables once for all of them (on a distributed schema, a statement on every shard
    however many there are)."""
    found: dict[int, dict[str, int]] = {
        c: dict.fromkeys(("documents", "pairs", "clusters", "document_pairs"), 0) for c in collection_ids
    }
    document_pairs = (
        "document_pairs",
        f"WITH {pair_list.cte_of_collections(distributed)} "
        "SELECT collection_id, count(*) FROM dp GROUP BY collection_id",
    )
    for what, query in (*LISTED_COUNTS, document_pairs):
        for row in scope.conn.execute(scope.sql(query), {"cs": collection_ids}).fetchall():
            found[int(row[0])][what] = int(row[1])
    return found


LISTED_COUNTS = (
    (
        "documents",
        "SELECT collection_id, count(*) FROM {s}.documents WHERE collection_id = ANY(%(cs)s::int4[]) "
        "GROUP BY collection_id",
    ),
    (
        "pairs",
        "SELECT collection_id, count(*) FROM {s}.pairs WHERE collection_id = ANY(%(cs)s::int4[]) "
        "GROUP BY collection_id",
    ),
    (
        "clusters",
        "SELECT collection_id, count(*) FROM (SELECT d.collection_id, t.cluster_id FROM {s}.documents d "
        "JOIN {s}.contents t ON t.collection_id = d.collection_id AND t.content_id = d.content_id "
        "WHERE d.collection_id = ANY(%(cs)s::int4[]) AND t.shingle_count > 0 "
        "GROUP BY d.collection_id, t.cluster_id HAVING count(*) > 1) k GROUP BY collection_id",
    ),
)


def document_pairs(scope: Scope) -> int:
    """Pairs of documents, as the pairs listing (``pair_list``) has them: every pair of documents
    whose texts are a stored pair, and the identical pairs."""
    row = scope.conn.execute(
        scope.sql(f"WITH {pair_list.cte(scope)} SELECT count(*) FROM dp"), {"c": scope.collection_id}
    ).fetchone()
    return int(row[0]) if row else 0


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
            "SELECT band, bucket, count(*) AS n FROM {buckets_p} WHERE collection_id = %s AND band >= 0 "
            "GROUP BY band, bucket ORDER BY n DESC, band, bucket LIMIT %s"
        ),
        (scope.collection_id, limit),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def bucket_rows(scope: Scope) -> int:
    """Number of bucket rows of the collection's bands (not its fingerprints)."""
    row = scope.conn.execute(scope.sql("SELECT count(*) FROM {buckets_p} WHERE band >= 0")).fetchone()
    return int(row[0]) if row else 0


# The columns the planner needs to estimate neardup's own statements: keys, joins and filters,
# not texts, metadata or signature arrays, whose statistics cost most of a full ANALYZE's time.
_PLANNED_COLUMNS = {
    "documents": "collection_id, doc_id, external_id, content_id",
    "contents": "collection_id, content_id, content_hash, cluster_id",
    "signatures": "collection_id, content_id",
    "pairs": "collection_id, content_a, content_b",
}


# The sample of the ANALYZE after a bulk load: 10 (3,000 rows a table) where PostgreSQL's default
# is 100 (30,000). These plans need row counts and whether a key is unique, which 3,000 rows give as
# well; autovacuum's own ANALYZE, after the commit, later redoes them at the server's target.
_STATISTICS_TARGET = 10


def refresh_planner_statistics(scope: Scope) -> None:
    """ANALYZE the collection's partitions (the columns neardup's statements filter and join on),
    inside the caller's transaction, whose own uncommitted rows are sampled too. After a batch that
    more than doubles a collection: a partition never analyzed is estimated at a fixed fraction of
    its pages, and with that the planner walked every stored text of the collection to read a few,
    for every query until autovacuum's ANALYZE (docs/benchmarks/profile.md)."""
    tables = ", ".join(f"{{{table}_p}} ({columns})" for table, columns in _PLANNED_COLUMNS.items())
    # For this transaction only: ANALYZE samples 300 rows per unit of the target.
    scope.conn.execute("SELECT set_config('default_statistics_target', %s, true)", (str(_STATISTICS_TARGET),))
    # SKIP_LOCKED: a partition that a VACUUM or another ANALYZE holds is left to it, not waited for.
    scope.conn.execute(scope.sql(f"ANALYZE (SKIP_LOCKED) {tables}"))


def keep_parent_statistics(scope: Scope) -> None:
    """ANALYZE those partitioned tables that have no statistics of their own yet while the
    collection has rows in them. Autovacuum never analyzes a partitioned table, and the views
    (``pair_list``, ``cluster_list``) join the partitioned tables: without their statistics the
    planner took each join key to have 200 values, estimated a collection's pairs at tens of
    billions of rows, and once chose a cartesian product of its documents that filled the disk.
    Statistics kept as fractions of the rows scale as the tables grow, so once is enough. On
    PostgreSQL 18 and later only the partitioned table is sampled (``ONLY``); before, ANALYZE also
    analyzes every partition, once."""
    missing = [
        str(r[0])
        for r in scope.conn.execute(
            "SELECT t FROM unnest(%s::text[]) AS t WHERE NOT EXISTS "
            "(SELECT 1 FROM pg_stats s WHERE s.schemaname = %s AND s.tablename = t AND s.inherited)",
            (list(_PLANNED_COLUMNS), scope.schema),
        ).fetchall()
    ]
    present = [table for table in missing if _has_rows(scope, table)]
    if not present:
        return
    only = "ONLY " if scope.conn.info.server_version >= 180000 else ""
    tables = ", ".join(f"{only}{{s}}.{table} ({_PLANNED_COLUMNS[table]})" for table in present)
    scope.conn.execute("SELECT set_config('default_statistics_target', %s, true)", (str(_STATISTICS_TARGET),))
    scope.conn.execute(scope.sql(f"ANALYZE (SKIP_LOCKED) {tables}"))


def _has_rows(scope: Scope, table: str) -> bool:
    row = scope.conn.execute(scope.sql(f"SELECT EXISTS (SELECT FROM {{{table}_p}})")).fetchone()
    return bool(row and row[0])
