"""Statistics of a collection: row counts, the fullest buckets and the size on disk."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from neardup.errors import InternalError
from neardup.storage import pair_list
from neardup.storage.binary import Int2s, Int8s, signature_matrix
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
    if scope.distributed:
        # Citus computes the view on the coordinator from the contents of every collection of the
        # schema; the collection's own partition is grouped here instead.
        rows = scope.conn.execute(
            scope.sql(
                "SELECT t.cluster_id, count(DISTINCT t.content_id), count(d.doc_id) FROM {contents_p} t "
                "LEFT JOIN {documents_p} d ON d.collection_id = t.collection_id "
                "AND d.content_id = t.content_id WHERE t.collection_id = %(c)s AND t.cluster_id IN ("
                "SELECT cluster_id FROM {contents_p} WHERE collection_id = %(c)s GROUP BY cluster_id "
                "HAVING count(*) >= (SELECT coalesce((params ->> 'dense_cluster_size')::bigint, 128) "
                "FROM {s}.collections WHERE collection_id = %(c)s)) GROUP BY t.cluster_id ORDER BY 2 DESC, 1"
            ),
            {"c": scope.collection_id},
        ).fetchall()
        return [(int(c), int(n), int(m)) for c, n, m in rows]
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


def sampled_dense_clusters(scope: Scope, id_span: int, size: int) -> list[tuple[int, int, int]]:
    """``dense_clusters`` of a collection whose counts are estimated (``estimated``), found
    through the sample of ``windows``: the clusters of the sampled contents, each then counted
    whole by the contents' cluster index, kept when of ``size`` contents or more. A dense cluster
    has at least ``size`` contents, so the sample misses one with a probability of at most (1 -
    the sampled share of the ids) ** ``size``; the grouping of every content by its cluster that
    ``dense_clusters`` runs would move a row a cluster from every shard to the coordinator."""
    spans = windows(scope.collection_id, id_span)
    from_t, params = _windowed("{contents_p}", "t", "content_id", scope.collection_id, spans)
    seen = [
        int(r[0])
        for r in scope.conn.execute(
            scope.sql(f"SELECT DISTINCT t.cluster_id FROM {from_t} WHERE t.cluster_id <> t.content_id"),
            params,
        ).fetchall()
    ]
    if not seen:
        return []
    rows = scope.conn.execute(
        scope.sql(
            "SELECT t.cluster_id, count(DISTINCT t.content_id), count(d.doc_id) FROM {contents_p} t "
            "LEFT JOIN {documents_p} d ON d.collection_id = t.collection_id AND d.content_id = t.content_id "
            "WHERE t.collection_id = %s AND t.cluster_id = ANY(%s) GROUP BY t.cluster_id "
            "HAVING count(DISTINCT t.content_id) >= %s ORDER BY 2 DESC, 1"
        ),
        (scope.collection_id, seen, size),
    ).fetchall()
    return [(int(c), int(n), int(m)) for c, n, m in rows]


def clusters_of(scope: Scope, external_ids: list[str]) -> dict[str, tuple[int, int]]:
    """The cluster of each stored document named (by external id) and its contents. In two
    lookups, on one server as on a distributed collection, where the contents of a cluster are on
    other shards than the document's content (a subquery per document there is a join that Citus
    refuses): the documents' clusters, then the contents of those clusters."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT d.external_id, t.cluster_id FROM {documents_p} d "
            "JOIN {contents_p} t ON t.collection_id = d.collection_id AND t.content_id = d.content_id "
            "WHERE d.collection_id = %s AND d.external_id = ANY(%s)"
        ),
        (scope.collection_id, external_ids),
    ).fetchall()
    if not rows:
        return {}
    sizes = dict(
        scope.conn.execute(
            scope.sql(
                "SELECT cluster_id, count(*) FROM {contents_p} WHERE collection_id = %s "
                "AND cluster_id = ANY(%s) GROUP BY cluster_id"
            ),
            (scope.collection_id, sorted({int(k) for _, k in rows})),
        ).fetchall()
    )
    return {d: (int(k), int(sizes[k])) for d, k in rows}


def listed_counts(
    scope: Scope, id_spans: dict[int, int], distributed: bool = False
) -> tuple[dict[int, dict[str, int]], set[int]]:
    """Documents, pairs (stored pairs of distinct texts), clusters and pairs of documents
    (``document_pairs``) of several collections of the scope's schema (``distributed`` if its
    collections are), given as {collection id: its ``next_content_id``}, as ``collection_counts``
    has them; and which of them are estimated. The exact ones are counted together, each count a
    statement that reads the schema's tables once for all of them (on a distributed schema, a
    statement on every shard however many there are)."""
    keys = ("documents", "pairs", "clusters", "document_pairs")
    found: dict[int, dict[str, int]] = {c: dict.fromkeys(keys, 0) for c in id_spans}
    guessed = {c for c, span in id_spans.items() if distributed and span > ESTIMATE_ABOVE}
    for c in guessed:
        sampled = sample_counts(scope.with_collection(c, True), id_spans[c])
        found[c] = {k: sampled[k] for k in keys}
    counted = [c for c in id_spans if c not in guessed]
    if not counted:
        return found, guessed
    document_pairs = (
        "document_pairs",
        f"WITH {pair_list.cte_of_collections(distributed)} "
        "SELECT collection_id, count(*) FROM dp GROUP BY collection_id",
    )
    for what, query in (*LISTED_COUNTS, document_pairs):
        for row in scope.conn.execute(scope.sql(query), {"cs": counted}).fetchall():
            found[int(row[0])][what] = int(row[1])
    return found, guessed


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
    params: dict[str, Any] = {"c": scope.collection_id}
    if scope.distributed:  # read in steps, and counted here: nothing to send back
        rows = pair_list.pairs_of_documents(scope, params)
        if rows is not None:
            return len(rows)
    query = f"WITH {pair_list.cte(scope)} SELECT count(*) FROM dp"
    row = scope.conn.execute(scope.sql(query), params).fetchone()
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


def sampled_signatures(scope: Scope, id_span: int, num_perm: int) -> tuple[Any, Any, float]:
    """The signatures of the contents in the sample's ``windows`` (sorted ids, a row each), and the
    ids the sample stands for per id in it (the scale of ``sample_counts``): each window an index
    range of the distribution column, read on every shard; the rows put end to end on the
    coordinator."""
    spans = windows(scope.collection_id, id_span)
    from_s, params = _windowed("{signatures_p}", "s", "content_id", scope.collection_id, spans)
    with scope.conn.cursor(binary=True) as cur:
        rows = cur.execute(scope.sql(f"SELECT s.content_id, s.signature FROM {from_s}"), params).fetchall()
    rows.sort(key=lambda r: int(r[0]))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, signature_matrix([r[1] for r in rows], num_perm), id_span / sum(b - a + 1 for a, b in spans)


def bucket_sizes(scope: Scope, band: Any, bucket: Any) -> list[tuple[int, int, int]]:
    """(band, bucket, contents) of the given buckets (distinct (band, bucket) pairs) that have rows:
    each a lookup of the bucket index on the shard of its key."""
    rows = scope.conn.execute(
        scope.sql(
            "SELECT b.band, b.bucket, count(*) FROM unnest(%s::int2[], %s::int8[]) AS k(band, bucket) "
            "JOIN {buckets_p} b ON b.collection_id = %s AND b.band = k.band AND b.bucket = k.bucket "
            "GROUP BY b.band, b.bucket"
        ),
        (Int2s(band), Int8s(bucket), scope.collection_id),
    ).fetchall()
    return [(int(r[0]), int(r[1]), int(r[2])) for r in rows]


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


# Counts of a distributed collection of more content ids than ESTIMATE_ABOVE are estimated from a
# sample of its contents, not counted: an exact count is a scan of every shard of several tables
# (the clusters and the pairs of documents joined on the shards, then merged on the coordinator),
# which grows with the collection however many workers share it. The sample is SAMPLE_WINDOWS
# windows of consecutive content ids, one in each equal stretch of the ids handed out (so it
# follows the order of ingest), at offsets fixed by the collection's id, so the estimate moves
# only when the collection does. Each window is an index range on the distribution column: every
# shard reads only its own contents, pairs and documents in the windows, about SAMPLE_IDS in all.
# One server counts exactly: its counts are index scans on one machine, and a collection not
# distributed pays nothing for the estimates.
ESTIMATE_ABOVE = 50_000
SAMPLE_IDS = 8_192
SAMPLE_WINDOWS = 32

EXACT = "exact"
ESTIMATED = "estimated"


def windows(collection_id: int, id_span: int) -> list[tuple[int, int]]:
    """The sample's windows (first, last content id, inclusive) over ids ``[0, id_span)``."""
    stretch = id_span // SAMPLE_WINDOWS
    width = max(SAMPLE_IDS // SAMPLE_WINDOWS, 1)
    if width >= stretch:  # the sample would be every id: it is, and the counts are exact
        return [(0, max(id_span - 1, 0))]
    picks = random.Random(collection_id)
    found = []
    for w in range(SAMPLE_WINDOWS):
        first = w * stretch + picks.randrange(stretch - width + 1)
        found.append((first, first + width - 1))
    return found


def id_span(scope: Scope) -> int:
    """The collection's ``next_content_id``: its content ids are below it."""
    row = scope.conn.execute(
        scope.sql("SELECT next_content_id FROM {s}.collections WHERE collection_id = %s"),
        (scope.collection_id,),
    ).fetchone()
    return int(row[0]) if row else 0


def estimated(scope: Scope, id_span: int) -> bool:
    """Whether the counts of the scope's collection, whose content ids are below ``id_span``, are
    estimated (``collection_counts``)."""
    return scope.distributed and id_span > ESTIMATE_ABOVE


def collection_counts(scope: Scope, id_span: int) -> tuple[dict[str, int], str]:
    """``counts`` with ``document_pairs``, and how they were found: ``EXACT``, or ``ESTIMATED``
    from a sample of the contents when ``estimated`` says so."""
    if estimated(scope, id_span):
        return sample_counts(scope, id_span), ESTIMATED
    return {**counts(scope), "document_pairs": document_pairs(scope)}, EXACT


def _windowed(
    table: str, alias: str, column: str, collection_id: int, spans: list[tuple[int, int]]
) -> tuple[str, list[Any]]:
    """A FROM item: ``table`` (a template) as ``alias``, its rows whose ``column`` is in one of
    ``spans`` (the windows ``w``, each a range of the index on (collection_id, column), so that
    each shard reads its rows in the windows only), with its parameters in order. The windows are
    two arrays joined to the table: as a condition of one arm a window, the shards' statements
    took several times longer to plan than to run."""
    return (
        f"unnest(%s::int8[], %s::int8[]) AS w(lo, hi) JOIN {table} {alias} "
        f"ON {alias}.collection_id = %s AND {alias}.{column} BETWEEN w.lo AND w.hi",
        [[first for first, _ in spans], [last for _, last in spans], collection_id],
    )


def sample_statements(scope: Scope, id_span: int) -> list[tuple[str, list[Any]]]:
    """The statements ``sample_counts`` runs first, with their parameters (for EXPLAIN in tests):
    the sampled contents with their documents, and the pairs with an end among them."""
    spans, c = windows(scope.collection_id, id_span), scope.collection_id
    from_t, t_params = _windowed("{contents_p}", "t", "content_id", c, spans)
    from_a, a_params = _windowed("{pairs_p}", "p", "content_a", c, spans)
    from_b, b_params = _windowed("{pairs_p}", "p", "content_b", c, spans)
    return [
        (
            f"SELECT t.content_id, t.cluster_id, t.shingle_count > 0, count(d.doc_id) FROM {from_t} "
            "LEFT JOIN {documents_p} d ON d.collection_id = t.collection_id "
            "AND d.content_id = t.content_id AND d.content_id BETWEEN w.lo AND w.hi "
            "GROUP BY t.content_id, t.cluster_id, t.shingle_count",
            t_params,
        ),
        (
            f"SELECT p.content_a, p.content_b FROM {from_a} UNION "
            f"SELECT p.content_a, p.content_b FROM {from_b}",
            [*a_params, *b_params],
        ),
    ]


# The documents of given contents (the second contents of the sampled pairs), and the contents
# and documents of given clusters (those of the sampled contents with a pair): lookups by the
# distribution column, and by the contents' cluster index on each shard.
SECOND_DOCUMENTS = (
    "SELECT content_id, count(*) FROM {documents_p} WHERE collection_id = %s AND content_id = ANY(%s) "
    "GROUP BY content_id"
)
CLUSTER_SIZES = (
    "SELECT t.cluster_id, count(DISTINCT t.content_id), count(*) FROM {contents_p} t "
    "JOIN {documents_p} d ON d.collection_id = t.collection_id AND d.content_id = t.content_id "
    "WHERE t.collection_id = %s AND t.cluster_id = ANY(%s) AND t.shingle_count > 0 GROUP BY t.cluster_id"
)


def sample_counts(scope: Scope, id_span: int) -> dict[str, int]:
    """``counts`` with ``document_pairs`` of a distributed collection, estimated from the contents
    in ``windows`` and their pairs (each count of the sample scaled by the ids it covers):
    documents, contents, stored pairs (by their first content), identical pairs and pairs of
    documents (those of the sampled first contents), and clusters (each sampled content of a
    cluster of two or more documents weighs one over its cluster's contents)."""
    spans = windows(scope.collection_id, id_span)
    scale = id_span / sum(last - first + 1 for first, last in spans)
    (contents_sql, contents_params), (pairs_sql, pairs_params) = sample_statements(scope, id_span)
    sampled = scope.conn.execute(scope.sql(contents_sql), contents_params).fetchall()
    pairs = scope.conn.execute(scope.sql(pairs_sql), pairs_params).fetchall()
    docs = {int(c): int(n) for c, _, _, n in sampled}
    inside = set(docs)
    own_pairs = [(int(a), int(b)) for a, b in pairs if int(a) in inside]
    paired = {int(v) for pair in pairs for v in pair} & inside
    seconds = sorted({b for _, b in own_pairs} - inside)
    if seconds:
        rows = scope.conn.execute(scope.sql(SECOND_DOCUMENTS), (scope.collection_id, seconds)).fetchall()
        docs.update({int(c): int(n) for c, n in rows})
    bearing = [(int(c), int(k), int(n)) for c, k, has_shingles, n in sampled if has_shingles and n > 0]
    joined = sorted({k for c, k, n in bearing if c in paired or k != c})
    sizes: dict[int, tuple[int, int]] = {}
    if joined:
        rows = scope.conn.execute(scope.sql(CLUSTER_SIZES), (scope.collection_id, joined)).fetchall()
        sizes = {int(k): (int(c), int(n)) for k, c, n in rows}
    identical = sum(n * (n - 1) // 2 for _, _, n in bearing)
    clusters = 0.0
    for c, k, n in bearing:
        members, documents = sizes.get(k, (1, n)) if (c in paired or k != c) else (1, n)
        if documents > 1:
            clusters += 1 / members
    sampled_counts = {
        "documents": sum(int(n) for _, _, _, n in sampled),
        "contents": len(sampled),
        "pairs": len(own_pairs),
        "identical_pairs": identical,
        "document_pairs": identical + sum(docs.get(a, 0) * docs.get(b, 0) for a, b in own_pairs),
        "clusters": clusters,
    }
    return {k: round(v * scale) for k, v in sampled_counts.items()}
